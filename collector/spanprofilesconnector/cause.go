// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"cmp"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"

	"fmt"
	"slices"
	"strings"
)

// causeParts builds a request's cause for its hop of a path (causeOf, from the samples on a
// node; causeFromSpan, from an enriched span in the trace tier): one text for both. Parts under
// minHeldNs are left out.
type causeParts []causePart

type causePart struct {
	ns   int64
	text string
}

func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }

func (c *causeParts) add(ns int64, format string, args ...any) {
	if ns >= minHeldNs {
		*c = append(*c, causePart{ns, fmt.Sprintf(format, args...)})
	}
}

// cpu: on CPU in the trace, in its two hottest frames ("" when no stack was seen).
func (c *causeParts) cpu(ns int64, frames string) {
	if frames == "" {
		frames = profiledict.NoStack
	}
	c.add(ns, "cpu %.1fms in %s", nsToMs(ns), frames)
}

func (c *causeParts) runnable(ns int64) { c.add(ns, "waiting for a CPU %.1fms", nsToMs(ns)) }

func (c *causeParts) blocked(ns int64) { c.add(ns, "blocked %.1fms", nsToMs(ns)) }

// held: other traces held the thread, the longest of them who, in frame.
func (c *causeParts) held(ns int64, who, frame string) {
	c.add(ns, "held by %s %.1fms: %s", who, nsToMs(ns), frame)
}

// String is the parts longest first, "no samples" when there are none.
func (c causeParts) String() string {
	if len(c) == 0 {
		return "no samples"
	}
	slices.SortStableFunc(c, func(a, b causePart) int { return cmp.Compare(b.ns, a.ns) })
	texts := make([]string, len(c))
	for i, p := range c {
		texts[i] = p.text
	}
	return strings.Join(texts, "; ")
}
