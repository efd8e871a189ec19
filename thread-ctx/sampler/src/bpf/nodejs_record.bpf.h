/* SPDX-License-Identifier: GPL-2.0-only */
/* The nodejs_v1_dev walk: from a thread's otel_thread_ctx_nodejs_v1 struct to
 * the address of its OTEP 4947 record, through V8's async-context frame
 * (the same steps and bounds as thread-ctx/discovery/src/nodejs/walk.rs, which documents them):
 *
 *   cped = *cped_slot                      undefined: no frame, no context
 *   table = frame.table                     (JSMap, js_map_table_offset)
 *   elements, deleted, buckets              Smis after ordered_hash_map_header_size
 *   entry = bucket[hash & (buckets - 1)]    then the chain, key == *als_handle
 *   store = entry.value                     undefined: no context
 *   record = *(store + s.record_slot_offset) when the struct's byte is set
 *            (RFC #1861's latest text), else
 *   W = store's embedder field              (wrapped_object_offset)
 *   record = W, or *(W + native_wrap_fields_offset)
 *
 * Every word is the target's and may lie: each one is checked before it is
 * used, the chain is followed at most NODEJS_MAX_CHAIN times, and whatever
 * stops the walk is a counted state, never a longer walk. At most
 * 8 + NODEJS_MAX_CHAIN reads of user memory. */
#ifndef THREAD_CTX_NODEJS_RECORD_BPF_H
#define THREAD_CTX_NODEJS_RECORD_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "sampler_abi.h"

/* Buckets accepted in a frame's table (walk.rs MAX_BUCKETS). */
#define NODEJS_MAX_BUCKETS (1 << 16)
/* Entries followed in one chain (walk.rs MAX_CHAIN). */
#define NODEJS_MAX_CHAIN 16
#define NODEJS_HEAP_OBJECT_TAG 1
#define NODEJS_TAGGED_SIZE 8
/* Counts before the bucket heads; words per entry (key, value, chain). */
#define NODEJS_COUNT_WORDS 3
#define NODEJS_ENTRY_WORDS 3

/* The TLS struct (32 bytes). record_slot_offset: where the stored object keeps its record's
 * address (0 from a writer of an earlier revision of the schema: the layout says then). */
struct nodejs_tls {
	__u64 cped_slot;
	__u64 als_handle;
	__s32 als_identity_hash;
	__u8 record_slot_offset;
	__u8 reserved[3];
	__u64 undefined_addr;
};
_Static_assert(sizeof(struct nodejs_tls) == 32, "the struct readers copy");
_Static_assert(__builtin_offsetof(struct nodejs_tls, record_slot_offset) == 20, "RFC #1861: 2 * ptr + 4");

static __always_inline int nodejs_is_heap_object(__u64 v)
{
	return (v & 3) == NODEJS_HEAP_OBJECT_TAG;
}

/* A 64-bit Smi (no pointer compression) keeps its value in the upper half. */
static __always_inline int nodejs_is_smi(__u64 v)
{
	return (v & 0xffffffffULL) == 0;
}

static __always_inline __s64 nodejs_smi_value(__u64 v)
{
	return (__s64)v >> 32;
}

