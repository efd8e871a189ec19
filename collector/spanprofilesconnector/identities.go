// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"go.uber.org/zap"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// identitiesBound bounds the span resources remembered (their process, or that their ambiguity
// was logged); past it they are forgotten and relearnt.
const identitiesBound = 4_096

// identities tells processes apart when a span's resource fits several (two containers in PID
// namespaces of their own, on the host's network, each pid 1 with the same host name, and spans
// without service.instance.id): by evidence, the process whose windows hold samples of the
// spans' traces; else the process the resource matched before the others appeared, so that a
// process never loses its enrichment to a newcomer; else nothing is guessed, and the Collector
// logs once per resource what collided.
type identities struct {
	logger *zap.Logger
	bound  map[profilestore.Identity]*profilestore.Process
	logged map[profilestore.Identity]bool
}

func newIdentities(logger *zap.Logger) *identities {
	return &identities{logger: logger, bound: map[profilestore.Identity]*profilestore.Process{}, logged: map[profilestore.Identity]bool{}}
}

// bind remembers that resource id matched p.
func (ids *identities) bind(id profilestore.Identity, p *profilestore.Process) {
	if ids.bound[id] == p {
		return
	}
	if len(ids.bound) >= identitiesBound {
		clear(ids.bound)
	}
	ids.bound[id] = p
}

// resolve picks the process of u's spans among cands, or nil.
func (ids *identities) resolve(u *unit, cands []*profilestore.Process) *profilestore.Process {
	var evident *profilestore.Process
	for _, p := range cands {
		for i, s := range u.spans {
			if !u.settled[i] && p.HoldsTrace(s.TraceID()) {
				if evident != nil && evident != p {
					return nil // evidence for two: not guessed
				}
				evident = p
				break
			}
		}
	}
	if evident != nil {
		return evident
	}
	if before := ids.bound[u.id]; before != nil {
		for _, p := range cands {
			if p == before {
				return p
			}
		}
	}
	return nil
}

// logAmbiguous says, once per resource, which processes its spans could not be told apart from.
func (ids *identities) logAmbiguous(id profilestore.Identity, cands []*profilestore.Process) {
	if !ids.firstTime(id) {
		return
	}
	described := make([]string, 0, len(cands))
	for _, p := range cands {
		described = append(described, p.Describe())
	}
	ids.logger.Warn("span_profiles cannot tell which process these spans come from: several processes fit their resource, and none holds samples of their traces; they pass unenriched (ambiguous_process). Give each process a service.instance.id (the package's one-line wiring does), or container.id on both spans and profiles; logged once per resource",
		zap.String("service.name", id.ServiceName),
		zap.String("service.instance.id", id.InstanceID),
		zap.Int64("process.pid", id.PID),
		zap.String("host.name", id.HostName),
		zap.String("container.id", id.ContainerID),
		zap.Strings("candidates", described),
	)
}

// firstTime says whether nothing was logged yet of resource id, and remembers that now it is.
func (ids *identities) firstTime(id profilestore.Identity) bool {
	if ids.logged[id] {
		return false
	}
	if len(ids.logged) >= identitiesBound {
		clear(ids.logged)
	}
	ids.logged[id] = true
	return true
}

// logForged says, once per resource, that spans name a profiled process's service.instance.id
// under another pid (profilestore.Store.InstanceElsewhere), so they were not joined to it.
func (ids *identities) logForged(id profilestore.Identity, owner *profilestore.Process) {
	if !ids.firstTime(id) {
		return
	}
	ids.logger.Warn("span_profiles did not join these spans to the process whose service.instance.id they carry: their process.pid is another; they pass unenriched (ambiguous_process). Another process may be sending spans as that instance; logged once per resource",
		zap.String("service.name", id.ServiceName),
		zap.String("service.instance.id", id.InstanceID),
		zap.Int64("process.pid", id.PID),
		zap.String("host.name", id.HostName),
		zap.String("instance's process", owner.Describe()),
	)
}
