// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

// What happened to a profile sample (otelcol_connector_spanprofiles_samples).
const (
	SampleKept          = "kept"
	SampleInvalid       = "invalid"           // an index out of its table, a value or time out of range
	SampleUntimed       = "untimed"           // no timestamp per value (the agent's window kept no times)
	SampleNoThread      = "no_thread"         // no thread.id
	SampleOverBound     = "over_sample_bound" // max_samples were held
	SampleUnsupported   = "unsupported"       // a profile the join cannot read (off-CPU of another profiler, an unknown unit)
	SampleEvictedOnDrop = "evicted"           // held, then dropped with its window to make room
)

// What happened to a profile window (otelcol_connector_spanprofiles_windows).
const (
	WindowKept             = "kept"
	WindowDuplicate        = "duplicate"          // the same process and time range arrived before
	WindowInvalid          = "invalid"            // no time, or a duration of more than a day
	WindowExpired          = "expired"            // kept for `retention`, then dropped
	WindowEvicted          = "evicted"            // dropped early to stay within max_samples
	WindowOverProcessBound = "over_process_bound" // max_processes were held, none could be forgotten
)