/* The record's address for the thread whose struct is at `slot`, or the state saying why none. */
static __always_inline int nodejs_record(const struct nodejs_layout *l, __u64 slot, __u64 *record)
{
	struct nodejs_tls s;
	__u64 cped = 0, als = 0, table = 0, head = 0, store = 0, field = 0;
	__u64 counts[NODEJS_COUNT_WORDS];
	__u64 entry_words[NODEJS_ENTRY_WORDS];

	if (bpf_probe_read_user(&s, sizeof(s), (void *)slot))
		return CTX_SLOT_FAULT;
	if (s.cped_slot == 0 || s.als_handle == 0)
		return CTX_NULL_RECORD;
	if (bpf_probe_read_user(&cped, sizeof(cped), (void *)s.cped_slot))
		return CTX_NODE_FRAME_FAULT;
	if (cped == s.undefined_addr)
		return CTX_NODE_NO_STORE;
	if (!nodejs_is_heap_object(cped))
		return CTX_NODE_BAD_FRAME;
	if (bpf_probe_read_user(&als, sizeof(als), (void *)s.als_handle))
		return CTX_NODE_FRAME_FAULT;
	if (!nodejs_is_heap_object(als))
		return CTX_NODE_BAD_FRAME;
	if (bpf_probe_read_user(&table, sizeof(table), (void *)(cped - NODEJS_HEAP_OBJECT_TAG + l->js_map_table_offset)))
		return CTX_NODE_FRAME_FAULT;
	if (!nodejs_is_heap_object(table))
		return CTX_NODE_BAD_FRAME;
	__u64 base = table - NODEJS_HEAP_OBJECT_TAG + l->ordered_hash_map_header_size;
	if (bpf_probe_read_user(counts, sizeof(counts), (void *)base))
		return CTX_NODE_FRAME_FAULT;
	/* A count that is not a Smi: the table is being rehashed, or is not a table. */
	if (!nodejs_is_smi(counts[0]) || !nodejs_is_smi(counts[1]) || !nodejs_is_smi(counts[2]))
		return CTX_NODE_BAD_FRAME;
	__s64 elements = nodejs_smi_value(counts[0]);
	__s64 deleted = nodejs_smi_value(counts[1]);
	__s64 buckets = nodejs_smi_value(counts[2]);
	if (buckets <= 0 || buckets > NODEJS_MAX_BUCKETS || (buckets & (buckets - 1)) != 0)
		return CTX_NODE_BAD_FRAME;
	/* V8 grows a table at buckets * 2 entries (load factor 2). */
	if (elements < 0 || deleted < 0 || elements + deleted > 2 * buckets)
		return CTX_NODE_BAD_FRAME;
	__s64 used = elements + deleted;
	__u64 bucket = (__u32)s.als_identity_hash & (__u64)(buckets - 1);
	if (bpf_probe_read_user(&head, sizeof(head), (void *)(base + (NODEJS_COUNT_WORDS + bucket) * NODEJS_TAGGED_SIZE)))
		return CTX_NODE_FRAME_FAULT;
	if (!nodejs_is_smi(head))
		return CTX_NODE_BAD_FRAME;
	__s64 entry = nodejs_smi_value(head);
	int found = 0;
	for (int i = 0; i < NODEJS_MAX_CHAIN; i++) {
		if (entry == -1)
			return CTX_NODE_NO_STORE;
		if (entry < 0 || entry >= used)
			return CTX_NODE_BAD_FRAME;
		__u64 at = base + (NODEJS_COUNT_WORDS + buckets + entry * NODEJS_ENTRY_WORDS) * NODEJS_TAGGED_SIZE;
		if (bpf_probe_read_user(entry_words, sizeof(entry_words), (void *)at))
			return CTX_NODE_FRAME_FAULT;
		if (entry_words[0] == als) {
			store = entry_words[1];
			found = 1;
			break;
		}
		if (!nodejs_is_smi(entry_words[2]))
			return CTX_NODE_BAD_FRAME;
		entry = nodejs_smi_value(entry_words[2]);
	}
	if (!found)
		return CTX_NODE_CHAIN_LONG;
	if (store == s.undefined_addr)
		return CTX_NODE_NO_STORE;
	if (!nodejs_is_heap_object(store))
		return CTX_NODE_BAD_FRAME;
	if (s.record_slot_offset != 0) {
		if (s.record_slot_offset % NODEJS_TAGGED_SIZE)
			return CTX_NODE_BAD_FRAME;
		if (bpf_probe_read_user(record, sizeof(*record), (void *)(store - NODEJS_HEAP_OBJECT_TAG + s.record_slot_offset)))
			return CTX_NODE_FRAME_FAULT;
		return *record == 0 ? CTX_NODE_NO_STORE : CTX_VALID;
	}
	if (bpf_probe_read_user(&field, sizeof(field), (void *)(store - NODEJS_HEAP_OBJECT_TAG + l->wrapped_object_offset)))
		return CTX_NODE_FRAME_FAULT;
	if (field == 0)
		return CTX_NODE_NO_STORE;
	if (l->native_wrap_fields_offset == NODEJS_RECORD_IN_FIELD) {
		*record = field;
		return CTX_VALID;
	}
	if (bpf_probe_read_user(record, sizeof(*record), (void *)(field + l->native_wrap_fields_offset)))
		return CTX_NODE_FRAME_FAULT;
	return CTX_VALID;
}

#endif
