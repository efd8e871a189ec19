// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Identity is what a resource says of the process it comes from.
type Identity struct {
	InstanceID string
	HostName   string
	// On spans: the pid the process sees itself as. On profiles: the same (process.vpid when
	// the agent saw the process in a PID namespace of its own, else process.pid).
	PID         int64
	ContainerID string
	// service.name, unless the SDK's placeholder (unknown_service:...), which names nothing.
	ServiceName string
}

// IdentityOf reads the identity of a resource (of spans or of profiles).
func IdentityOf(attrs pcommon.Map) Identity {
	name := StrAttr(attrs, AttrServiceName)
	if strings.HasPrefix(name, "unknown_service") {
		name = ""
	}
	return Identity{
		InstanceID:  StrAttr(attrs, AttrServiceInstanceID),
		HostName:    StrAttr(attrs, attrHostName),
		PID:         IntAttr(attrs, AttrProcessPID),
		ContainerID: StrAttr(attrs, attrContainerID),
		ServiceName: name,
	}
}

// StrAttr reads a string attribute; "" when absent or of another type.
func StrAttr(attrs pcommon.Map, k string) string {
	if v, ok := attrs.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// IntAttr reads a non-negative integer attribute, also from a decimal string (some SDKs and
// processors send pids as strings); 0 when absent or not a number.
func IntAttr(attrs pcommon.Map, k string) int64 {
	v, ok := attrs.Get(k)
	if !ok {
		return 0
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return max(v.Int(), 0)
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		if err != nil {
			return 0
		}
		return max(n, 0)
	}
	return 0
}
