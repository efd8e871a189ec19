// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package sharedcomponent

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

// counted records its Start and Shutdown calls.
type counted struct {
	starts, shutdowns int
	startErr          error
}

func (c *counted) Start(context.Context, component.Host) error { c.starts++; return c.startErr }
func (c *counted) Shutdown(context.Context) error              { c.shutdowns++; return nil }

var id = component.MustNewID("span_profiles")

func TestOneComponentPerKeyStartedOnceShutDownByTheLast(t *testing.T) {
	m := NewMap[component.ID, *counted]()
	made := 0
	create := func() (*counted, error) { made++; return &counted{}, nil }
	a, err := m.LoadOrStore(id, create)
	require.NoError(t, err)
	b, err := m.LoadOrStore(id, create)
	require.NoError(t, err)
	require.Same(t, a.Unwrap(), b.Unwrap())
	require.Equal(t, 1, made)

	host := componenttest.NewNopHost()
	require.NoError(t, a.Start(context.Background(), host))
	require.NoError(t, b.Start(context.Background(), host))
	assert.Equal(t, 1, a.Unwrap().starts)
	require.NoError(t, a.Shutdown(context.Background()))
	assert.Zero(t, a.Unwrap().shutdowns, "the other half still runs")
	assert.Equal(t, 1, m.Len())
	require.NoError(t, b.Shutdown(context.Background()))
	assert.Equal(t, 1, a.Unwrap().shutdowns)
	assert.Zero(t, m.Len(), "forgotten: a reload makes a new one")
	require.NoError(t, b.Shutdown(context.Background()))
	assert.Equal(t, 1, a.Unwrap().shutdowns, "once")

	c, err := m.LoadOrStore(id, create)
	require.NoError(t, err)
	assert.NotSame(t, a.Unwrap(), c.Unwrap())
}

// A half that never started (another component failed to start) shuts the component down.
func TestShutdownWithoutStart(t *testing.T) {
	m := NewMap[component.ID, *counted]()
	a, err := m.LoadOrStore(id, func() (*counted, error) { return &counted{}, nil })
	require.NoError(t, err)
	require.NoError(t, a.Shutdown(context.Background()))
	assert.Equal(t, 1, a.Unwrap().shutdowns)
	assert.Zero(t, m.Len())
}

// Every half gets the start error, not only the first; a failed create stores nothing.
func TestErrors(t *testing.T) {
	m := NewMap[component.ID, *counted]()
	_, err := m.LoadOrStore(id, func() (*counted, error) { return nil, errors.New("bad config") })
	require.EqualError(t, err, "bad config")
	assert.Zero(t, m.Len())
	a, err := m.LoadOrStore(id, func() (*counted, error) { return &counted{startErr: errors.New("no storage")}, nil })
	require.NoError(t, err)
	require.EqualError(t, a.Start(context.Background(), componenttest.NewNopHost()), "no storage")
	require.EqualError(t, a.Start(context.Background(), componenttest.NewNopHost()), "no storage")
	assert.Equal(t, 1, a.Unwrap().starts)
}
