/* SPDX-License-Identifier: GPL-2.0-only */
/* alloc_sample (uprobe, attached by user space at the file offset of
 * v8::internal::SamplingHeapProfiler::SampleObject(Address, size_t) in each
 * tracked process's node binary): V8 calls it once per allocation its
 * sampling heap profiler picks, on the allocating thread, before the object
 * is initialised. The event is the CPU sample's, read the same way: the
 * thread's record through read_record (ctx_reader.bpf.h), the user stack
 * through frame pointers from the probe's registers (the kernel adds the
 * caller's return address at a function's entry). `value` carries the
 * sampled object's size: SampleObject is a member function, so `this` is
 * the first argument register and the size the third.
 *
 * Included at the end of sampler.bpf.c: it shares the targets, the scratch
 * events (its own slot), the ring buffer and the counters with the CPU program. */
#ifndef THREAD_CTX_ALLOC_PROBE_BPF_H
#define THREAD_CTX_ALLOC_PROBE_BPF_H

#include "ctx_reader.bpf.h"

#include <bpf/bpf_tracing.h>

SEC("uprobe")
int alloc_sample(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct target *t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t)
		return 0;

	__u32 slot = SCRATCH_ALLOC;
	struct sample_event *e = bpf_map_lookup_elem(&scratch, &slot);
	if (!e)
		return 0;
	fill_event(e, t, (struct task_struct *)bpf_get_current_task(), EVENT_ALLOC);
	e->value = PT_REGS_PARM3(ctx);
	capture_stacks(e, ctx);
	if (send_event(e))
		count(COUNTER_ALLOC_DROPPED);
	else
		count(e->state == CTX_VALID ? COUNTER_ALLOC_VALID : COUNTER_ALLOC_OTHER);
	return 0;
}

#endif
