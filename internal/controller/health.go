package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Health intake (DESIGN.md §7): every finding, from an agent's monitors or from the control
// plane itself (a node that stopped answering, an operator's Action: reason), is recorded
// with its evidence in the node's SagemakerHealthMonitoringAgent/<group>/<instance-id> log
// stream and as an event, judged by the catalog's policy against the node's history, and,
// when it asks for a node action, opens a repair (repair.go) or makes an open one more severe.

// historyWindow is how far back the policy looks (the longest window of the catalog's).
const historyWindow = 24 * time.Hour

// HealthStream is the log stream of a node's health findings, as HyperPod names it.
func HealthStream(group, instanceID string) string {
	return "SagemakerHealthMonitoringAgent/" + group + "/" + instanceID
}

// HandleFinding takes a finding an agent reported (agentserver.Config.OnFinding).
func (c *Controller) HandleFinding(ctx context.Context, clusterID, instanceID string, pf *agentproto.Finding) {
	f := pf.Health()
	monitor := pf.Monitor
	if monitor == "" {
		monitor = "agent"
	}
	c.recordFinding(ctx, clusterID, instanceID, f, monitor, "health", time.UnixMilli(pf.ObservedUnixMs))
}

// recordFinding records a finding about the node with that instance id and acts on it.
func (c *Controller) recordFinding(ctx context.Context, clusterID, instanceID string, f health.Finding, monitor string, source store.RepairSource, observed time.Time) {
	err := c.st.Write(ctx, func(tx store.Tx) error {
		cl, n, err := clusterNodeOf(tx, clusterID, instanceID)
		if err != nil {
			return err
		}
		return c.judge(tx, cl, n, instanceID, f, monitor, source, observed)
	})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			c.log.Error("recording a health finding", "cluster_id", clusterID, "instance_id", instanceID, "error", err)
		}
		return
	}
	if f.Fault == clockSkewFault {
		c.resyncClock(clusterID, instanceID)
	}
	c.Enqueue(clusterID)
}

// clusterNodeOf reads a cluster and the node an instance of it is (or was: a replacement keeps
// the node's record under its new instance).
func clusterNodeOf(tx store.Tx, clusterID, instanceID string) (*store.Cluster, *store.Node, error) {
	cl, err := tx.ClusterByID(clusterID)
	if err != nil {
		return nil, nil, err
	}
	n, err := tx.NodeByAnyInstanceID(instanceID)
	return cl, n, err
}

