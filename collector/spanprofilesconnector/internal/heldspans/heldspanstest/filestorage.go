// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package heldspanstest gives tests the storage the held spans are kept in as shipped.
package heldspanstest // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/heldspans/heldspanstest"

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
)

// FileStorageHost is a host with contrib's file_storage (bbolt in a test directory) as
// `file_storage`, the extension the shipped collector/storage.yaml configures; shut down when
// the test ends.
func FileStorageHost(t testing.TB) (component.Host, component.ID) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = t.TempDir()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	id := component.MustNewID("file_storage")
	return storagetest.NewStorageHost().WithExtension(id, ext), id
}
