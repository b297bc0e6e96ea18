package controller

import (
	"fmt"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// A node is Running only once its orchestrator accepts work on it. A node whose lifecycle
// scripts and basic checks passed (a new instance, a scale-up, a replacement, a reboot, a
// repair, a software update) and whose orchestrator holds it back (orchestrator.BringUp.Joins:
// a compute node of a scheduler) waits in PhaseJoining, status Pending with a message saying what it
// waits for, until the orchestrator admits it (orchestrator.Round.Join). Without that wait the
// API said Running for the ~3 s in which the scheduler still had a replaced node out of
// service, and a job submitted on the API's word did not start. A node the orchestrator does not accept within
// Config.JoinTimeout fails, as one whose agent never registers does.

// DefaultJoinTimeout is how long a set-up node may wait for its orchestrator to accept it: a
// node's daemon registers with its scheduler within seconds.
const DefaultJoinTimeout = 60 * time.Second

// join moves a joining node on: Failure once it has waited longer than JoinTimeout, Running when
// its orchestrator does not hold it back, else the orchestrator decides.
func (r *round) join(n *store.Node) error {
	if r.now.Sub(n.Details.PhaseSince) > r.c.cfg.JoinTimeout {
		why := n.Details.WaitingFor
		if why == "" {
			why = "it never said why"
		}
		return r.fail(n, fmt.Sprintf("%s did not accept host %s (instance %s, group %s) within %s: %s.",
			r.orName, n.Details.PrivateDNSHostname, n.InstanceID, n.GroupName, r.c.cfg.JoinTimeout, why))
	}
	admit, err := r.or.Join(n)
	if err != nil || !admit {
		return err
	}
	return r.admitted(n)
}

// admitted makes a joining node that has no orchestrator to wait for (any more) Running.
func (r *round) admitted(n *store.Node) error {
	if err := setReady(r.tx, n, r.now); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is Running.", n.InstanceID)
}

// setReady moves a node to Ready (Running) and saves it.
func setReady(tx store.Tx, n *store.Node, now time.Time) error {
	enterPhase(n, store.PhaseReady, now)
	n.StatusMessage = ""
	n.Status = statusOf(n)
	return tx.UpdateNode(n)
}
