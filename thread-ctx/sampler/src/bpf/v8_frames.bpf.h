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
 * A walk that ends before any JS frame (the thread is in native code without
 * frame pointers, libc's: a thread blocked in Atomics.wait, a synchronous fs or
 * child_process call, an addon) goes on from the thread's last exit from JS, as
 * V8's own sampler does: the isolate (V8's thread-local g_current_isolate_)
 * keeps the frame pointer of the innermost exit frame while its thread runs C++
 * called from JS (0 while it runs JS), and that frame holds its caller's frame
 * pointer and return address. The native frames in between are not walked.
 *
 * One read of 56 bytes per frame (its slots and links), one of 8 more per JS
 * frame, at most USER_STACK_DEPTH frames and JS_FRAMES_MAX JS frames; three
 * more reads (16 + 8 + 24 bytes) when the walk finds no JS frame. */
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
	__u64 fsbase; /* the thread pointer, where V8's thread-local isolate is */
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
	/* The next frame's index is base + the loop's index (base changes when the walk goes
	 * on from an exit frame and drops frames walked past it). */
	__u64 base;
	__u32 frames, js;
	__u32 exit_tried;
};

/* Where the walk goes on from the thread's last exit from JS: the innermost exit
 * frame's caller (its return address and frame pointer), into c->pc and c->fp.
 * 0: none (the thread is not in C++ called from JS, or a word does not check). */
static __always_inline int resume_at_exit_frame(struct v8_walk *c)
{
	const struct v8_target *v = c->v;
	const struct user_regs *r = c->r;
	__u64 isolate = 0, exit_fp = 0, w[3];
	if (!v->isolate_tp_offset || !r->fsbase)
		return 0;
	if (bpf_probe_read_user(&isolate, sizeof(isolate), (void *)(r->fsbase + v->isolate_tp_offset)) || isolate < 0x1000)
		return 0;
	if (bpf_probe_read_user(&exit_fp, sizeof(exit_fp), (void *)(isolate + v->c_entry_fp)))
		return 0;
	/* On this thread's stack, above where it is now. */
	if (exit_fp <= r->sp || exit_fp - r->sp > EXIT_FRAME_MAX_DISTANCE || (exit_fp & 7))
		return 0;
	/* The frame's marker, its caller's frame pointer, its return address. */
	if (bpf_probe_read_user(w, sizeof(w), (void *)(exit_fp + V8_FP_CONTEXT)))
		return 0;
	__u64 type = w[0] >> 1;
	if ((w[0] & 1) || type >= 64 || !(v->exit_frame_types & (1ULL << type)) || w[1] <= exit_fp || w[2] == 0)
		return 0;
	/* A walk that went past the exit frame followed words that were no frame pointers (a
	 * native function's rbp holding anything): of those frames, the innermost pc only is kept. */
	if (c->fp >= exit_fp)
		c->frames = 1;
	c->pc = w[2];
	c->fp = w[1];
	return 1;
}

/* The walk's end: 1, unless it found no JS frame and goes on from the last exit from JS. */
static __always_inline long walk_ends(struct v8_walk *c, __u64 i)
{
	if (c->js || c->exit_tried)
		return 1;
	c->exit_tried = 1;
	if (!resume_at_exit_frame(c))
		return 1;
	/* The next iteration (i + 1) records the next frame at c->frames. */
	c->base = c->frames - (i + 1);
	return 0;
}

/* One frame: record its pc, read its slots, step to its caller. 1 ends the walk. */
static long walk_v8_frame(__u64 i, void *data)
{
	struct v8_walk *c = data;
	struct sample_event *e = c->e;
	const struct v8_target *v = c->v;
	/* From the loop's index, not a count kept in c: the verifier then sees one unknown index,
	 * not each of USER_STACK_DEPTH known ones (over its instruction limit). */
	__u64 n = c->base + i;
	if (n >= USER_STACK_DEPTH)
		return 1;
	__u64 pc = c->pc, fp = c->fp;
	e->user_stack[n] = pc;
	c->frames = n + 1;
	__u64 w[V8_FRAME_WORDS];
	if (fp < 0x1000 || bpf_probe_read_user(w, sizeof(w), (void *)(fp + V8_FP_BYTECODE_OFFSET)))
		return walk_ends(c, i);
	__u64 function = w[V8_SLOT(V8_FP_FUNCTION)];
	__u32 js = c->js;
	if (v8_tagged(w[V8_SLOT(V8_FP_CONTEXT)]) && v8_tagged(function) && js < JS_FRAMES_MAX) {
		__u64 shared = 0;
		if (!bpf_probe_read_user(&shared, sizeof(shared), (void *)(function - 1 + v->js_function_shared)) && v8_tagged(shared)) {
			struct js_frame *f = &e->js[js & (JS_FRAMES_MAX - 1)];
			/* Only an interpreted frame holds a Smi there (its value in the upper half: no
			 * pointer compression); a baseline frame holds its feedback cell, an optimized one
			 * anything. */
			__u64 slot = w[V8_SLOT(V8_FP_BYTECODE_OFFSET)];
			int smi_offset = (slot & 0xffffffffULL) == 0;
			f->shared = shared;
			f->bytecode_array = w[V8_SLOT(V8_FP_BYTECODE_ARRAY)];
			f->bytecode_offset = smi_offset ? (__u32)(slot >> 32) : 0;
			f->depth = n;
			f->flags = smi_offset ? 0 : JS_FRAME_NOT_SMI;
			const struct user_regs *r = c->r;
			if (n == 0 && in_builtins(v, pc)) {
				/* A baseline frame's code may keep its bytecode array in r12 too: a Smi says interpreted. */
				if (smi_offset && r->r12 == f->bytecode_array) {
					f->bytecode_offset = (__u32)r->r9;
					f->flags = JS_FRAME_OFFSET_REGISTER;
				} else if (!smi_offset && !bpf_probe_read_user(e->leaf_words, sizeof(e->leaf_words), (void *)r->sp)) {
					e->leaf_word_count = LEAF_STACK_WORDS;
					f->flags |= JS_FRAME_LEAF_STACK;
				}
			}
			c->js = js + 1;
		}
	}
	__u64 next_fp = w[V8_SLOT(0)], ret = w[V8_SLOT(8)];
	/* The stack grows down: a caller's frame is above its callee's. */
	if (next_fp <= fp || ret == 0)
		return walk_ends(c, i);
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
