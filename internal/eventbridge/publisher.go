package eventbridge

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Publisher is the store.Publisher that turns hale's changes into EventBridge events
// (sqlite.Store.SetPublisher): a cluster's status change, a node's health, every cluster event.
// It only builds events; the store writes them to its outbox in the change's transaction and a
// Deliverer hands them to the sinks.
type Publisher struct {
	// Now and NewID default to time.Now and a random UUID; tests fix them.
	Now   func() time.Time
	NewID func() string

	mu      sync.Mutex
	wakeups []func() // Deliverers' wake-ups, called after a commit that published
}

var _ store.Publisher = (*Publisher)(nil)

func (p *Publisher) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Publisher) newID() string {
	if p.NewID != nil {
		return p.NewID()
	}
	return uuid.NewString()
}

// entry wraps a detail in its envelope, ready for the outbox.
func (p *Publisher) entry(detailType, clusterARN string, at time.Time, detail any) (store.OutboxEntry, error) {
	env, err := newEnvelope(p.newID(), detailType, clusterARN, at, detail)
	if err != nil {
		return store.OutboxEntry{}, err
	}
	body, err := json.Marshal(env)
	if err != nil {
		return store.OutboxEntry{}, err
	}
	return store.OutboxEntry{ID: env.ID, Time: at, Body: body}, nil
}

// ClusterChanged publishes a Cluster State Change when the transaction created the cluster or
// changed its ClusterStatus (its other changes, such as a group's counts, are not a state change).
func (p *Publisher) ClusterChanged(tx store.Tx, before, after *store.Cluster) ([]store.OutboxEntry, error) {
	if before != nil && before.Status == after.Status {
		return nil, nil
	}
	d, err := clusterStateDetail(tx, after)
	if err != nil {
		return nil, err
	}
	e, err := p.entry(ClusterStateChange, after.ARN, p.now(), d)
	if err != nil {
		return nil, err
	}
	return []store.OutboxEntry{e}, nil
}

// RepairChanged publishes a Node Health Event when a repair's change says something about its
// node's health (nodeHealth).
func (p *Publisher) RepairChanged(tx store.Tx, before, after *store.Repair) ([]store.OutboxEntry, error) {
	cl, err := tx.ClusterByID(after.ClusterID)
	if err != nil {
		return nil, err
	}
	gone := false
	if after.State == store.RepairCancelled {
		n, err := tx.NodeByLogicalID(cl.ID, after.LogicalID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			gone = true
		case err != nil:
			return nil, err
		default:
			gone = n.Details.Phase == store.PhaseTerminating
		}
	}
	hs := nodeHealth(cl, before, after, gone)
	if hs == nil {
		return nil, nil
	}
	instance := after.InstanceID
	if hs.HealthStatus == "Healthy" && after.NewInstanceID != "" {
		instance = after.NewInstanceID // a replacement: the node is healthy on its new instance
	}
	tags, err := tx.Tags(cl.ARN)
	if err != nil {
		return nil, err
	}
	d := NodeHealthDetail{ClusterName: cl.Name, ClusterArn: cl.ARN, InstanceId: instance, Tags: tagMap(tags), HealthSummary: *hs}
	e, err := p.entry(NodeHealthEvent, cl.ARN, p.now(), d)
	if err != nil {
		return nil, err
	}
	return []store.OutboxEntry{e}, nil
}

// EventAppended publishes every cluster event as a Cluster Event.
func (p *Publisher) EventAppended(tx store.Tx, ev *store.Event) ([]store.OutboxEntry, error) {
	d, err := clusterEventDetail(ev)
	if err != nil {
		return nil, err
	}
	e, err := p.entry(ClusterEvent, ev.ClusterARN, ev.Time, d)
	if err != nil {
		return nil, err
	}
	return []store.OutboxEntry{e}, nil
}

// Committed wakes the Deliverers: there is something new in the outbox.
func (p *Publisher) Committed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.wakeups {
		w()
	}
}

// onCommit adds a wake-up.
func (p *Publisher) onCommit(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeups = append(p.wakeups, f)
}

func tagMap(tags []api.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.GetKey()] = t.GetValue()
	}
	return m
}
