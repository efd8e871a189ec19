// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package sharedcomponent lets the halves a connector's factory creates for one component id
// (traces -> traces, profiles -> traces, ... -> metrics) share one component: created by the
// first half, started by the first Start, shut down by the last Shutdown, then forgotten so that
// a Collector that reloads its configuration starts afresh.
//
// Its API is that of go.opentelemetry.io/collector/internal/sharedcomponent (NewMap,
// LoadOrStore, Unwrap), which contrib's receivers and connectors use and which a module outside
// the Collector's repositories cannot import (Go's internal rule). It differs in one way: the
// core package shuts the shared component down at the first half's Shutdown, while the
// Collector may still hand the other halves data; here it waits for the last, so no half
// consumes into a component already shut down.
package sharedcomponent // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/sharedcomponent"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Map holds the shared components by key (a component id).
type Map[K comparable, V component.Component] struct {
	lock       sync.Mutex
	components map[K]*Component[V]
}

// NewMap returns an empty Map.
func NewMap[K comparable, V component.Component]() *Map[K, V] {
	return &Map[K, V]{components: map[K]*Component[V]{}}
}

// LoadOrStore returns the component of key, made by create if there is none.
func (m *Map[K, V]) LoadOrStore(key K, create func() (V, error)) (*Component[V], error) {
	m.lock.Lock()
	defer m.lock.Unlock()
	if c, ok := m.components[key]; ok {
		return c, nil
	}
	v, err := create()
	if err != nil {
		return nil, err
	}
	c := &Component[V]{component: v}
	c.remove = func() {
		m.lock.Lock()
		defer m.lock.Unlock()
		if m.components[key] == c {
			delete(m.components, key)
		}
	}
	m.components[key] = c
	return c, nil
}

// Len is the number of components held (for tests: none once every half shut down).
func (m *Map[K, V]) Len() int {
	m.lock.Lock()
	defer m.lock.Unlock()
	return len(m.components)
}

// Component is one shared component and the count of halves started on it.
type Component[V component.Component] struct {
	component V
	remove    func()

	lock     sync.Mutex
	starts   int
	started  bool
	startErr error
	stopped  bool
}

// Unwrap returns the shared component.
func (c *Component[V]) Unwrap() V {
	return c.component
}

// Start starts the component at the first half's Start; every half gets its error.
func (c *Component[V]) Start(ctx context.Context, host component.Host) error {
	c.lock.Lock()
	defer c.lock.Unlock()
	c.starts++
	if !c.started {
		c.started = true
		c.startErr = c.component.Start(ctx, host)
	}
	return c.startErr
}

// Shutdown shuts the component down at the last started half's Shutdown (or at the first, if
// none started) and forgets it; the halves' later calls do nothing.
func (c *Component[V]) Shutdown(ctx context.Context) error {
	c.lock.Lock()
	if c.starts > 0 {
		c.starts--
	}
	last := c.starts == 0 && !c.stopped
	if last {
		c.stopped = true
	}
	c.lock.Unlock()
	if !last {
		return nil
	}
	defer c.remove()
	return c.component.Shutdown(ctx)
}
