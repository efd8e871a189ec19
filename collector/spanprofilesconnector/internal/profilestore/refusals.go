// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package profilestore

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.uber.org/zap"
)

// Why samples of a resource were refused, as the Collector's log says it (the counts are in
// otelcol_connector_spanprofiles_samples under the same outcome).
var refusalReasons = map[string]string{
	SampleUntimed:     "values without a timestamp per value (an aggregated profile): the join needs each sample's time, one timestamp per event",
	SampleInvalid:     "an index outside the request's tables, a sampling period outside 1µs to 10s, or a value or time outside the profile's window (±2s)",
	SampleNoThread:    "no thread.id sample attribute",
	SampleUnsupported: "a profile the join cannot total: off-CPU intervals from a profiler other than thread-ctx agent (sampled switches), or a known sample type in another unit or without a period type",
	SampleOverBound:   "max_samples were held (raise max_samples, or lower retention)",
	refusedNoTime:     "the profiles' time range is missing, or longer than an hour",
	refusedNoPID:      "the resource has no process.pid, so no span can name its process",
}

// Windows refused whole (counted as invalid windows, their samples as invalid): no time range,
// no pid.
const (
	refusedNoTime = "no_time_range"
	refusedNoPID  = "no_pid"
)

// refusalsLogged bounds the (resource, reason) pairs remembered as logged; past it they are
// forgotten and each is logged once more.
const refusalsLogged = 4_096

// refusalKey is a resource, as its log line names it, and one reason.
type refusalKey struct {
	id          Identity
	serviceName string
	reason      string
}

// refusalLog logs, once per resource and reason, why samples of a resource's profiles were
// refused: the spans of that process get no figure those samples touch, and the log says why.
type refusalLog struct {
	logger *zap.Logger
	logged map[refusalKey]bool
}

func newRefusalLog(logger *zap.Logger) *refusalLog {
	return &refusalLog{logger: logger, logged: map[refusalKey]bool{}}
}

// note logs each reason of counts (outcome -> samples) not logged before for rp's resource.
func (l *refusalLog) note(rp pprofile.ResourceProfiles, counts map[string]int) {
	attrs := rp.Resource().Attributes()
	id := IdentityOf(attrs)
	name := StrAttr(attrs, "service.name")
	for reason, n := range counts {
		if n <= 0 {
			continue
		}
		k := refusalKey{id: id, serviceName: name, reason: reason}
		if l.logged[k] {
			continue
		}
		if len(l.logged) >= refusalsLogged {
			clear(l.logged)
		}
		l.logged[k] = true
		scope := ""
		if rp.ScopeProfiles().Len() > 0 {
			scope = rp.ScopeProfiles().At(0).Scope().Name()
		}
		l.logger.Warn(fmt.Sprintf("span_profiles refused samples of a process's profiles (%s): spans of that process get no figure those samples touch; logged once per resource and reason", refusalReasons[reason]),
			zap.String("outcome", reason),
			zap.Int("samples", n),
			zap.String("service.name", name),
			zap.String("service.instance.id", id.InstanceID),
			zap.Int64("process.pid", id.PID),
			zap.String("host.name", id.HostName),
			zap.String("container.id", id.ContainerID),
			zap.String("profiler", scope),
		)
	}
}
