// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// A trace's (span, thread) pairs and threads per window are bounded.
func TestTraceThreadsBound(t *testing.T) {
	var tt traceThreads
	for i := 0; i < 100; i++ {
		tt.add(pcommon.SpanID{byte(i)}, int64(i))
	}
	assert.Len(t, tt.spans, maxSpansPerTrace)
	assert.Len(t, tt.threads, maxThreadsPerTrace)
}
