/* SPDX-License-Identifier: GPL-2.0-only */
/* The user stack of a node process (a target whose v8.enabled is set),
 * walked through frame pointers as bpf_get_stack walks it, reading on the way
 * what V8 keeps in each JS frame: below the frame pointer its context, its
 * JSFunction and, in interpreted and baseline frames, its bytecode array and
 * (interpreted) bytecode offset (V8_FP_* in sampler_abi.h). For a frame whose
 * context and function slots hold tagged pointers, the JSFunction's
 * SharedFunctionInfo is read now: a young JSFunction moves at the next
 * scavenge, the SharedFunctionInfo lives in old space and is still there when
 * user space names the frame (thread-ctx-v8). User space checks every word:
 * a native frame whose slots happen to look tagged is named as native.
 *
 * The innermost frame gets two more things when its pc is in the embedded
 * builtins: if it is interpreted (a Smi in its offset slot) and the
 * interpreter's bytecode array register (r12) holds the frame's array, the
 * sample landed in a bytecode handler and the offset register (r9) holds the
 * current bytecode offset (the frame's slot is only written before calls); if
 * its offset slot holds no Smi (a baseline or optimized frame under a builtin
 * that built no frame), the words at the stack pointer, among which that
 * frame's return address.
 *
 * One read of 56 bytes per frame (its slots and links), one of 8 more per JS
 * frame, at most USER_STACK_DEPTH frames and JS_FRAMES_MAX JS frames. */
#ifndef THREAD_CTX_V8_FRAMES_BPF_H
#define THREAD_CTX_V8_FRAMES_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "sampler_abi.h"

/* A frame's words from its lowest slot (V8_FP_BYTECODE_OFFSET) to its return address. */
#define V8_FRAME_WORDS 7
#define V8_SLOT(off) (((off) - V8_FP_BYTECODE_OFFSET) / 8)

/* The user registers the walk starts from. */
struct user_regs {
	__u64 ip, sp, bp, r9, r12;
};

static __always_inline int v8_tagged(__u64 v)
{
	return (v & 3) == 1 && v > 0x1000 && v < (1ULL << 47);
}

static __always_inline int in_builtins(const struct v8_target *v, __u64 pc)
{
	return (pc >= v->builtins_start[0] && pc < v->builtins_end[0]) || (pc >= v->builtins_start[1] && pc < v->builtins_end[1]);
}

/* The walk's state, for bpf_loop's callback: a loop the verifier checks once,
 * not once per frame (127 frames of a plain loop exceed its instruction limit). */
struct v8_walk {
	struct sample_event *e;
	const struct v8_target *v;
	const struct user_regs *r;
	__u64 pc, fp;
	__u32 frames, js;
};

/* One frame: record its pc, read its slots, step to its caller. 1 ends the walk. */
static long walk_v8_frame(__u64 i, void *data)
{
	struct v8_walk *c = data;
	struct sample_event *e = c->e;
	const struct v8_target *v = c->v;
	if (i >= USER_STACK_DEPTH)
		return 1;
	__u64 pc = c->pc, fp = c->fp;
	e->user_stack[i] = pc;
	c->frames = i + 1;
	__u64 w[V8_FRAME_WORDS];
	if (fp < 0x1000 || bpf_probe_read_user(w, sizeof(w), (void *)(fp + V8_FP_BYTECODE_OFFSET)))
		return 1;
	__u64 function = w[V8_SLOT(V8_FP_FUNCTION)];
	__u32 js = c->js;
	if (v8_tagged(w[V8_SLOT(V8_FP_CONTEXT)]) && v8_tagged(function) && js < JS_FRAMES_MAX) {
		__u64 shared = 0;
		if (!bpf_probe_read_user(&shared, sizeof(shared), (void *)(function - 1 + v->js_function_shared)) && v8_tagged(shared)) {
			struct js_frame *f = &e->js[js & (JS_FRAMES_MAX - 1)];
			f->shared = shared;
			f->bytecode_array = w[V8_SLOT(V8_FP_BYTECODE_ARRAY)];
			f->bytecode_offset = w[V8_SLOT(V8_FP_BYTECODE_OFFSET)];
			f->depth = i;
			f->flags = 0;
			f->pad = 0;
			const struct user_regs *r = c->r;
			if (i == 0 && in_builtins(v, pc)) {
				/* Only an interpreted frame holds a Smi there (a baseline frame, whose code may
				 * keep its bytecode array in r12 too, holds its feedback cell). */
				int smi_offset = (f->bytecode_offset & 0xffffffffULL) == 0;
				if (smi_offset && r->r12 == f->bytecode_array) {
					f->bytecode_offset = r->r9;
					f->flags = JS_FRAME_OFFSET_REGISTER;
				} else if (!smi_offset && !bpf_probe_read_user(e->leaf_words, sizeof(e->leaf_words), (void *)r->sp)) {
					e->leaf_word_count = LEAF_STACK_WORDS;
					f->flags = JS_FRAME_LEAF_STACK;
				}
			}
			c->js = js + 1;
		}
	}
	__u64 next_fp = w[V8_SLOT(0)], ret = w[V8_SLOT(8)];
	/* The stack grows down: a caller's frame is above its callee's. */
	if (next_fp <= fp || ret == 0)
		return 1;
	c->pc = ret;
	c->fp = next_fp;
	return 0;
}

/* Fills e->user_stack, e->js and e->leaf_words. */
static __always_inline void walk_v8_stack(struct sample_event *e, const struct v8_target *v, const struct user_regs *r)
{
	struct v8_walk c = { .e = e, .v = v, .r = r, .pc = r->ip, .fp = r->bp };
	e->leaf_word_count = 0;
	bpf_loop(USER_STACK_DEPTH, walk_v8_frame, &c, 0);
	e->user_stack_bytes = c.frames * 8;
	e->js_frame_count = c.js;
}

#endif
