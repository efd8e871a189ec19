// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

// How the thread of a span was chosen (Joined.ThreadSource; the connector writes it as
// thread_ctx.thread.source).
const (
	ThreadFromAttribute = "thread.id"
	ThreadFromSpan      = "span"
	ThreadFromTrace     = "trace"
	ThreadGuessMain     = "main_thread"
)

// What a profiler sends (OTLP/Profiles): `thread-ctx agent` (its encoder, encode.rs, is the
// other side) and the OpenTelemetry eBPF profiler (its reporter's pdata generator).
const (
	// Sample attribute: the thread the sample was taken on (int, the host's thread id). Span
	// attribute: the thread the span started on, as its process knows it (semantic conventions'
	// thread.id; the package writes it).
	attrThreadID = "thread.id"
	// Sample attribute of the agent, for a process in a PID namespace of its own: the thread's
	// id in that namespace (what the process's spans say as thread.id).
	attrThreadVID = "thread.vid"
	// Sample attribute the record may carry (the context manager's `attributes` option): the
	// agent sends a record attribute under its own key, the eBPF profiler under
	// labelPrefix + key (`process.context.label.http.route`).
	AttrHTTPRoute = "http.route"
	labelPrefix   = "process.context.label."
	// Off-CPU sample attribute: the thread's state when it was switched out, `blocked` (asleep)
	// or `preempted` (still runnable).
	attrOffCPUState = "thread.off_cpu.state"
	offCPUPreempted = "preempted"
	// Location attribute: `v8js` for JS frames (both profilers): internal/profiledict reads it
	// (AttrFrameType, FrameTypeJS).

	// Sample types (type/unit) the join reads; a profile of any other type is not read:
	//   samples/count: CPU samples, a count per timestamp (or no values: one per timestamp);
	//     the period (period type cpu/nanoseconds) gives the time each stands for;
	//   off_cpu/nanoseconds: off-CPU intervals, read only from `thread-ctx agent` (scope
	//     agentScope), which records every switch and times each at its switch-out; the eBPF
	//     profiler samples switches (-off-cpu-threshold) and times them at the switch back in;
	//   alloc_space/bytes: the bytes each allocation sample stands for (`alloc_objects` is the
	//     sibling profile of the same samples).
	sampleTypeCPU   = "samples"
	sampleUnitCPU   = "count"
	periodTypeCPU   = "cpu"
	periodUnitCPU   = "nanoseconds"
	SampleTypeOff   = "off_cpu"
	sampleUnitOff   = "nanoseconds"
	sampleTypeAlloc = "alloc_space"
	sampleUnitAlloc = "bytes"
	// The instrumentation scope of `thread-ctx agent`'s profiles.
	agentScope = "thread-ctx"
)

// Resource attributes that tell a process: the same on its spans and on its profiles.
const (
	AttrServiceInstanceID = "service.instance.id"
	AttrServiceName       = "service.name"
	attrHostName          = "host.name"
	// On spans the pid the process sees itself as; on profiles the host's pid (the agent's).
	AttrProcessPID = "process.pid"
	// On profiles of a process in a PID namespace of its own: its pid there (what its spans say).
	attrProcessVPID = "process.vpid"
	attrContainerID = "container.id"
)
