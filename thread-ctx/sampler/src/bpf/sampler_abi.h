/* SPDX-License-Identifier: Apache-2.0 */
/* Layouts shared by the BPF programs and user space. The Rust side uses the
 * types libbpf-cargo generates from this object's BTF (the skeleton), so a
 * change here reaches both sides; both assert the event's size. */
#ifndef THREAD_CTX_SAMPLER_ABI_H
#define THREAD_CTX_SAMPLER_ABI_H

#define CTX_HEADER_SIZE 28
/* OTEP 4947: 640-byte recommended record limit minus the header. */
#define CTX_ATTRS_MAX 612
/* Frames kept per stack: the kernel's default perf_event_max_stack for user
 * stacks; kernel stacks are shorter (syscall entry to the scheduler). */
#define USER_STACK_DEPTH 127
#define KERNEL_STACK_DEPTH 48

/* How a tracked process's threads reach the TLS slot holding the record pointer. */
enum tls_access_kind {
	TLS_ACCESS_NONE = 0,   /* tracked for stacks only: no resolvable otel_thread_ctx_v1 */
	TLS_ACCESS_STATIC = 1, /* slot = fsbase + tp_offset */
	TLS_ACCESS_DTV = 2,    /* slot = *(*(fsbase + dtv_offset) + module_id * dtv_entry_size) + tls_offset */
};

/* What the TLS slot holds. */
enum target_schema {
	SCHEMA_TLS = 0,    /* otel_thread_ctx_v1: the record pointer */
	SCHEMA_NODEJS = 1, /* otel_thread_ctx_nodejs_v1: the struct the async-context frame walk starts from */
};

/* nodejs_layout.native_wrap_fields_offset when the store's embedder field points at the record itself. */
#define NODEJS_RECORD_IN_FIELD ((__u64)-1)

/* V8 layout of a SCHEMA_NODEJS target's walk (byte offsets; see nodejs_record.bpf.h). */
struct nodejs_layout {
	__u64 wrapped_object_offset;
	__u64 native_wrap_fields_offset;
	__u64 js_map_table_offset;
	__u64 ordered_hash_map_header_size;
};

/* Farthest an exit frame is taken to be above the stack pointer: node's main stack is 8 MiB at most
 * by default (ulimit -s), a worker's 4 MiB. */
#define EXIT_FRAME_MAX_DISTANCE (8ULL << 20)
/* JS frames read per sample (v8_frames.bpf.h): a power of two, and at least USER_STACK_DEPTH:
 * every frame of a walk may be a JS frame. A NestJS request's stack at warm-up, before TurboFan
 * inlines its middleware, holds ~90 (64 left a third of its samples' outer frames unread). */
#define JS_FRAMES_MAX 128
/* Words read at the stack pointer for an innermost JS frame under a frameless builtin. */
#define LEAF_STACK_WORDS 3
/* Where every supported V8 (Node 18-26) keeps a JS frame's slots, from its frame
 * pointer; user space enables the walk only for a layout with these (thread-ctx-v8). */
#define V8_FP_CONTEXT (-8)
#define V8_FP_FUNCTION (-16)
#define V8_FP_BYTECODE_ARRAY (-32)
#define V8_FP_BYTECODE_OFFSET (-40)

/* A node process's V8, for the frame walk of v8_frames.bpf.h. enabled == 0:
 * its user stacks are taken by bpf_get_stack, as any process's. */
struct v8_target {
	__u32 enabled;
	/* Byte offset of the SharedFunctionInfo in a JSFunction. */
	__u32 js_function_shared;
	/* Where the embedded builtins run: node's text, and the copy V8 may map next to its code. */
	__u64 builtins_start[2];
	__u64 builtins_end[2];
	/* A thread's last exit from JS, for a walk that finds no JS frame (a thread blocked or
	 * running in native code called from JS): its Isolate* at fsbase + isolate_tp_offset
	 * (0: not read), the isolate's c_entry_fp at + c_entry_fp, checked by the exit frame's
	 * marker (its type << 1, at V8_FP_CONTEXT) against exit_frame_types (bit n: type n). */
	__s64 isolate_tp_offset;
	__u64 c_entry_fp;
	__u64 exit_frame_types;
};

/* Value of the `targets` map (key: tgid), written by user space as processes
 * come and go: everything a process's threads need to reach their record. */
struct target {
	__u32 access_kind;
	__u32 schema; /* enum target_schema */
	__s64 tp_offset;
	__u64 dtv_offset;
	__u64 dtv_entry_size;
	__u64 module_id;
	__u64 tls_offset;
	struct nodejs_layout nodejs; /* SCHEMA_NODEJS only */
	struct v8_target v8;
};

/* Filled in .rodata by user space before load, so the verifier prunes unused paths. */
struct sampler_config {
	__u32 capture_user_stack;
	__u32 capture_kernel_stack;
	/* Wake the reader only once this many bytes wait in the ring buffer. */
	__u64 wakeup_bytes;
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
	CTX_NO_WRITER = 8,    /* the process is tracked without a resolvable writer */
	/* nodejs_v1_dev walk (a struct whose cped_slot is 0 counts as CTX_NULL_RECORD): */
	CTX_NODE_NO_STORE = 9,     /* no frame, no entry for the ALS, undefined store or cleared field: no context */
	CTX_NODE_FRAME_FAULT = 10, /* a read on the way to the record faulted */
	CTX_NODE_BAD_FRAME = 11,   /* a word V8 would not put there: untagged pointer, non-Smi count (rehash), bad bucket count or index */
	CTX_NODE_CHAIN_LONG = 12,  /* the bucket chain did not end within NODEJS_MAX_CHAIN entries */
	CTX_STATE_COUNT = 13,
};

