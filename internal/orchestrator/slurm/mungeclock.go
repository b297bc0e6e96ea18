package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// A clock Slurm's authentication refuses. munge stamps every credential with the encoding
// host's clock and refuses one decoded more than its TTL (300 s) after that ("Expired
// credential") or before it ("Rewound credential"), so a node whose clock is off loses slurmctld
// at once: its registrations are refused, its slurmd refuses the pings, and Slurm shows it
// NOT_RESPONDING, then DOWN, which reads like a dead machine (issue 27; the heartbeats' check,
// agentserver's clock.go, finds the same skew when the node's whole clock is off). When
// slurmctld has a node not responding while its agent answers, hale asks the node's munged for
// a credential and the controller's to decode it: what unmunge says (the encode and decode
// times, the status) names a skew as node.clock_skew with its offset, which is resynced, never
// repaired by a reboot or new hardware.

// mungeCheck is a check the poll asked for, which the next round starts as a job.
type mungeCheck struct {
	node                 store.Node
	ctlInstance, ctlName string
}

// mungeCheckEvery is how often one node not responding has its munge clock checked.
const mungeCheckEvery = 30 * time.Second

// mungeSkewReportEvery is how often one node's munge skew is reported while it lasts.
const mungeSkewReportEvery = 10 * time.Minute

// mungeSkewLimit is the offset past which a node's munge clock is a finding: the heartbeats'
// (agentserver.ClockSkewLimit), far below munge's TTL, far above a command's round trip.
const mungeSkewLimit = 30 * time.Second

// unmungeScript decodes the credential given as $1 with the node's munged; unmunge prints its
// metadata (STATUS, ENCODE_TIME, DECODE_TIME) even for a credential it refuses, so its exit
// status is not an error here.
const unmungeScript = `printf '%s\n' "$1" | unmunge; true`

// notResponding reports whether slurmctld has lost touch with the node's slurmd (a trailing
// "*" is sinfo's way of writing NOT_RESPONDING).
func notResponding(state, reason string) bool {
	return strings.Contains(state, "NOT_RESPONDING") || strings.HasSuffix(state, "*") ||
		strings.HasPrefix(state, "DOWN") && strings.EqualFold(strings.TrimSpace(reason), "Not responding")
}

// mungeStatus is what unmunge printed about one credential.
type mungeStatus struct {
	Status         string    // "Success (0)", "Rewound credential (16)", ...
	Encode, Decode time.Time // by the encoding and the decoding host's clock
}

// parseUnmunge reads unmunge's metadata lines ("ENCODE_TIME:     2026-12-04 12:42:19 +0000
// (1796388139)"); ok is false when the times are missing.
func parseUnmunge(out string) (m mungeStatus, ok bool) {
	epoch := func(v string) time.Time {
		i, j := strings.LastIndexByte(v, '('), strings.LastIndexByte(v, ')')
		if i < 0 || j < i {
			return time.Time{}
		}
		sec, err := strconv.ParseInt(v[i+1:j], 10, 64)
		if err != nil {
			return time.Time{}
		}
		return time.Unix(sec, 0)
	}
	for _, line := range strings.Split(out, "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "STATUS":
			m.Status = v
		case "ENCODE_TIME":
			m.Encode = epoch(v)
		case "DECODE_TIME":
			m.Decode = epoch(v)
		}
	}
	return m, !m.Encode.IsZero() && !m.Decode.IsZero()
}

// refused reports whether munge refused the credential for its time.
func (m mungeStatus) refused() bool {
	return strings.HasPrefix(m.Status, "Expired") || strings.HasPrefix(m.Status, "Rewound")
}

// checkMungeClock has the node's munged encode a credential and the controller's decode it, and
// reports a skew past mungeSkewLimit (or one munge refuses) as node.clock_skew.
func (s *Slurm) checkMungeClock(ctx context.Context, clusterID, ctlInstance, ctlName string, n *store.Node) {
	cred, err := s.h.Run(ctx, n.InstanceID, []string{"munge", "-n"}, 10*time.Second)
	if err != nil || !strings.HasPrefix(strings.TrimSpace(cred), "MUNGE:") {
		return // munged down: the daemon's own findings say so
	}
	out, err := s.h.Run(ctx, ctlInstance, []string{"sh", "-c", unmungeScript, "unmunge", strings.TrimSpace(cred)}, 10*time.Second)
	if err != nil {
		return
	}
	m, ok := parseUnmunge(out)
	if !ok {
		return
	}
	offset := m.Encode.Sub(m.Decode)
	if !m.refused() && offset.Abs() <= mungeSkewLimit {
		return
	}
	if !s.skewReports.Due(n.InstanceID, s.h.Now()) {
		return
	}
	name := orchestrator.NodeName(n)
	way := "ahead of"
	if offset < 0 {
		way = "behind"
	}
	evidence := fmt.Sprintf("the node's clock is %s %s the controller's (unmunge: %s; munge refuses credentials more than 300 s off): "+
		"slurmctld has node %s not responding; munge on it encoded a credential at %s by its clock, which munge on the controller %s decoded at %s by its own",
		offset.Abs().Round(time.Second), way, m.Status, name, m.Encode.UTC().Format(time.RFC3339), ctlName, m.Decode.UTC().Format(time.RFC3339))
	s.h.NodeTx(ctx, clusterID, n.LogicalID, func(tx store.Tx, cl *store.Cluster, cur *store.Node) error {
		if cur.InstanceID != n.InstanceID {
			return nil // replaced meanwhile
		}
		return s.h.Finding(tx, cl, cur, clockSkewFault, evidence)
	})
}

// startMungeChecks starts the checks the poll asked for, a job each.
func (r *round) startMungeChecks() {
	s := r.s
	s.mu.Lock()
	due := s.mungeDue[r.cl.ID]
	delete(s.mungeDue, r.cl.ID)
	s.mu.Unlock()
	for _, m := range due {
		clusterID := r.cl.ID
		r.r.Go(jobMunge, m.node.InstanceID, func(ctx context.Context) {
			s.checkMungeClock(ctx, clusterID, m.ctlInstance, m.ctlName, &m.node)
		})
	}
}

// clockSkewFault is the catalog's fault for a node's clock off from the control plane's.
const clockSkewFault = "node.clock_skew"
