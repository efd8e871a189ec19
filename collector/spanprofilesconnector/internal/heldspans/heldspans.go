// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package heldspans keeps the spans the span_profiles connector holds in a storage extension
// (contrib's file_storage), so that a Collector that crashes loses none whose receipt it
// acknowledged: written before the request is acknowledged, deleted once sent on, read back at
// start.
package heldspans // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/heldspans"

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Spans keeps the spans the connector holds in a storage extension (contrib's file_storage),
// so that a Collector that crashes (kill -9, an OOM kill) loses none of the spans whose receipt
// it acknowledged: they are replayed when it starts again. Each unit (one resource's spans of one
// request) is one record, written before the request is acknowledged and deleted once the next
// consumer took its spans. Profile windows are not kept: a held span waits for a window that has
// not arrived, which the agent keeps and retries until the Collector is back.
//
// The storage has no listing, so the records are numbered and an index record says which
// numbers may be live: [first, next).
type Spans struct {
	client storage.Client
	mu     sync.Mutex
	first  uint64
	next   uint64
	live   map[uint64]struct{}
	// Records sent on whose delete failed, retried with the next deletes or at the next check.
	undeleted []uint64
}

// IndexKey is the record that says which records may be live.
const IndexKey = "held_spans.index"

type heldIndex struct {
	First uint64 `json:"first"`
	Next  uint64 `json:"next"`
}

func heldKey(seq uint64) string {
	return fmt.Sprintf("held_spans.%016x", seq)
}

// Unit is a record read back at start: the spans of one unit (one resource's spans of one
// request), when they arrived, and its number (what Forget takes).
type Unit struct {
	Seq     uint64
	Arrived time.Time
	Traces  ptrace.Traces
}

// Open gets the connector's client from the storage extension `id` and reads back what
// the last run left.
func Open(ctx context.Context, host component.Host, id, self component.ID) (*Spans, []Unit, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, nil, fmt.Errorf("storage is %q: no such extension in this Collector's service::extensions", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, nil, fmt.Errorf("storage is %q: that extension is not a storage extension (file_storage is one)", id)
	}
	client, err := se.GetClient(ctx, component.KindConnector, self, "held_spans")
	if err != nil {
		return nil, nil, fmt.Errorf("storage %q: %w", id, err)
	}
	h := &Spans{client: client, first: 1, next: 1, live: map[uint64]struct{}{}}
	raw, err := client.Get(ctx, IndexKey)
	if err != nil {
		return nil, nil, fmt.Errorf("storage %q: reading the index of held spans: %w", id, err)
	}
	if raw != nil {
		var ix heldIndex
		if err := json.Unmarshal(raw, &ix); err != nil || ix.First < 1 || ix.First > ix.Next {
			return nil, nil, fmt.Errorf("storage %q: the index of held spans is not one this connector wrote (%q)", id, raw)
		}
		h.first, h.next = ix.First, ix.Next
	}
	var units []Unit
	for seq := h.first; seq < h.next; seq++ {
		rec, err := client.Get(ctx, heldKey(seq))
		if err != nil {
			return nil, nil, fmt.Errorf("storage %q: reading held spans %d: %w", id, seq, err)
		}
		if rec == nil {
			continue
		}
		u, err := decodeHeld(seq, rec)
		if err != nil {
			// A record this connector did not write whole is dropped, not replayed half.
			_ = client.Delete(ctx, heldKey(seq))
			continue
		}
		h.live[seq] = struct{}{}
		units = append(units, u)
	}
	return h, units, nil
}

// A record: the arrival time (8 bytes, Unix ns, big endian), then the spans as OTLP protobuf.
func encodeHeld(arrived time.Time, td ptrace.Traces) ([]byte, error) {
	var m ptrace.ProtoMarshaler
	body, err := m.MarshalTraces(td)
	if err != nil {
		return nil, err
	}
	rec := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint64(rec, uint64(arrived.UnixNano()))
	return append(rec, body...), nil
}

func decodeHeld(seq uint64, rec []byte) (Unit, error) {
	if len(rec) < 8 {
		return Unit{}, errors.New("a record shorter than its header")
	}
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(rec[8:])
	if err != nil {
		return Unit{}, err
	}
	return Unit{Seq: seq, Arrived: time.Unix(0, int64(binary.BigEndian.Uint64(rec))), Traces: td}, nil
}

// Save writes each resource's spans (one of own, each a ptrace.Traces of one resource) as one
// record, all in one transaction, and returns their numbers in order. It runs before the spans
// are queued or acknowledged and outside the connector's lock: the marshal (about 1 µs per span)
// and the write (a bbolt commit and fsync, milliseconds on a busy disk) stall no other request
// and no profile ingest. A record whose unit finishes before this returns cannot be deleted
// before it exists: the unit does not exist yet.
func (h *Spans) Save(ctx context.Context, arrived time.Time, own []ptrace.Traces) ([]uint64, error) {
	if len(own) == 0 {
		return nil, nil
	}
	recs := make([][]byte, len(own))
	for i, td := range own {
		rec, err := encodeHeld(arrived, td)
		if err != nil {
			return nil, err
		}
		recs[i] = rec
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := make([]*storage.Operation, 0, len(own)+1)
	seqs := make([]uint64, len(own))
	for i, rec := range recs {
		seqs[i] = h.next + uint64(i)
		ops = append(ops, storage.SetOperation(heldKey(seqs[i]), rec))
	}
	ops = append(ops, h.indexOp(h.first, h.next+uint64(len(own))))
	if err := h.client.Batch(ctx, ops...); err != nil {
		return nil, err
	}
	h.next += uint64(len(own))
	for _, seq := range seqs {
		h.live[seq] = struct{}{}
	}
	return seqs, nil
}

// maxUndeleted bounds the records whose delete failed and waits to be retried (8 bytes each):
// past it the oldest are given up, logged, and a restart replays them (sent twice, not lost).
const maxUndeleted = 1 << 20

// Forget deletes the records of spans the next consumer took, with those whose delete failed
// before: a record left behind would be replayed (and its spans sent twice) at every start.
// Returns how many records still wait to be deleted.
func (h *Spans) Forget(ctx context.Context, seqs []uint64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.undeleted = append(h.undeleted, seqs...)
	if over := len(h.undeleted) - maxUndeleted; over > 0 {
		h.undeleted = h.undeleted[over:]
	}
	if len(h.undeleted) == 0 {
		return 0, nil
	}
	ops := make([]*storage.Operation, 0, len(h.undeleted)+1)
	for _, seq := range h.undeleted {
		delete(h.live, seq)
		ops = append(ops, storage.DeleteOperation(heldKey(seq)))
	}
	// Records go in arrival order, mostly: the first live one moves on past the ones gone. The
	// deletes and the index are one transaction: the index never passes a record left behind.
	first := h.first
	for first < h.next {
		if _, ok := h.live[first]; ok {
			break
		}
		first++
	}
	ops = append(ops, h.indexOp(first, h.next))
	if err := h.client.Batch(ctx, ops...); err != nil {
		return len(h.undeleted), err
	}
	h.undeleted = h.undeleted[:0]
	h.first = first
	return 0, nil
}

// Undeleted is how many records wait for their delete to be retried.
func (h *Spans) Undeleted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.undeleted)
}

func (h *Spans) indexOp(first, next uint64) *storage.Operation {
	raw, _ := json.Marshal(heldIndex{First: first, Next: next})
	return storage.SetOperation(IndexKey, raw)
}

// Close closes the storage client.
func (h *Spans) Close(ctx context.Context) error {
	return h.client.Close(ctx)
}