// judge records a finding about node n (seen on instanceID, which a replacement may have
// retired since) in tx, and opens or escalates its repair when the policy says so. A finding
// that is part of an episode already recorded (the next line of one driver exception, the
// NVML event for the same Xid: health.JoinsEpisode) is added to that episode's record, with
// no event of its own; the episode is judged again, since a line may name the process the
// first did not, and only a decision more severe than before acts.
func (c *Controller) judge(tx store.Tx, cl *store.Cluster, n *store.Node, instanceID string, f health.Finding, monitor string, source store.RepairSource, observed time.Time) error {
	cat := health.Default()
	cat.Complete(&f)
	clusterID := cl.ID
	now := c.now()
	if observed.IsZero() || observed.After(now) {
		observed = now
	}
	pastF, err := tx.FindingsOf(clusterID, n.LogicalID, now.Add(-historyWindow))
	if err != nil {
		return err
	}
	pastR, err := tx.RepairsOf(clusterID, n.LogicalID, now.Add(-historyWindow))
	if err != nil {
		return err
	}
	var rh []health.Past
	for _, p := range pastR {
		if p.State != store.RepairCancelled {
			rh = append(rh, health.Past{Fault: p.Fault, Action: health.Action(p.Action), At: p.CreatedAt})
		}
	}
	f.Time = observed
	rec := episodeOf(pastF, instanceID, n.Details.BootTime, f, cat.Policy.EpisodeWindow)
	fresh := rec == nil
	before := health.Ignore
	if fresh {
		rec = &store.Finding{ClusterID: clusterID, LogicalID: n.LogicalID, InstanceID: instanceID, At: observed, Finding: f,
			Monitor: monitor, LastAt: observed}
		rec.Lines = max(f.Lines, 1)
	} else {
		before = decided(rec)
		addToEpisode(rec, f, observed)
	}
	if !fresh { // the repair this episode opened is no earlier repair it recurred after
		var earlier []health.Past
		for _, p := range rh {
			if p.At.Before(rec.At) {
				earlier = append(earlier, p)
			}
		}
		rh = earlier
	}
	var fh []health.Past
	for _, p := range pastF {
		if p.Seq != rec.Seq || fresh {
			fh = append(fh, health.Past{Fault: p.Fault, PCI: p.PCI, At: p.At, Process: processKey(p)})
		}
	}
	ep := health.Finding{Fault: rec.Fault, Action: rec.Action, Xid: rec.Xid, PCI: rec.PCI, GPU: rec.GPU,
		PID: rec.PID, Process: rec.Process, Job: rec.Job}
	cat.Complete(&ep)
	d := cat.Decide(ep, fh, rh, now)
	if cut := partitionOf(cl, n.LogicalID, observed, now); cut != "" && source == "health" && networkFault(f.Fault) {
		// What a node saw of the cut (its link down) is the network fault's, not its own.
		d = health.Decision{Action: health.Ignore, Note: "part of the network fault that cut " + cut}
	}
	if !fresh && d.Action.Severity() <= before.Severity() {
		return tx.UpdateFinding(rec) // one more line of an episode judged already
	}
	rec.Decision, rec.Escalated = string(d.Action), d.Escalated
	if d.Quarantine {
		rec.Decision = "Quarantine"
	}
	current := n.InstanceID == instanceID
	// A node acts on findings while it serves (or, set up, waits for its orchestrator to take it); one
	// still coming up is judged by its checks.
	act := d.Action != health.Ignore && current && (n.Details.Phase == store.PhaseReady || n.Details.Phase == store.PhaseJoining)
	var rp *store.Repair
	if act && (source == "health" || source == "heartbeat") {
		if err := c.watchBurst(tx, cl, n, f, now); err != nil {
			return err
		}
	}
	if act {
		if rp, err = c.openRepair(tx, cl, n, f, d, source, now); err != nil {
			return err
		}
		if rp != nil {
			rec.RepairID = rp.ID
		}
	}
	if fresh {
		err = tx.InsertFinding(rec)
	} else {
		err = tx.UpdateFinding(rec)
	}
	if err != nil {
		return err
	}
	// The health stream has a record for each episode, and another when a later line of it
	// made hale act.
	line, _ := json.Marshal(hmaRecord(rec, d))
	if err := tx.AppendLogEvents(agentserver.LogGroup(cl.Name, cl.ID), HealthStream(n.GroupName, instanceID), cl.ID,
		[]store.LogEvent{{Time: observed, Message: string(line)}}); err != nil {
		return err
	}
	return instanceEvent(tx, cl, n, now, findingLevel(d, rec.Fault), "%s", findingSentence(n, rec, d, rp, current))
}

// maxEvidenceLines is how many lines of an episode its record keeps (Lines counts them all).
const maxEvidenceLines = 20

// episodeOf returns the recorded episode (of the same instance, since its last boot: a reboot
// ends every episode) finding f is part of, nil when it opens one.
func episodeOf(past []*store.Finding, instanceID string, boot time.Time, f health.Finding, window time.Duration) *store.Finding {
	for i := len(past) - 1; i >= 0; i-- {
		p := past[i]
		if f.Time.Sub(p.At) > window || p.At.Before(boot) { // older episodes began earlier still
			break
		}
		ep := health.Finding{Fault: p.Fault, Action: p.Action, PCI: p.PCI, GPU: p.GPU, Time: p.At, PID: p.PID, Job: p.Job}
		if p.InstanceID == instanceID && health.JoinsEpisode(ep, f, window) {
			return p
		}
	}
	return nil
}

