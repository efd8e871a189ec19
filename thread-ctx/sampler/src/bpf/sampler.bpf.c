// SPDX-License-Identifier: GPL-2.0-only
/* GPL: the kernel only lets GPL-compatible programs call bpf_probe_read_user
 * and bpf_get_current_task (see LICENSE below). */
/* The sampler's two programs, sharing the tracked processes, the ring buffer
 * and the counters (ctx_reader.bpf.h):
 *
 * - sample_thread_ctx (perf_event, one cpu-clock event per CPU): on every tick
 *   that lands on a thread of a tracked process, resolve that thread's
 *   otel_thread_ctx_v1 slot from its thread pointer, copy the record, check it
 *   did not change under the copy, and send it with the thread's stacks.
 *
 * - alloc_sample (a uprobe in node, attached only for allocation profiling):
 *   alloc_probe.bpf.h.
 *
 * - off_cpu_switch (sched_switch, loaded only for off-CPU profiling): when a
 *   thread of a tracked process is switched out, read the record it has
 *   published (the thread is stopped right there, in the scheduler, so the
 *   read is as safe as a CPU sample's) and its stacks; when it is switched back
 *   in, send that with the time it spent off the CPU. On an event loop, a
 *   thread waiting for I/O or timers sits in epoll_wait between callbacks with
 *   no span published: that time is idle time, not any request's. A span gets
 *   off-CPU time only when its own code blocks the thread (a synchronous
 *   syscall, Atomics.wait, a lock) or it is preempted.
 *
 * The sampled thread is interrupted on this CPU while we run, and only it
 * writes its record, so a record seen with valid == 1 is complete unless the
 * writer's own stores were reordered: that is what the torn check catches. */
#include <linux/bpf_perf_event.h>

#include "ctx_reader.bpf.h"

#include <bpf/bpf_tracing.h>

typedef _Bool bool;

/* Where each program builds its event: too large for the 512-byte BPF stack,
 * and a slot per program so that neither can overwrite the other's. */
enum scratch_slot {
	SCRATCH_OFF_CPU = 0,
	SCRATCH_CPU = 1,
	SCRATCH_ALLOC = 2,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct sample_event);
	__uint(max_entries, 3);
} scratch SEC(".maps");

/* Set by user space while it measures the programs (record --bpf-stats): each
 * tick of a tracked thread then adds its own run time to COUNTER_CPU_SAMPLE_NS,
 * each switch of one (out or in) to COUNTER_OFF_CPU_NS.
 * The kernel's per-program run time also holds the runs on every other
 * process's ticks, which a busy machine multiplies. */
volatile __u32 time_samples = 0;

SEC("perf_event")
int sample_thread_ctx(struct bpf_perf_event_data *ctx)
{
	__u64 start = time_samples ? bpf_ktime_get_ns() : 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct target *t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t)
		return 0;

	__u32 slot = SCRATCH_CPU;
	struct sample_event *e = bpf_map_lookup_elem(&scratch, &slot);
	if (!e)
		return 0;
	fill_event(e, t, (struct task_struct *)bpf_get_current_task(), EVENT_CPU_SAMPLE);
	struct user_regs r;
	const struct user_regs *regs = NULL;
	if (t->v8.enabled && cfg.capture_user_stack) {
		if ((ctx->regs.cs & 3) == 3) {
			/* Sampled in user mode: the tick's own registers. */
			r.ip = ctx->regs.rip;
			r.sp = ctx->regs.rsp;
			r.bp = ctx->regs.rbp;
			r.r9 = ctx->regs.r9;
			r.r12 = ctx->regs.r12;
			r.fsbase = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), thread.fsbase);
			regs = &r;
		} else if (!task_user_regs(bpf_get_current_task_btf(), &r)) {
			regs = &r;
		}
	}
	capture_stacks(e, ctx, t, regs);
	if (send_event(e))
		count(COUNTER_CPU_DROPPED);
	else
		count(e->state);
	if (start)
		add(COUNTER_CPU_SAMPLE_NS, bpf_ktime_get_ns() - start);
	return 0;
}

/* Switched-out threads of tracked processes, by tid, until they run again.
 * LRU: a thread that exits while switched out does not hold its entry
 * forever. User space sizes it (one entry when off-CPU is not traced). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct sample_event);
	__uint(max_entries, 4096);
} switched_out SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	__u64 start = time_samples ? bpf_ktime_get_ns() : 0;
	int tracked = 0;
	/* Here `current` is still prev: its record, pid and stacks are read as its own. */
	__u32 prev_tgid = BPF_CORE_READ(prev, tgid);
	struct target *t = bpf_map_lookup_elem(&targets, &prev_tgid);
	if (t) {
		tracked = 1;
		__u32 slot = SCRATCH_OFF_CPU;
		struct sample_event *e = bpf_map_lookup_elem(&scratch, &slot);
		if (e) {
			fill_event(e, t, prev, EVENT_OFF_CPU);
			/* Still runnable (TASK_RUNNING, 0): it waits for a CPU, not for an event.
			 * `preempt` alone says so only for preemption inside the kernel; a thread
			 * preempted at the tick in user mode (a busy event loop) switches with
			 * preempt false and its state still running. */
			e->flags = preempt || prev_state == 0 ? EVENT_FLAG_PREEMPTED : 0;
			struct user_regs r;
			int have = t->v8.enabled && cfg.capture_user_stack && !task_user_regs(prev, &r);
			capture_stacks(e, ctx, t, have ? &r : NULL);
			__u32 tid = e->tid;
			bpf_map_update_elem(&switched_out, &tid, e, BPF_ANY);
		}
	}
	__u32 next_tgid = BPF_CORE_READ(next, tgid);
	if (bpf_map_lookup_elem(&targets, &next_tgid)) {
		tracked = 1;
		__u32 tid = BPF_CORE_READ(next, pid);
		struct sample_event *e = bpf_map_lookup_elem(&switched_out, &tid);
		if (e) {
			e->value = bpf_ktime_get_ns() - e->time_ns;
			if (send_event(e))
				count(COUNTER_OFF_CPU_DROPPED);
			else
				count(COUNTER_OFF_CPU_SAMPLES);
			bpf_map_delete_elem(&switched_out, &tid);
		}
	}
	if (start && tracked)
		add(COUNTER_OFF_CPU_NS, bpf_ktime_get_ns() - start);
	return 0;
}

#include "alloc_probe.bpf.h"

char LICENSE[] SEC("license") = "GPL";
