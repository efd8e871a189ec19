/* SPDX-License-Identifier: Apache-2.0 */
/* Layouts shared by the BPF sampler and its Rust loader (reader/src/sampler/abi.rs
 * mirrors them; both sides assert the sizes). Change both together. */
#ifndef THREAD_CTX_SAMPLER_ABI_H
#define THREAD_CTX_SAMPLER_ABI_H

#define CTX_HEADER_SIZE 28
/* OTEP 4947: 640-byte recommended record limit minus the header. */
#define CTX_ATTRS_MAX 612

/* How user space told us to reach the TLS slot holding the record pointer. */
enum tls_access_kind {
	TLS_ACCESS_STATIC = 1, /* slot = fsbase + tp_offset */
	TLS_ACCESS_DTV = 2,    /* slot = *(*(fsbase + dtv_offset) + module_id * dtv_entry_size) + tls_offset */
};

/* Filled in .rodata by user space before load, so the verifier prunes unused paths. */
struct sampler_config {
	__u32 target_tgid;
	__u32 access_kind;
	__s64 tp_offset;
	__u64 dtv_offset;
	__u64 dtv_entry_size;
	__u64 module_id;
	__u64 tls_offset;
	__u32 capture_user_stack;
	__u32 capture_kernel_stack;
};

/* What a sample found. Counted per state in the `counters` map too. */
enum ctx_state {
	CTX_NO_SLOT = 0,      /* no thread pointer, or no TLS block for the module in this thread */
	CTX_SLOT_FAULT = 1,   /* reading the DTV or the TLS slot faulted */
	CTX_NULL_RECORD = 2,  /* TLS pointer is NULL: thread publishes no record */
	CTX_RECORD_FAULT = 3, /* reading the record (header or attrs) faulted */
	CTX_INVALID = 4,      /* valid != 1: no context right now (or being written) */
	CTX_VALID = 5,
	CTX_TORN = 6,         /* header changed while it was copied: discarded by readers */
	CTX_OVERSIZE = 7,     /* valid, but attrs-data size > CTX_ATTRS_MAX: malformed */
	CTX_STATE_COUNT = 8,
};

/* counters[] index past the states: ring buffer reservations that failed (lost samples). */
#define COUNTER_DROPPED CTX_STATE_COUNT
#define COUNTER_COUNT (CTX_STATE_COUNT + 1)

enum event_kind {
	EVENT_CPU_SAMPLE = 0, /* sampler.bpf.c: a cpu-clock tick on a target thread */
	EVENT_OFF_CPU = 1,    /* off_cpu.bpf.c: a target thread was switched out for duration_ns */
};

/* sample_event.flags */
#define EVENT_FLAG_PREEMPTED 1 /* off-CPU: switched out while runnable (waited for a CPU, not blocked) */

/* OTEP 4947 record header, byte-packed as in the target's memory. */
struct ctx_header {
	__u8 trace_id[16];
	__u8 span_id[8];
	__u8 valid;
	__u8 flags;
	__u16 attrs_size;
};

struct sample_event {
	__u64 time_ns;        /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u64 record_addr;    /* value of the TLS pointer; 0 when not reached */
	__u32 pid;            /* tgid */
	__u32 tid;
	__s32 user_stack_id;  /* id in the `stacks` map, or -errno (-ENOENT: not captured) */
	__s32 kernel_stack_id;/* likewise; -EFAULT when the sample was taken in user mode */
	__u32 cpu;
	__u8 kind;            /* enum event_kind */
	__u8 state;           /* enum ctx_state */
	__u16 flags;          /* EVENT_FLAG_* */
	__u64 duration_ns;    /* 0 for CPU samples; off-CPU: switched out for this long from time_ns */
	struct ctx_header header; /* copied when state >= CTX_INVALID */
	__u8 attrs[CTX_ATTRS_MAX]; /* first header.attrs_size bytes meaningful when state == CTX_VALID */
};

_Static_assert(sizeof(struct ctx_header) == CTX_HEADER_SIZE, "ctx_header layout");
_Static_assert(sizeof(struct sampler_config) == 56, "sampler_config layout");
_Static_assert(sizeof(struct sample_event) == 688, "sample_event layout");

#endif
