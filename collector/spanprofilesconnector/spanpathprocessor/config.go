// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanpathprocessor

import "fmt"

// maxTopFrames is the spanprofiles connector's bound on its top_frames.
const maxTopFrames = 50

// Config is the span_path processor's configuration.
type Config struct {
	// TopFrames is how many hops the path event lists (the rest as a count and their ms), as
	// the spanprofiles connector's top_frames.
	TopFrames int `mapstructure:"top_frames"`
}

// Validate refuses a top_frames out of 1 to 50.
func (c *Config) Validate() error {
	if c.TopFrames < 1 || c.TopFrames > maxTopFrames {
		return fmt.Errorf("top_frames is %d: expected 1 to %d", c.TopFrames, maxTopFrames)
	}
	return nil
}

func createDefaultConfig() *Config { return &Config{TopFrames: 5} }
