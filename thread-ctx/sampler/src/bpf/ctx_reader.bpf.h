/* SPDX-License-Identifier: GPL-2.0-only */
/* What both programs share: the config user space fills in, the maps every
 * event goes through, the tracked processes, and the reader of the current
 * thread's OTEP 4947 record.
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
#include "nodejs_record.bpf.h"
#include "v8_frames.bpf.h"

#define ENOENT 2
#define TLS_DTV_UNALLOCATED ((__u64)-1)
/* Tracked processes at once; user space refuses more and says so. */
#define MAX_TARGETS 8192

/* Only the fields we read; CO-RE relocates them against the running kernel's BTF. */
struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;  /* thread id */
	int tgid; /* process id */
	struct thread_struct thread;
} __attribute__((preserve_access_index));

/* The kernel's pt_regs (not the UAPI one <linux/bpf_perf_event.h> brings): a
 * task's user registers, saved where it entered the kernel. */
struct pt_regs___kernel {
	unsigned long ip, sp, bp, r9, r12;
} __attribute__((preserve_access_index));

/* The user registers of `task` (a BTF pointer: the current task's, or a tracepoint's argument). */
static __always_inline int task_user_regs(struct task_struct *task, struct user_regs *r)
{
	struct pt_regs___kernel *p = (struct pt_regs___kernel *)bpf_task_pt_regs(task);
	if (!p)
		return -1;
	r->ip = BPF_CORE_READ(p, ip);
	r->sp = BPF_CORE_READ(p, sp);
	r->bp = BPF_CORE_READ(p, bp);
	r->r9 = BPF_CORE_READ(p, r9);
	r->r12 = BPF_CORE_READ(p, r12);
	r->fsbase = BPF_CORE_READ(task, thread.fsbase);
	return 0;
}

const volatile struct sampler_config cfg = {};

/* Processes to sample (key: tgid), and how their threads reach their record. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct target);
	__uint(max_entries, MAX_TARGETS);
} targets SEC(".maps");

/* User space sizes it before load (bytes; bounds memory, overflow is counted). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, COUNTER_COUNT);
} counters SEC(".maps");

/* Waking the reader costs a self-IPI (irq_work) per event, several µs in a VM
 * (half a sample's cost measured here): wake it only when the ring is filling
 * up; otherwise it drains the ring when its poll times out. */
static __always_inline __u64 wakeup_flag(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= cfg.wakeup_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* The 28-byte header as words, for a cheap equality check of two copies. */
struct header_words {
	__u64 w0, w1, w2;
	__u32 w3;
};

static __always_inline void add(__u32 index, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &index);
	if (c)
		*c += n;
}

static __always_inline void count(__u32 index)
{
	add(index, 1);
}

/* Address of the thread's otel_thread_ctx_v1 slot, or why there is none. */
static __always_inline int slot_address(const struct target *t, __u64 fsbase, __u64 *slot)
{
	if (t->access_kind == TLS_ACCESS_NONE)
		return CTX_NO_WRITER;
	if (fsbase == 0)
		return CTX_NO_SLOT;
	if (t->access_kind == TLS_ACCESS_STATIC) {
		*slot = fsbase + t->tp_offset;
		return CTX_VALID;
	}
	__u64 dtv = 0, len = 0, block = 0;
	if (bpf_probe_read_user(&dtv, sizeof(dtv), (void *)(fsbase + t->dtv_offset)))
		return CTX_SLOT_FAULT;
	if (dtv == 0)
		return CTX_NO_SLOT;
	/* glibc keeps the DTV's length in the entry before dtv[0]. */
	if (bpf_probe_read_user(&len, sizeof(len), (void *)(dtv - t->dtv_entry_size)))
		return CTX_SLOT_FAULT;
	if (t->module_id > len)
		return CTX_NO_SLOT;
	if (bpf_probe_read_user(&block, sizeof(block), (void *)(dtv + t->module_id * t->dtv_entry_size)))
		return CTX_SLOT_FAULT;
	if (block == 0 || block == TLS_DTV_UNALLOCATED)
		return CTX_NO_SLOT;
	*slot = block + t->tls_offset;
	return CTX_VALID;
}

static __always_inline int read_record(struct sample_event *e, const struct target *t, __u64 fsbase)
{
	__u64 slot = 0, record = 0;
	struct header_words first, again;

	int state = slot_address(t, fsbase, &slot);
	if (state != CTX_VALID)
		return state;
	if (t->schema == SCHEMA_NODEJS) {
		state = nodejs_record(&t->nodejs, slot, &record);
		if (state != CTX_VALID)
			return state;
	} else if (bpf_probe_read_user(&record, sizeof(record), (void *)slot))
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
 * `task`, of the tracked process `t`), reading its record. */
