// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

// Package profiledict reads the shared tables of one OTLP profiles request (strings,
// attributes, links, stacks, locations, functions) for the span_profiles connector, every index
// checked: an index outside its table is an error the caller counts, never a panic. It names a
// stack by the frame a Node.js user can act on.
package profiledict // import "github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

const (
	// MaxLabelBytes is where frame labels and other names from a profile are cut (a target
	// controls function names).
	MaxLabelBytes = 256
	// NoStack names the frame of a sample without a stack.
	NoStack = "(no stack)"
	// AttrFrameType is the location attribute that says `v8js` (FrameTypeJS) for JS frames,
	// in both profilers' profiles.
	AttrFrameType = "profile.frame.type"
	FrameTypeJS   = "v8js"
)

// Dictionary reads one request's shared tables, every index checked: a sample whose index
// points outside its table is refused, never a panic.
type Dictionary struct {
	d      pprofile.ProfilesDictionary
	labels map[int32]string
}

// NewDictionary reads d.
func NewDictionary(d pprofile.ProfilesDictionary) *Dictionary {
	return &Dictionary{d: d, labels: map[int32]string{}}
}

// Str is string i of the string table.
func (d *Dictionary) Str(i int32) (string, bool) {
	t := d.d.StringTable()
	if i < 0 || int(i) >= t.Len() {
		return "", false
	}
	return t.At(int(i)), true
}

// Attribute is attribute i of the attribute table: its key and value.
func (d *Dictionary) Attribute(i int32) (string, pcommon.Value, bool) {
	t := d.d.AttributeTable()
	if i < 0 || int(i) >= t.Len() {
		return "", pcommon.NewValueEmpty(), false
	}
	a := t.At(int(i))
	k, ok := d.Str(a.KeyStrindex())
	return k, a.Value(), ok
}

// Link is link i of the link table: the trace and span a sample was taken in.
func (d *Dictionary) Link(i int32) (pcommon.TraceID, pcommon.SpanID, bool) {
	t := d.d.LinkTable()
	if i < 0 || int(i) >= t.Len() {
		return pcommon.TraceID{}, pcommon.SpanID{}, false
	}
	l := t.At(int(i))
	return l.TraceID(), l.SpanID(), true
}

// FrameLabel names a stack by its innermost JS function (what a Node user can act on), with
// its file and sampled line, else by its leaf frame (GC, native code); as the summary of
// `thread-ctx report` does.
func (d *Dictionary) FrameLabel(stack int32) (string, bool) {
	if l, ok := d.labels[stack]; ok {
		return l, true
	}
	st := d.d.StackTable()
	if stack < 0 || int(stack) >= st.Len() {
		return "", false
	}
	locs := st.At(int(stack)).LocationIndices()
	leaf := ""
	label := ""
	for i := 0; i < locs.Len() && label == ""; i++ {
		name, file, line, js, ok := d.Location(locs.At(i))
		if !ok {
			return "", false
		}
		if i == 0 {
			leaf = name
		}
		if js {
			label = name
			if file != "" && line > 0 {
				label = name + " (" + path.Base(file) + ":" + strconv.FormatInt(line, 10) + ")"
			} else if file != "" {
				label = name + " (" + path.Base(file) + ")"
			}
		}
	}
	if label == "" {
		label = leaf
	}
	if label == "" {
		label = NoStack
	}
	label = Truncate(label)
	d.labels[stack] = label
	return label, true
}

// Location returns a location's function name, file, line (the sampled one, else where its
// function starts) and whether it is a JS frame.
func (d *Dictionary) Location(i int32) (name, file string, line int64, js, ok bool) {
	lt := d.d.LocationTable()
	if i < 0 || int(i) >= lt.Len() {
		return "", "", 0, false, false
	}
	loc := lt.At(int(i))
	frameType := ""
	attrs := loc.AttributeIndices()
	for j := 0; j < attrs.Len(); j++ {
		k, v, ok := d.Attribute(attrs.At(j))
		if !ok {
			return "", "", 0, false, false
		}
		if k == AttrFrameType {
			frameType = v.AsString()
		}
	}
	lines := loc.Lines()
	if lines.Len() == 0 {
		return fmt.Sprintf("[%#x]", loc.Address()), "", 0, false, true
	}
	// The first line is the innermost function when calls were inlined.
	ln := lines.At(0)
	ft := d.d.FunctionTable()
	fi := ln.FunctionIndex()
	if fi < 0 || int(fi) >= ft.Len() {
		return "", "", 0, false, false
	}
	f := ft.At(int(fi))
	name, ok1 := d.Str(f.NameStrindex())
	file, ok2 := d.Str(f.FilenameStrindex())
	if !ok1 || !ok2 {
		return "", "", 0, false, false
	}
	if name == "" {
		name = fmt.Sprintf("[%#x]", loc.Address())
	}
	line = ln.Line()
	if line <= 0 {
		line = f.StartLine()
	}
	// V8's unnamed JIT code is typed v8js but names only its mapping ("[anon:jit]"): not a
	// function a user can act on.
	js = frameType == FrameTypeJS && !(strings.HasPrefix(name, "[") && file == "")
	return name, file, line, js, true
}

// Truncate cuts s at MaxLabelBytes, on a rune boundary, marked with an ellipsis.
func Truncate(s string) string {
	if len(s) <= MaxLabelBytes {
		return s
	}
	cut := MaxLabelBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
