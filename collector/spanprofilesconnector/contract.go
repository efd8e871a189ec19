// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

// What an enriched span carries. These names are a contract: users query them in their trace
// backend and `thread-ctx report --traces` reads them (docs/spanprofiles.md has the table both
// sides follow). Times are doubles in milliseconds, measured on the span's thread between the
// span's start and end.
const (
	// On CPU with this span active.
	AttrCPUSpanMs = "thread_ctx.cpu.span_ms"
	// On CPU in this span's trace (the span and every other span of its trace: its descendants).
	AttrCPUTraceMs = "thread_ctx.cpu.trace_ms"
	// On CPU in other traces' spans: other requests held the thread.
	AttrCPUOtherTracesMs = "thread_ctx.cpu.other_traces_ms"
	// On CPU with no span: GC, the runtime, the event loop itself.
	AttrCPUNoSpanMs = "thread_ctx.cpu.no_span_ms"
	// Off CPU asleep with this trace active: blocked inside it. Only when the agent sends
	// off-CPU profiles; like the next two, time the thread was runnable is not in it.
	AttrOffCPUTraceMs = "thread_ctx.off_cpu.trace_ms"
	// Off CPU asleep while another trace was active: another request blocked the thread.
	AttrOffCPUOtherTracesMs = "thread_ctx.off_cpu.other_traces_ms"
	// Off CPU asleep with no span: the event loop idle, waiting for I/O or timers.
	AttrOffCPUNoSpanMs = "thread_ctx.off_cpu.no_span_ms"
	// Off CPU but runnable, whoever's span was active: the thread waited for a CPU (preempted
	// by other threads, or throttled by its cgroup's CPU quota). Only with off-CPU profiles.
	AttrOffCPURunnableMs = "thread_ctx.off_cpu.runnable_ms"
	// Bytes allocated in this span's trace (int). Only when the agent sends allocation profiles.
	AttrAllocBytes = "thread_ctx.alloc_bytes"
	// The CPU samples behind the cpu.* figures (int): each stands for one sampling period.
	AttrSamples = "thread_ctx.samples"

	// The span event with the details.
	EventProfile = "thread_ctx.profile"
	// String array: the trace's hottest frames on this thread, "function (file:line) NN%".
	EventTopFrames = "top_frames"
	// String array: the other traces that held the thread, "<who> <trace id> <ms>ms: <top frame>".
	EventHeldBy = "held_by"
	// Int and double: the other traces that held the thread but are not in held_by (fewer than
	// 1 % of the span each, or past top_frames), and their ms: held_by's ms plus these add up
	// to cpu.other_traces_ms + off_cpu.other_traces_ms. Only when another trace held it.
	EventHeldByOthers   = "held_by_others"
	EventHeldByOthersMs = "held_by_others_ms"
	// String array: the same time by route, "<route> <ms>ms in <n> requests: <top frame>",
	// longest first; past top_frames routes, the rest as "(<k> other routes) <ms>ms in <n>
	// requests". Its ms add up to the same total.
	EventHeldByRoutes = "held_by_routes"
	// String array: where the trace allocated, "function (file:line) NN%".
	EventTopAllocFrames = "top_alloc_frames"
	// Int: the thread the figures are of.
	EventThreadID = "thread.id"
	// String: how that thread was chosen: "thread.id" (the span says it: its own thread.id
	// attribute, which the package writes at its start), "span" (samples of this span ran on
	// it), "trace" (samples of its trace did), or "main_thread" (none of these: a guess, the
	// process's main thread).
	EventThreadSource = "thread_ctx.thread.source"
	// Double: the CPU sampling period in ms, so that a reader can judge the error of cpu.*.
	EventCPUPeriodMs = "thread_ctx.cpu.period_ms"

	// The span event with the request's path across services, on a trace's first request (a
	// server span whose parent is no call this Collector saw) when it called another service
	// whose server span this Collector saw too (path.go); in the trace tier, over the whole
	// trace, replacing the node's (pathwhole.go).
	EventPath = "thread_ctx.path"
	// String array: the path's hops, heaviest first, top_frames of them, "<hop> <ms>ms: <cause>".
	// A hop is "<service> <route>" (the first request's own time), "waiting on <service>
	// <route>" (a called service's request's own time), "network to <service> <route>" (a call's
	// time outside its callee's span) or "waiting on <peer>" (a call into what the Collector saw
	// no span of: a database, another node). The cause, on the first two, is what the request's
	// thread did, longest first: "cpu <ms>ms in <frame> NN%[, <frame> NN%]" (its two hottest
	// frames), "waiting for a CPU <ms>ms", "held by <who> <ms>ms: <frame>", "blocked <ms>ms", or
	// "no samples". The hops' ms add up to the first request's duration.
	EventPathHops = "hops"
	// Int and double: the hops past top_frames, and their ms.
	EventPathOthers   = "hops_others"
	EventPathOthersMs = "hops_others_ms"
)
