// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profiledict

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// dictionaryWith one stack: a native leaf under the JS function `hogCPU` of /srv/service.js,
// sampled at line 25.
func dictionaryWith() pprofile.ProfilesDictionary {
	d := pprofile.NewProfilesDictionary()
	d.StringTable().Append("", "uv_run", "hogCPU", "/srv/service.js", AttrFrameType)
	jsType := d.AttributeTable().AppendEmpty()
	jsType.SetKeyStrindex(4)
	jsType.Value().SetStr(FrameTypeJS)
	native := d.FunctionTable().AppendEmpty()
	native.SetNameStrindex(1)
	hog := d.FunctionTable().AppendEmpty()
	hog.SetNameStrindex(2)
	hog.SetFilenameStrindex(3)
	d.LocationTable().AppendEmpty().Lines().AppendEmpty().SetFunctionIndex(0)
	js := d.LocationTable().AppendEmpty()
	js.AttributeIndices().Append(0)
	line := js.Lines().AppendEmpty()
	line.SetFunctionIndex(1)
	line.SetLine(25)
	d.StackTable().AppendEmpty().LocationIndices().Append(0, 1)
	d.StackTable().AppendEmpty().LocationIndices().Append(7)
	return d
}

// A stack is named by its innermost JS frame, with its file and line.
func TestFrameLabelIsTheInnermostJSFunction(t *testing.T) {
	d := NewDictionary(dictionaryWith())
	label, ok := d.FrameLabel(0)
	require.True(t, ok)
	assert.Equal(t, "hogCPU (service.js:25)", label)
	name, file, line, js, ok := d.Location(0)
	require.True(t, ok)
	assert.Equal(t, []any{"uv_run", "", int64(0), false}, []any{name, file, line, js})
}

// An index outside its table is refused, never a panic.
func TestIndicesOutsideTheirTables(t *testing.T) {
	d := NewDictionary(dictionaryWith())
	_, ok := d.Str(99)
	assert.False(t, ok)
	_, _, ok = d.Attribute(-1)
	assert.False(t, ok)
	_, _, ok = d.Link(0)
	assert.False(t, ok, "the link table is empty")
	_, ok = d.FrameLabel(5)
	assert.False(t, ok)
	_, ok = d.FrameLabel(1)
	assert.False(t, ok, "a stack whose location is outside the location table")
}

// Names are cut at MaxLabelBytes on a rune boundary.
func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", MaxLabelBytes)
	cut := Truncate(long)
	assert.LessOrEqual(t, len(cut), MaxLabelBytes+len("…"))
	assert.True(t, utf8.ValidString(cut))
	assert.Equal(t, "short", Truncate("short"))
}
