package agentserver

import (
	"context"
	"fmt"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
)

// Clock skew. A node whose clock is off fails in ways that look like a broken machine: munge
// refuses Slurm's credentials past its 5-minute TTL (jobs fail to start, slurmd "not
// responding"), TLS refuses certificates outside their validity. Each heartbeat carries the
// agent's clock (sent_unix_ms); compared with the server's at its arrival, it names the fault
// with its offset before Slurm's symptoms come, as a finding of its own (node.clock_skew), which
// the catalog never answers with a reboot or a replacement.

// ClockSkewLimit is the offset from the server's clock past which a node's clock is a finding:
// far below munge's 5 minutes, far above any network or queueing delay of a heartbeat.
const ClockSkewLimit = 30 * time.Second

// clockSkewBehind is how many heartbeats in a row must be behind by more than the limit: a
// heartbeat delayed (queued behind a large message, a stalled agent) looks behind too, while
// none can arrive before it was sent, so one ahead is enough.
const clockSkewBehind = 3

// clockSkewEvery is how often one session reports a skew that lasts.
const clockSkewEvery = 10 * time.Minute

// watchClock judges a heartbeat's send time, received at now, and reports a skew.
func (s *Server) watchClock(ctx context.Context, sess *session, hb *agentproto.Heartbeat, now time.Time) {
	if hb.SentUnixMs == 0 {
		return // an agent that does not say when it sent it
	}
	offset := time.UnixMilli(hb.SentUnixMs).Sub(now)
	switch {
	case offset < -ClockSkewLimit:
		sess.skewBehind++
		if sess.skewBehind < clockSkewBehind {
			return
		}
	case offset > ClockSkewLimit:
	default:
		sess.skewBehind = 0
		return
	}
	if !sess.skewReported.IsZero() && now.Sub(sess.skewReported) < clockSkewEvery {
		return
	}
	sess.skewReported = now
	way := "ahead of"
	if offset < 0 {
		way, offset = "behind", -offset
	}
	evidence := fmt.Sprintf("the node's clock is %s %s the server's (heartbeat %d sent at %s by its clock, received at %s)",
		offset.Round(time.Second), way, hb.Seq, time.UnixMilli(hb.SentUnixMs).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	f := agentproto.NewFinding(health.Default().FaultFinding("node.clock_skew", evidence), "server-clock", now)
	if s.cfg.OnFinding != nil {
		s.cfg.OnFinding(ctx, sess.clusterID, sess.instanceID, f)
	} else {
		s.log.Warn("finding", "instance_id", sess.instanceID, "fault", f.Fault, "evidence", evidence)
	}
}
