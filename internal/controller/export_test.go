package controller

import (
	"context"
	"time"

	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// What the tests of package controller_test (those on internal/harness, which imports this
// package and so cannot be imported by its internal tests) need of its unexported parts.

// Timeline is a repair's timeline as its events tell it.
var Timeline = timeline

// ClockSkewFault and ResyncEvery are clock.go's.
const (
	ClockSkewFault = clockSkewFault
	ResyncEvery    = resyncEvery
)

// RecordFinding records a finding about the instance as its agent's monitor reports it.
func (c *Controller) RecordFinding(ctx context.Context, clusterID, instanceID string, f health.Finding, monitor string, source store.RepairSource, observed time.Time) {
	c.recordFinding(ctx, clusterID, instanceID, f, monitor, source, observed)
}

// RoundFacts are the facts a round begins with, as a new round reads them.
type RoundFacts struct {
	Outage                 bool
	Serving, SilentServing int
	// Silent says whether the round judges the instance's agent silent.
	Silent func(instanceID string) bool
}

// NewRoundFacts begins a round of the cluster and returns its facts.
func (c *Controller) NewRoundFacts(tx store.Tx, cl *store.Cluster) (RoundFacts, error) {
	r, err := c.newRound(tx, cl)
	if err != nil {
		return RoundFacts{}, err
	}
	return RoundFacts{Outage: r.outage, Serving: r.serving, SilentServing: r.silentServing,
		Silent: func(id string) bool { return r.agent(id).silent }}, nil
}
