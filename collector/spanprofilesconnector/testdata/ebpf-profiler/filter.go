// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

//go:build ignore

// Keeps, of a host-wide recording of OTLP/Profiles requests (the file exporter's proto format:
// each ProfilesData preceded by its size, 4 bytes big endian), only what one process sent: its
// ResourceProfiles, with each request's dictionary rebuilt to hold only what they reference. The
// profiler samples every process on the host; the recording committed beside this file is the
// workload's alone. capture.js runs it:
//
//	go run ./testdata/ebpf-profiler/filter.go -pid PID -in RAW -out profiles.pb
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/pdata/pprofile"
)

func main() {
	pid := flag.Int64("pid", 0, "the process whose profiles to keep (its resource's process.pid)")
	in := flag.String("in", "", "the recording: size-prefixed ProfilesData messages")
	out := flag.String("out", "", "where to write the process's requests, in the same format")
	flag.Parse()
	if *pid <= 0 || *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: go run filter.go -pid PID -in RAW -out OUT (every flag is required)")
		os.Exit(2)
	}
	kept, err := filter(*pid, *in, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "filter:", err)
		os.Exit(1)
	}
	fmt.Printf("%d requests with profiles of process %d written to %s\n", kept, *pid, *out)
}

func filter(pid int64, in, out string) (int, error) {
	raw, err := os.ReadFile(in)
	if err != nil {
		return 0, err
	}
	var written []byte
	kept := 0
	for offset := 0; offset < len(raw); {
		if len(raw)-offset < 4 {
			return 0, fmt.Errorf("%s: %d bytes at offset %d: not a size prefix", in, len(raw)-offset, offset)
		}
		size := int(binary.BigEndian.Uint32(raw[offset:]))
		if size > len(raw)-offset-4 {
			return 0, fmt.Errorf("%s: a message of %d bytes at offset %d runs past the end", in, size, offset)
		}
		pd, err := (&pprofile.ProtoUnmarshaler{}).UnmarshalProfiles(raw[offset+4 : offset+4+size])
		if err != nil {
			return 0, fmt.Errorf("%s: message at offset %d: %w", in, offset, err)
		}
		offset += 4 + size
		pd.ResourceProfiles().RemoveIf(func(rp pprofile.ResourceProfiles) bool {
			v, ok := rp.Resource().Attributes().Get("process.pid")
			return !ok || v.Int() != pid
		})
		if pd.ResourceProfiles().Len() == 0 {
			continue
		}
		compact := newProfiles()
		if err := pd.MergeTo(compact); err != nil {
			return 0, err
		}
		msg, err := (&pprofile.ProtoMarshaler{}).MarshalProfiles(compact)
		if err != nil {
			return 0, err
		}
		written = binary.BigEndian.AppendUint32(written, uint32(len(msg)))
		written = append(written, msg...)
		kept++
	}
	if kept == 0 {
		return 0, errors.New("no request carries profiles of that process: was the profiler running while it did?")
	}
	return kept, os.WriteFile(out, written, 0o644)
}

// newProfiles is an empty request whose dictionary holds the zero value at index 0 of every
// table, as the proto asks.
func newProfiles() pprofile.Profiles {
	p := pprofile.NewProfiles()
	d := p.Dictionary()
	d.StringTable().Append("")
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	return p
}