/* counters[] indices past the per-state counts of CPU samples. */
enum counter_index {
	COUNTER_CPU_DROPPED = CTX_STATE_COUNT,     /* CPU samples lost: ring buffer full */
	COUNTER_OFF_CPU_DROPPED = CTX_STATE_COUNT + 1, /* off-CPU intervals lost: ring buffer full */
	COUNTER_OFF_CPU_SAMPLES = CTX_STATE_COUNT + 2, /* off-CPU intervals sent */
	COUNTER_ALLOC_VALID = CTX_STATE_COUNT + 3,   /* allocation samples sent with a valid record */
	COUNTER_ALLOC_OTHER = CTX_STATE_COUNT + 4,   /* allocation samples sent without one */
	COUNTER_ALLOC_DROPPED = CTX_STATE_COUNT + 5, /* allocation samples lost: ring buffer full */
	COUNTER_CPU_SAMPLE_NS = CTX_STATE_COUNT + 6, /* ns the CPU program ran for tracked threads' ticks, while time_samples is set */
	COUNTER_OFF_CPU_NS = CTX_STATE_COUNT + 7,    /* ns the off-CPU program ran for tracked threads' switches (out and in), while time_samples is set */
	COUNTER_COUNT = CTX_STATE_COUNT + 8,
};

enum event_kind {
	EVENT_CPU_SAMPLE = 0, /* a cpu-clock tick on a tracked thread */
	EVENT_OFF_CPU = 1,    /* a tracked thread was switched out for `value` ns */
	EVENT_ALLOC = 2,      /* V8 sampled an allocation of `value` bytes on the thread (alloc_probe.bpf.h) */
};

/* sample_event.flags */
#define EVENT_FLAG_PREEMPTED 1 /* off-CPU: switched out while runnable (waited for a CPU, not blocked) */

/* js_frame.flags */
#define JS_FRAME_OFFSET_REGISTER 1 /* innermost, in a builtin: bytecode_offset is the interpreter's offset register (the array register held the frame's array) */
#define JS_FRAME_LEAF_STACK 2      /* innermost, in a builtin, no Smi offset: the event's leaf words are the words at the stack pointer */
#define JS_FRAME_NOT_SMI 4         /* the bytecode offset slot held no Smi (a baseline or optimized frame): bytecode_offset is 0 */

/* What a JS frame of user_stack[depth] holds (v8_frames.bpf.h). */
struct js_frame {
	__u64 shared;          /* the JSFunction's SharedFunctionInfo, read at sample time (tagged) */
	__u64 bytecode_array;  /* the frame's bytecode array slot */
	__u32 bytecode_offset; /* the value of the Smi in the frame's bytecode offset slot (interpreted frames), or see flags */
	__u16 depth;           /* index of the frame's pc in user_stack */
	__u16 flags;           /* JS_FRAME_* */
};

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
	__u32 cpu;
	__u8 kind;            /* enum event_kind */
	__u8 state;           /* enum ctx_state */
	__u16 flags;          /* EVENT_FLAG_* */
	__u64 value;          /* by kind: CPU 0; off-CPU the ns switched out from time_ns; allocation the object's bytes */
	/* Bytes of user_stack/kernel_stack that bpf_get_stack filled, or -errno
	 * (-ENOENT: not captured; kernel -EFAULT: the sample was taken in user mode). */
	__s32 user_stack_bytes;
	__s32 kernel_stack_bytes;
	__u16 js_frame_count; /* js[] entries filled (a V8 target's CPU, off-CPU and allocation samples) */
	__u16 leaf_word_count; /* leaf_words[] filled: 0 or LEAF_STACK_WORDS */
	struct ctx_header header; /* copied when state >= CTX_INVALID */
	__u8 attrs[CTX_ATTRS_MAX]; /* first header.attrs_size bytes meaningful when state == CTX_VALID */
	__u32 attrs_pad;      /* the stacks' alignment, explicit */
	__u64 user_stack[USER_STACK_DEPTH];     /* instruction pointers, innermost first */
	__u64 kernel_stack[KERNEL_STACK_DEPTH];
	struct js_frame js[JS_FRAMES_MAX];
	__u64 leaf_words[LEAF_STACK_WORDS];
};

/* A record in the ring buffer is the event up to its attrs, then the stack
 * frames, JS frames, leaf words and attrs-data it holds (see send_event). */
#define EVENT_HEAD_SIZE 80

_Static_assert(sizeof(struct ctx_header) == CTX_HEADER_SIZE, "ctx_header layout");
_Static_assert(__builtin_offsetof(struct sample_event, attrs) == EVENT_HEAD_SIZE, "event head layout");
_Static_assert(sizeof(struct v8_target) == 64, "v8_target layout");
_Static_assert(sizeof(struct target) == 144, "target layout");
_Static_assert(sizeof(struct js_frame) == 24, "js_frame layout");
_Static_assert(sizeof(struct sample_event) == 52 + CTX_HEADER_SIZE + CTX_ATTRS_MAX + 4 + 8 * (USER_STACK_DEPTH + KERNEL_STACK_DEPTH) +
		       24 * JS_FRAMES_MAX + 8 * LEAF_STACK_WORDS,
	       "sample_event layout");

#endif