// addToEpisode adds a finding's line to a recorded episode.
func addToEpisode(rec *store.Finding, f health.Finding, observed time.Time) {
	if strings.Count(rec.Evidence, "\n")+1 < maxEvidenceLines && f.Evidence != "" {
		rec.Evidence += "\n" + f.Evidence
	}
	rec.Lines = max(rec.Lines, 1) + max(f.Lines, 1)
	rec.LastAt = observed
	if processKey(rec) == "" && f.ProcessKey() != "" {
		rec.PID, rec.Process, rec.Job = f.PID, f.Process, f.Job
	}
}

// decided is the action a recorded finding's decision took (Quarantine counts as Replace).
func decided(rec *store.Finding) health.Action {
	if rec.Decision == "Quarantine" {
		return health.Replace
	}
	return health.Action(rec.Decision)
}

func processKey(p *store.Finding) string {
	return p.ProcessKey()
}

// findingLevel is a finding's event level: Info when it asks for no node action, Warn when it
// does, or what the catalog says (health.Entry.Level: Error, down until a person acts; Warn).
func findingLevel(d health.Decision, fault string) api.ClusterEventLevel {
	if e, ok := health.Default().Fault(fault); ok && e.Level != "" {
		return api.ClusterEventLevel(e.Level)
	}
	if d.Action == health.Ignore {
		return api.ClusterEventLevelInfo
	}
	return api.ClusterEventLevelWarn
}

