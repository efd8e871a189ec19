// SPDX-License-Identifier: GPL-2.0-only
/* GPL: bpf_probe_read_user and bpf_get_current_task are GPL-only helpers. */
/* Off-CPU tracer for OTEP 4947 thread contexts: when a thread of the target
 * process is switched out, read the record it has published (the thread is
 * stopped right there, in the scheduler, so the read is as safe as a CPU
 * sample's) and its stacks; when it is switched back in, send that with the
 * time it spent off the CPU. "Where was this request waiting."
 *
 * On an event loop, a thread waiting for I/O or timers sits in epoll_wait
 * between callbacks, with no span published: that time is idle time, not any
 * request's. A span gets off-CPU time only when its own code blocks the
 * thread (a synchronous syscall, Atomics.wait, a lock) or it is preempted. */
#include "ctx_reader.bpf.h"

#include <bpf/bpf_tracing.h>

typedef _Bool bool;

/* Switched-out threads, by tid, until they run again. LRU: a thread that
 * exits while switched out does not hold its entry forever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct sample_event);
	__uint(max_entries, 4096);
} switched_out SEC(".maps");

/* An event is too large for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct sample_event);
	__uint(max_entries, 1);
} scratch SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	/* Here `current` is still prev: its record, pid and stacks are read as its own. */
	if (BPF_CORE_READ(prev, tgid) == cfg.target_tgid) {
		__u32 zero = 0;
		struct sample_event *e = bpf_map_lookup_elem(&scratch, &zero);
		if (e) {
			fill_event(e, prev, EVENT_OFF_CPU);
			e->flags = preempt ? EVENT_FLAG_PREEMPTED : 0;
			capture_stacks(e, ctx);
			__u32 tid = e->tid;
			bpf_map_update_elem(&switched_out, &tid, e, BPF_ANY);
		}
	}
	if (BPF_CORE_READ(next, tgid) == cfg.target_tgid) {
		__u32 tid = BPF_CORE_READ(next, pid);
		struct sample_event *e = bpf_map_lookup_elem(&switched_out, &tid);
		if (e) {
			e->duration_ns = bpf_ktime_get_ns() - e->time_ns;
			if (bpf_ringbuf_output(&events, e, sizeof(*e), wakeup_flag()))
				count(COUNTER_DROPPED);
			bpf_map_delete_elem(&switched_out, &tid);
		}
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
