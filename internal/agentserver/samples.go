package agentserver

import (
	"time"

	"github.com/haleproject/hale/internal/agentproto"
)

// NodeSample is the latest NodeMetrics sample of an agent: of its session, or, for
// StaleSamples of its interval after it was received, of a session that ended (Ended).
type NodeSample struct {
	InstanceID string
	ClusterID  string
	// Metrics is what the agent sent, its Xid count (XidCount, hale's own) made monotonic per
	// instance and GPU for the server's life (counterBase). Its DCGM counters are the agent's:
	// the volatile ECC counts reset with the driver (a reboot, a GPU reset), as DCGM's do, and
	// the aggregate ones are the GPU's lifetime counts.
	Metrics  *agentproto.NodeMetrics
	Received time.Time
	// Capability is the agent's capability version: the fields a sample of an older agent
	// lacks are left out of /metrics, not shown as zeros.
	Capability uint32
	// Ended: the session that sent it ended (a repair replaced or rebooted the node, the agent
	// stopped); its sample is still shown so that a scrape sees the node's last Xid before its
	// series end. A new session of the same instance supersedes it.
	Ended bool
}

// StaleSamples is how many of its sampling intervals a sample is shown for: one that old means
// the agent stopped sampling (it is hung, or the session is about to be found silent). The last
// sample of a session that ended is shown as long: a repair replaces or reboots a node about 2 s
// after the Xid it is for, and a Prometheus that scrapes every 15 s would otherwise miss it.
const StaleSamples = 3

// fresh is whether a sample received then is still shown now.
func fresh(m *agentproto.NodeMetrics, received, now time.Time) bool {
	interval := time.Duration(m.IntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = 15 * time.Second
	}
	return now.Sub(received) <= StaleSamples*interval
}

// NodeSamples returns the latest fresh sample (received within StaleSamples of its sampling
// interval) of every agent with a session, and of every instance whose session ended without
// a new one. Agents older than capability 10, and those that have not sent one yet, have none.
func (s *Server) NodeSamples() []NodeSample {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]NodeSample, 0, len(s.sessions)+len(s.ended))
	for id, sess := range s.sessions {
		if m := sess.metrics; m != nil && fresh(m, sess.metricsAt, now) {
			out = append(out, NodeSample{InstanceID: id, ClusterID: sess.clusterID, Metrics: m, Received: sess.metricsAt, Capability: sess.version})
		}
	}
	for id, e := range s.ended {
		if !fresh(e.Metrics, e.Received, now) {
			delete(s.ended, id)
			continue
		}
		out = append(out, e)
	}
	return out
}

// keepEnded keeps the last sample of a session that ends (s.mu held).
func (s *Server) keepEnded(sess *session) {
	if sess.metrics != nil && fresh(sess.metrics, sess.metricsAt, time.Now()) {
		s.ended[sess.instanceID] = NodeSample{InstanceID: sess.instanceID, ClusterID: sess.clusterID, Metrics: sess.metrics,
			Received: sess.metricsAt, Ended: true, Capability: sess.version}
	}
}

// sampled takes a session's new sample (s.mu held): its Xid counts continue those the
// instance sent before.
func (s *Server) sampled(sess *session, m *agentproto.NodeMetrics) {
	base := s.counters[sess.instanceID]
	if base == nil {
		base = map[gpuKey]*gpuBase{}
		s.counters[sess.instanceID] = base
	}
	for _, g := range m.Gpus {
		k := gpuKey{g.Index, g.Uuid}
		b := base[k]
		if b == nil {
			b = &gpuBase{}
			base[k] = b
		}
		g.XidCount = b.xid.next(g.XidCount)
	}
	sess.metrics, sess.metricsAt = m, time.Now()
}

// gpuKey is a GPU of an instance: its index and UUID (a GPU swapped in is a new series).
type gpuKey struct {
	index int32
	uuid  string
}

// gpuBase is the counter-reset compensation of a GPU's Xid count. The ECC counts have none:
// DCGM's volatile counts reset with the driver by definition (an alert on them clears once the
// repair reloaded it), and their lifetime is the aggregate family the agent reads.
type gpuBase struct{ xid counterBase }

// counterBase makes a counter the agent keeps monotonic across the agent's restarts and the
// node's reboots: a value lower than the last is a reset, and the total before it becomes an
// offset, so Prometheus sees no reset and increase() over a repair counts the fault that caused
// it. Kept for the server's life (a few bytes per GPU ever seen); a server restart starts from
// the agents' counts, which Prometheus takes as one reset.
type counterBase struct{ last, offset uint64 }

// next is the monotonic value of the raw count v.
func (c *counterBase) next(v uint64) uint64 {
	if v < c.last {
		c.offset += c.last
	}
	c.last = v
	return v + c.offset
}
