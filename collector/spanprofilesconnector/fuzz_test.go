// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// FuzzConsumeProfiles feeds any OTLP/Profiles request that decodes, then a span of every
// process it names: nothing panics, and what is held stays within its bounds.
// `go test -fuzz FuzzConsumeProfiles` runs it; `go test` replays the seeds.
func FuzzConsumeProfiles(f *testing.F) {
	r := newRequest()
	w := r.window(agentProcess(mainTID, "process.vpid", int64(7)), 0, 1000)
	st := r.stack(native("uv_run"), js("hog", "/srv/app/service.js", 12))
	w.cpuEvery(on{tid: mainTID, trace: 1, span: 1, route: "/hog", stack: st}, 100, 200)
	w.offCPU(on{tid: mainTID, stack: st}, 210, 300)
	w.allocAt(on{tid: mainTID, trace: 1, span: 1, stack: st}, 150, 1<<20)
	seed, err := (&pprofile.ProtoMarshaler{}).MarshalProfiles(r.pd)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		pd, err := (&pprofile.ProtoUnmarshaler{}).UnmarshalProfiles(data)
		if err != nil {
			return
		}
		cfg := createDefaultConfig()
		cfg.MaxSamples = 1_000
		cfg.MaxProcesses = 4
		c, err := newSpanProfiles(cfg, connectorID, componenttest.NewNopTelemetrySettings())
		if err != nil {
			t.Fatal(err)
		}
		sink := &consumertest.TracesSink{}
		c.next = sink
		// The spans: one per resource of the request, over its first window's time.
		var specs []struct {
			res   map[string]any
			start float64
		}
		rps := pd.ResourceProfiles()
		for i := 0; i < rps.Len(); i++ {
			specs = append(specs, struct {
				res   map[string]any
				start float64
			}{rps.At(i).Resource().Attributes().AsRaw(), 0})
		}
		if err := c.consumeProfiles(context.Background(), pd); err != nil {
			t.Fatal(err)
		}
		if c.store.Held() > cfg.MaxSamples || c.store.Processes() > cfg.MaxProcesses {
			t.Fatalf("held %d samples of %d processes, past the bounds", c.store.Held(), c.store.Processes())
		}
		for _, s := range specs {
			if err := c.consumeTraces(context.Background(), traces(s.res, spanSpec{trace: 1, span: 1, start: 100, end: 200})); err != nil {
				t.Fatal(err)
			}
		}
	})
}
