/* SPDX-License-Identifier: GPL-2.0-only */
/* What both BPF programs share: the config user space fills in, the maps every
 * event goes through (each program's object gets its own instance), and the
 * reader of the current thread's OTEP 4947 record.
 *
 * The record is only read for the thread running this program on this CPU
 * (interrupted by a cpu-clock tick, or switching itself out): only that thread
 * writes its record, so it cannot change under the copy unless the writer's
 * own stores were reordered, which the before/after header check catches. */
#ifndef THREAD_CTX_CTX_READER_BPF_H
#define THREAD_CTX_CTX_READER_BPF_H

#include <linux/bpf.h>
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
	int pid;  /* thread id */
	int tgid; /* process id */
	struct thread_struct thread;
} __attribute__((preserve_access_index));

const volatile struct sampler_config cfg = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* bytes; bounds memory, overflow is counted */
} events SEC(".maps");

/* User space sizes it before load (hash buckets: a colliding stack is lost
 * with -EEXIST, which user space counts and reports). */
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

/* Waking the reader costs a self-IPI (irq_work) per event, several µs in a VM
 * (half a sample's cost measured here): wake it only when the ring is filling
 * up; otherwise it drains the ring when its poll times out. */
#define WAKEUP_THRESHOLD (256 * 1024)

static __always_inline __u64 wakeup_flag(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= WAKEUP_THRESHOLD ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

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

/* Fills everything but the stacks for the current thread (which must be
 * `task`), reading its record; counts what the read found. */
static __always_inline void fill_event(struct sample_event *e, struct task_struct *task, __u8 kind)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	e->time_ns = bpf_ktime_get_ns();
	e->record_addr = 0;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->cpu = bpf_get_smp_processor_id();
	e->kind = kind;
	e->flags = 0;
	e->duration_ns = 0;
	__builtin_memset(&e->header, 0, sizeof(e->header));
	__u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
	e->state = read_record(e, fsbase);
	count(e->state);
}

/* Stack ids of the current thread, as configured (-ENOENT: not captured). */
static __always_inline void capture_stacks(struct sample_event *e, void *ctx)
{
	e->user_stack_id = cfg.capture_user_stack ? bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) : -ENOENT;
	e->kernel_stack_id = cfg.capture_kernel_stack ? bpf_get_stackid(ctx, &stacks, 0) : -ENOENT;
}

#endif
