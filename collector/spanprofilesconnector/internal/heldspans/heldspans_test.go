// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package heldspans

import (
	"context"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/heldspans/heldspanstest"
)

var self = component.MustNewID("span_profiles")

// spans is one resource's n spans named name.
func spans(name string, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := 0; i < n; i++ {
		ss.Spans().AppendEmpty().SetName(name)
	}
	return td
}

// What one run saved and did not forget, the next run reads back from contrib's file_storage
// (bbolt on disk), in order; what it forgot is gone; the numbers go on from where they were.
// (The connector's persist_test.go runs it through crashes and disk faults.)
func TestSavedUnitsComeBackForgottenOnesDoNot(t *testing.T) {
	host, id := heldspanstest.FileStorageHost(t)

	h, units, err := Open(context.Background(), host, id, self)
	require.NoError(t, err)
	require.Empty(t, units)
	arrived := time.Unix(1_700_000_000, 123)
	seqs, err := h.Save(context.Background(), arrived, []ptrace.Traces{spans("a", 2), spans("b", 3), spans("c", 1)})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, seqs)
	left, err := h.Forget(context.Background(), []uint64{1, 3})
	require.NoError(t, err)
	require.Zero(t, left)
	require.Zero(t, h.Undeleted())
	require.NoError(t, h.Close(context.Background()))

	h, units, err = Open(context.Background(), host, id, self)
	require.NoError(t, err)
	require.Len(t, units, 1)
	assert.Equal(t, uint64(2), units[0].Seq)
	assert.True(t, arrived.Equal(units[0].Arrived))
	assert.Equal(t, 3, units[0].Traces.SpanCount())
	assert.Equal(t, "b", units[0].Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name())
	seqs, err = h.Save(context.Background(), arrived, []ptrace.Traces{spans("d", 1)})
	require.NoError(t, err)
	assert.Equal(t, []uint64{4}, seqs)
	require.NoError(t, h.Close(context.Background()))
}

func TestStorageMustBeAStorageExtension(t *testing.T) {
	_, _, err := Open(context.Background(), storagetest.NewStorageHost(), component.MustNewID("file_storage"), self)
	require.ErrorContains(t, err, `storage is "file_storage": no such extension`)
}