static __always_inline void fill_event(struct sample_event *e, const struct target *t, struct task_struct *task, __u8 kind)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	e->time_ns = bpf_ktime_get_ns();
	e->record_addr = 0;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->cpu = bpf_get_smp_processor_id();
	e->kind = kind;
	e->flags = 0;
	e->value = 0;
	__builtin_memset(&e->header, 0, sizeof(e->header));
	__u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
	e->state = read_record(e, t, fsbase);
}

/* Sends the event as its head, then only the stack frames, JS frames, leaf
 * words and attrs-data it holds (EVENT_HEAD_SIZE + user + kernel + js + leaf +
 * attrs bytes, in that order): a sample of a 20-frame stack is a few hundred
 * bytes in the ring, not the 5 KB struct, so the ring's memory (cold, it
 * cycles through megabytes) is touched for what is sent only. Non-zero when
 * the ring buffer is full. */
static __always_inline long send_event(struct sample_event *e)
{
	/* 64-bit and clamped where used: the verifier must see each length bounded by its array. */
	__s64 user_bytes = e->user_stack_bytes, kernel_bytes = e->kernel_stack_bytes;
	__u64 user = user_bytes > 0 ? (__u64)user_bytes : 0;
	__u64 kernel = kernel_bytes > 0 ? (__u64)kernel_bytes : 0;
	__u64 js = (__u64)e->js_frame_count * sizeof(struct js_frame);
	__u64 leaf = (__u64)e->leaf_word_count * 8;
	__u64 attrs = e->state == CTX_VALID ? e->header.attrs_size : 0;
	if (user > sizeof(e->user_stack))
		user = sizeof(e->user_stack);
	if (kernel > sizeof(e->kernel_stack))
		kernel = sizeof(e->kernel_stack);
	if (js > sizeof(e->js))
		js = sizeof(e->js);
	if (leaf > sizeof(e->leaf_words))
		leaf = sizeof(e->leaf_words);
	if (attrs > sizeof(e->attrs))
		attrs = sizeof(e->attrs);
	barrier_var(user);
	barrier_var(kernel);
	barrier_var(js);
	barrier_var(leaf);
	barrier_var(attrs);
	struct bpf_dynptr rec;
	if (bpf_ringbuf_reserve_dynptr(&events, EVENT_HEAD_SIZE + user + kernel + js + leaf + attrs, 0, &rec)) {
		bpf_ringbuf_discard_dynptr(&rec, 0);
		return -1;
	}
	__u64 at = EVENT_HEAD_SIZE;
	bpf_dynptr_write(&rec, 0, e, EVENT_HEAD_SIZE, 0);
	bpf_dynptr_write(&rec, at, e->user_stack, user, 0);
	at += user;
	bpf_dynptr_write(&rec, at, e->kernel_stack, kernel, 0);
	at += kernel;
	bpf_dynptr_write(&rec, at, e->js, js, 0);
	at += js;
	bpf_dynptr_write(&rec, at, e->leaf_words, leaf, 0);
	at += leaf;
	bpf_dynptr_write(&rec, at, e->attrs, attrs, 0);
	bpf_ringbuf_submit_dynptr(&rec, wakeup_flag());
	return 0;
}

/* The current thread's stacks, copied into the event, as configured.
 * Copying (bpf_get_stack) rather than interning them in a stack map keeps
 * every stack: a stack map loses those that hash to a taken bucket, more
 * the longer it runs, and would need emptying while events still refer to it.
 * A node process whose V8 layout user space enabled gets its user stack walked
 * here instead, with its JS frames' slots (v8_frames.bpf.h), from `regs` (NULL:
 * its user registers could not be had). */
static __always_inline void capture_stacks(struct sample_event *e, void *ctx, const struct target *t, const struct user_regs *regs)
{
	e->js_frame_count = 0;
	e->leaf_word_count = 0;
	if (cfg.capture_user_stack && t->v8.enabled && regs)
		walk_v8_stack(e, &t->v8, regs);
	else
		e->user_stack_bytes = cfg.capture_user_stack ? bpf_get_stack(ctx, e->user_stack, sizeof(e->user_stack), BPF_F_USER_STACK) : -ENOENT;
	e->kernel_stack_bytes = cfg.capture_kernel_stack ? bpf_get_stack(ctx, e->kernel_stack, sizeof(e->kernel_stack), 0) : -ENOENT;
}

#endif
