// SPDX-License-Identifier: GPL-2.0-only
/* GPL: the kernel only lets GPL-compatible programs call bpf_probe_read_user
 * and bpf_get_current_task (see LICENSE below). */
/* CPU sampler for OTEP 4947 thread contexts: on every cpu-clock tick that lands
 * on a thread of the target process, resolve that thread's otel_thread_ctx_v1
 * slot from its thread pointer, copy the record, check it did not change under
 * the copy, and send it with the user stack id through a ring buffer.
 *
 * The sampled thread is interrupted on this CPU while we run, and only it
 * writes its record, so a record seen with valid == 1 is complete unless the
 * writer's own stores were reordered: that is what the torn check catches. */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "sampler_abi.h"

#define ENOENT 2
#define STACK_MAP_DEPTH 127 /* PERF_MAX_STACK_DEPTH */
#define TLS_DTV_UNALLOCATED ((__u64)-1)

/* Only the fields we read; CO-RE relocates them against the running kernel's BTF. */
struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_struct thread;
} __attribute__((preserve_access_index));

const volatile struct sampler_config cfg = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* bytes; bounds memory, overflow is counted */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, STACK_MAP_DEPTH * sizeof(__u64));
	__uint(max_entries, 4096);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, COUNTER_COUNT);
} counters SEC(".maps");

/* The 28-byte header as words, for a cheap equality check of two copies. */
struct header_words {
	__u64 w0, w1, w2;
	__u32 w3;
};

static __always_inline void count(__u32 index)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &index);
	if (c)
		*c += 1;
}

/* Address of the thread's otel_thread_ctx_v1 slot, or 0 when it has none. */
static __always_inline int slot_address(__u64 fsbase, __u64 *slot)
{
	if (fsbase == 0)
		return CTX_NO_SLOT;
	if (cfg.access_kind == TLS_ACCESS_STATIC) {
		*slot = fsbase + cfg.tp_offset;
		return CTX_VALID;
	}
	__u64 dtv = 0, len = 0, block = 0;
	if (bpf_probe_read_user(&dtv, sizeof(dtv), (void *)(fsbase + cfg.dtv_offset)))
		return CTX_SLOT_FAULT;
	if (dtv == 0)
		return CTX_NO_SLOT;
	/* glibc keeps the DTV's length in the entry before dtv[0]. */
	if (bpf_probe_read_user(&len, sizeof(len), (void *)(dtv - cfg.dtv_entry_size)))
		return CTX_SLOT_FAULT;
	if (cfg.module_id > len)
		return CTX_NO_SLOT;
	if (bpf_probe_read_user(&block, sizeof(block), (void *)(dtv + cfg.module_id * cfg.dtv_entry_size)))
		return CTX_SLOT_FAULT;
	if (block == 0 || block == TLS_DTV_UNALLOCATED)
		return CTX_NO_SLOT;
	*slot = block + cfg.tls_offset;
	return CTX_VALID;
}

static __always_inline int read_record(struct sample_event *e, __u64 fsbase)
{
	__u64 slot = 0, record = 0;
	struct header_words first, again;

	int state = slot_address(fsbase, &slot);
	if (state != CTX_VALID)
		return state;
	if (bpf_probe_read_user(&record, sizeof(record), (void *)slot))
		return CTX_SLOT_FAULT;
	e->record_addr = record;
	if (record == 0)
		return CTX_NULL_RECORD;
	if (bpf_probe_read_user(&first, CTX_HEADER_SIZE, (void *)record))
		return CTX_RECORD_FAULT;
	__builtin_memcpy(&e->header, &first, CTX_HEADER_SIZE);
	if (e->header.valid != 1)
		return CTX_INVALID;
	__u32 size = e->header.attrs_size;
	if (size > CTX_ATTRS_MAX)
		return CTX_OVERSIZE;
	if (size > 0 && bpf_probe_read_user(e->attrs, size, (void *)(record + CTX_HEADER_SIZE)))
		return CTX_RECORD_FAULT;
	/* Re-read after the copy: valid, ids, flags and size must be unchanged. */
	if (bpf_probe_read_user(&again, CTX_HEADER_SIZE, (void *)record))
		return CTX_RECORD_FAULT;
	if (again.w0 != first.w0 || again.w1 != first.w1 || again.w2 != first.w2 || again.w3 != first.w3)
		return CTX_TORN;
	return CTX_VALID;
}

SEC("perf_event")
int sample_thread_ctx(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if ((pid_tgid >> 32) != cfg.target_tgid)
		return 0;

	struct sample_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(COUNTER_DROPPED);
		return 0;
	}
	e->time_ns = bpf_ktime_get_ns();
	e->record_addr = 0;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->cpu = bpf_get_smp_processor_id();
	e->kind = EVENT_CPU_SAMPLE;
	e->reserved = 0;
	e->duration_ns = 0;
	e->kernel_stack_id = -ENOENT;
	__builtin_memset(&e->header, 0, sizeof(e->header));

	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
	int state = read_record(e, fsbase);
	e->state = state;
	e->user_stack_id = cfg.capture_user_stack ? bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) : -ENOENT;
	count(state);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