// findingSentence is the finding's event: what, where, what hale does, the evidence.
func findingSentence(n *store.Node, f *store.Finding, d health.Decision, rp *store.Repair, current bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Health: %s on instance %s (%s, group %s)", f.Fault, f.InstanceID, orchestrator.NodeName(n), n.GroupName)
	if f.Xid != 0 {
		fmt.Fprintf(&b, ", Xid %d", f.Xid)
	}
	if f.PCI != "" {
		fmt.Fprintf(&b, " on %s %s", health.Device(f.Fault), f.PCI)
	}
	if k := processKey(f); k != "" {
		fmt.Fprintf(&b, " (%s", k)
		if f.Process != "" {
			fmt.Fprintf(&b, " %s", f.Process)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %s. ", f.Meaning)
	switch {
	case !current:
		b.WriteString("The instance has been replaced since: no action.")
	case d.Action == health.Ignore && d.Note != "":
		fmt.Fprintf(&b, "No node action: %s.", d.Note)
	case d.Action == health.Ignore:
		b.WriteString("No node action (the catalog ignores it).")
	case rp == nil:
		fmt.Fprintf(&b, "It asks for %s; the node is %s, so its checks will decide.", d.Action, n.Details.Phase)
	case d.Quarantine:
		fmt.Fprintf(&b, "It asks for a replacement, but the node was replaced for it too often: quarantining it (repair %s).", rp.ID)
	default:
		fmt.Fprintf(&b, "Action: %s (repair %s)", rp.Action, rp.ID)
		if d.Escalated != "" {
			fmt.Fprintf(&b, ", escalated: %s", d.Escalated)
		}
		b.WriteString(".")
	}
	ev := strings.ReplaceAll(strings.TrimSpace(health.EvidenceLines(f.Evidence, 4)), "\n", " | ")
	if f.Lines > 1 {
		fmt.Fprintf(&b, " Evidence (%d lines): %s", f.Lines, ev)
	} else {
		fmt.Fprintf(&b, " Evidence: %s", ev)
	}
	return b.String()
}

// hmaRecord is a finding as a JSON line of the health log stream, in the shape of HyperPod's
// health monitoring agent's records (its "details: " key included), with hale's fields added.
func hmaRecord(f *store.Finding, d health.Decision) map[string]any {
	severity := strings.ToLower(string(findingLevel(d, f.Fault))) // as the finding's event: info, warn, error
	details := map[string]any{"severity": severity, "timestamp": f.At.Format(time.RFC3339Nano), "reason": f.Fault,
		"action": f.Decision, "catalogAction": f.Action, "message": f.Evidence, "meaning": f.Meaning, "source": f.Source, "monitor": f.Monitor}
	if f.Xid != 0 {
		details["xid"] = f.Xid
	}
	if f.PCI != "" {
		details["pci"] = f.PCI
	}
	if f.Escalated != "" {
		details["escalated"] = f.Escalated
	}
	if k := processKey(f); k != "" {
		details["process"] = k
		if f.Process != "" {
			details["processName"] = f.Process
		}
	}
	if f.Lines > 1 {
		details["lines"] = f.Lines
	}
	if f.RepairID != "" {
		details["repairId"] = f.RepairID
	}
	return map[string]any{"level": "info", "ts": time.Now().UTC().Format(time.RFC3339Nano), "msg": "hale health monitor: finding",
		"details: ": details, "HealthMonitoringAgentDetectionEvent": "HealthEvent"}
}

// openRepair opens a repair of the node for a decision, or makes the node's open repair more
// severe (a Reboot not yet under way becomes a Replace). It returns the repair that answers
// the finding, nil when there is none to open.
func (c *Controller) openRepair(tx store.Tx, cl *store.Cluster, n *store.Node, f health.Finding, d health.Decision, source store.RepairSource, now time.Time) (*store.Repair, error) {
	rp, err := openRepairOf(tx, cl.ID, n.LogicalID)
	if err != nil {
		return nil, err
	}
	if rp != nil {
		if was := health.Action(rp.Action); (was == health.Reboot || was == health.ResetGPU) && d.Action.Severity() > was.Severity() && rp.State.BeforeRepairing() {
			rp.Action, rp.Fault, rp.GPU, rp.PCI = store.RepairAction(d.Action), f.Fault, f.GPU, f.PCI
			rp.Timeline = append(rp.Timeline, store.RepairStep{At: now, What: fmt.Sprintf("%s found: the %s becomes a %s", f.Fault, was.Noun(), d.Action.Noun())})
			rp.UpdatedAt = now
			return rp, tx.PutRepair(rp)
		}
		return rp, nil // already being repaired
	}
	rp, err = newRepair(tx, cl, n, store.RepairAction(d.Action), f.Fault, source, reasonOf(f, d), f.Evidence, d.Quarantine, now)
	if err != nil || d.Action != health.ResetGPU {
		return rp, err
	}
	rp.GPU, rp.PCI = f.GPU, f.PCI
	return rp, tx.PutRepair(rp)
}

// openRepairOf is the node's open repair, nil when it has none (a node has one at a time).
func openRepairOf(tx store.Tx, clusterID, logicalID string) (*store.Repair, error) {
	open, err := tx.OpenRepairs(clusterID)
	if err != nil {
		return nil, err
	}
	for _, rp := range open {
		if rp.LogicalID == logicalID {
			return rp, nil
		}
	}
	return nil, nil
}

func reasonOf(f health.Finding, d health.Decision) string {
	r := f.Fault
	if f.Xid != 0 {
		r += fmt.Sprintf(" (Xid %d)", f.Xid)
	}
	r += ": " + f.Meaning
	if d.Escalated != "" {
		r += "; escalated: " + d.Escalated
	}
	return r
}

// newRepair records a repair of the node, Draining.
func newRepair(tx store.Tx, cl *store.Cluster, n *store.Node, action store.RepairAction, fault string, source store.RepairSource, reason, evidence string, quarantine bool, now time.Time) (*store.Repair, error) {
	rp := &store.Repair{ID: "repair-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12], ClusterID: cl.ID, LogicalID: n.LogicalID,
		InstanceID: n.InstanceID, Action: action, Fault: fault, Source: source, Reason: reason, Evidence: evidence,
		State: store.RepairDraining, Quarantine: quarantine, CreatedAt: now, UpdatedAt: now,
		Timeline: []store.RepairStep{{At: now, What: "detected: " + reason}}}
	if err := tx.InsertRepair(rp); err != nil {
		return nil, err
	}
	n.Details.RepairStatus = repairStatus(rp)
	return rp, tx.UpdateNode(n)
}

// repairStatus is the one line DescribeClusterNode shows about a node's repair.
func repairStatus(rp *store.Repair) string {
	if !rp.State.Open() {
		return ""
	}
	return fmt.Sprintf("Repair %s (%s, %s): %s", rp.ID, rp.Action, rp.Fault, rp.State)
}
