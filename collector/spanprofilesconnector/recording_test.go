// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A recording under testdata/: what a Collector's file exporter wrote in its proto format, each
// message preceded by its size (4 bytes, big endian), gzipped when the name ends in .gz.

func recordedMessages(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		require.NoError(t, err, path)
		raw, err = io.ReadAll(zr)
		require.NoError(t, err, path)
	}
	var out [][]byte
	for len(raw) > 0 {
		require.GreaterOrEqual(t, len(raw), 4, "%s: a size prefix cut short", path)
		n := int(binary.BigEndian.Uint32(raw))
		require.LessOrEqual(t, n, len(raw)-4, "%s: a message runs past the end", path)
		out = append(out, raw[4:4+n])
		raw = raw[4+n:]
	}
	require.NotEmpty(t, out, "%s holds no message", path)
	return out
}

func recordedProfiles(t *testing.T, path string) []pprofile.Profiles {
	return recorded(t, path, (&pprofile.ProtoUnmarshaler{}).UnmarshalProfiles)
}

func recordedTraces(t *testing.T, path string) []ptrace.Traces {
	return recorded(t, path, (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces)
}

func recorded[T any](t *testing.T, path string, unmarshal func([]byte) (T, error)) []T {
	t.Helper()
	var out []T
	for _, m := range recordedMessages(t, path) {
		v, err := unmarshal(m)
		require.NoError(t, err, path)
		out = append(out, v)
	}
	return out
}

// replay sends a recording through a connector as a Collector would have: the profiles as they
// came, then the spans, then time past max_wait so that every span has left. It returns what
// left, as it left.
func replay(t *testing.T, profiles []pprofile.Profiles, spans []ptrace.Traces) []ptrace.Traces {
	t.Helper()
	h := newHarness(t, nil)
	for _, pd := range profiles {
		require.NoError(t, h.profiles.ConsumeProfiles(t.Context(), pd))
	}
	for _, td := range spans {
		h.sendTraces(td)
	}
	h.advance(createDefaultConfig().MaxWait + time.Second)
	return h.sink.AllTraces()
}

// spansOf lists every span of the traces.
func spansOf(tds []ptrace.Traces) []ptrace.Span {
	var out []ptrace.Span
	for _, td := range tds {
		forEachSpan(td, func(s ptrace.Span) { out = append(out, s) })
	}
	return out
}
