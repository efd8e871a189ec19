// SPDX-License-Identifier: GPL-2.0-only
/* GPL: the kernel only lets GPL-compatible programs call bpf_probe_read_user
 * and bpf_get_current_task (see LICENSE below). */
/* CPU sampler for OTEP 4947 thread contexts: on every cpu-clock tick that lands
 * on a thread of the target process, resolve that thread's otel_thread_ctx_v1
 * slot from its thread pointer, copy the record, check it did not change under
 * the copy, and send it with the stack ids through a ring buffer.
 *
 * The sampled thread is interrupted on this CPU while we run, and only it
 * writes its record, so a record seen with valid == 1 is complete unless the
 * writer's own stores were reordered: that is what the torn check catches. */
#include <linux/bpf_perf_event.h>

#include "ctx_reader.bpf.h"

SEC("perf_event")
int sample_thread_ctx(struct bpf_perf_event_data *ctx)
{
	if ((bpf_get_current_pid_tgid() >> 32) != cfg.target_tgid)
		return 0;

	struct sample_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(COUNTER_DROPPED);
		return 0;
	}
	fill_event(e, (struct task_struct *)bpf_get_current_task(), EVENT_CPU_SAMPLE);
	capture_stacks(e, ctx);
	bpf_ringbuf_submit(e, wakeup_flag());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
