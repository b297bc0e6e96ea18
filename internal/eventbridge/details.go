package eventbridge

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/service"
	"github.com/haleproject/hale/internal/store"
)

// The details of the three detail-types, with AWS's field names.

// HealthSummary is a Node Health Event's verdict on a node.
type HealthSummary struct {
	// HealthStatus is Unhealthy (a fault was found, or a repair ended without making the node
	// healthy) or Healthy (back in service after its repair).
	HealthStatus string
	// HealthStatusReason says what was found, in a sentence.
	HealthStatusReason string
	// RepairAction is what hale does about it by itself: Reboot, Replace or ResetGPU (hale's
	// GPU reset), or None (NodeRecovery None, a quarantined node, a repair that failed, or a
	// healthy node).
	RepairAction string
	// Recommendation is what an operator should do ("" when nothing).
	Recommendation string
}

// NodeHealthDetail is the detail of a "SageMaker HyperPod Cluster Node Health Event".
type NodeHealthDetail struct {
	ClusterName   string
	ClusterArn    string
	InstanceId    string
	Tags          map[string]string // the cluster's tags, {} when none
	HealthSummary HealthSummary
}

// ClusterEventDetail is the detail of a "SageMaker HyperPod Cluster Event": DescribeClusterEvent's
// record, with EventTime in epoch milliseconds.
type ClusterEventDetail struct {
	EventDetails map[string]any
}

// clusterStateDetail is the detail of a "SageMaker HyperPod Cluster State Change": DescribeCluster's
// answer (service.ClusterDescription), CreationTime in epoch milliseconds and FailureMessage
// always present ("" when none), as in AWS's example.
func clusterStateDetail(tx store.Tx, c *store.Cluster) (map[string]any, error) {
	groups, err := tx.Groups(c.ID)
	if err != nil {
		return nil, err
	}
	counts, err := tx.NodeCounts(c.ID)
	if err != nil {
		return nil, err
	}
	d, err := asMap(service.ClusterDescription(c, groups, counts))
	if err != nil {
		return nil, err
	}
	d["CreationTime"] = c.CreatedAt.UnixMilli()
	if _, ok := d["FailureMessage"]; !ok {
		d["FailureMessage"] = ""
	}
	return d, nil
}

// clusterEventDetail is the detail of a Cluster Event for a stored event.
func clusterEventDetail(e *store.Event) (*ClusterEventDetail, error) {
	d, err := asMap(service.EventDetail(e))
	if err != nil {
		return nil, err
	}
	d["EventTime"] = e.Time.UnixMilli()
	return &ClusterEventDetail{EventDetails: d}, nil
}

// asMap is v's JSON as a map, numbers kept exact, so a field's encoding can be changed (the API's
// epoch seconds become EventBridge's epoch milliseconds).
func asMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// nodeHealth is the Node Health Event a repair's change makes, nil when it makes none. A repair
// is hale's record of a node found unhealthy (internal/controller): its opening says the node is
// unhealthy and what hale will do; a more severe action later says so again; its end says
// Healthy (Done) or still Unhealthy with nothing more hale will do (Failed, Quarantined).
// A repair cancelled on a node that is still there (its agent answers again, an operator put it
// back in service in its orchestrator) says Healthy too; one cancelled because its node is gone
// (nodeGone) says nothing. Repairs an operator opened through the API (BatchRebootClusterNodes,
// BatchReplaceClusterNodes: their fault is "api.repair_request", internal/controller) are not
// health findings and make no event.
func nodeHealth(cl *store.Cluster, before, after *store.Repair, nodeGone bool) *HealthSummary {
	if after.Fault == "api.repair_request" {
		return nil
	}
	switch {
	case before == nil:
		hs := &HealthSummary{HealthStatus: "Unhealthy", HealthStatusReason: detected(after), RepairAction: string(after.Action),
			Recommendation: fmt.Sprintf("No action needed: hale will %s the node by itself (repair %s).", actionVerb(after.Action), after.ID)}
		switch {
		case after.Quarantine:
			hs.RepairAction = "None"
			hs.Recommendation = fmt.Sprintf("Replace the node by hand (BatchReplaceClusterNodes) once its hardware is looked at: it was replaced too often for this fault, so hale keeps it drained (repair %s).", after.ID)
		case cl.Spec.GetNodeRecovery() == api.ClusterNodeRecoveryNone && after.Source.Automatic():
			hs.RepairAction = "None"
			hs.Recommendation = fmt.Sprintf("%s the node (BatchRebootClusterNodes or BatchReplaceClusterNodes): NodeRecovery is None, so hale keeps it drained (repair %s).", actionVerbCap(after.Action), after.ID)
		}
		return hs
	case before.State.Open() && after.State.Open() && before.Action != after.Action:
		return &HealthSummary{HealthStatus: "Unhealthy", HealthStatusReason: detected(after), RepairAction: string(after.Action),
			Recommendation: fmt.Sprintf("No action needed: the %s becomes a %s; hale will %s the node by itself (repair %s).",
				actionNoun(before.Action), actionNoun(after.Action), actionVerb(after.Action), after.ID)}
	case !before.State.Open() || after.State.Open():
		return nil
	}
	switch after.State {
	case store.RepairDone:
		return &HealthSummary{HealthStatus: "Healthy", RepairAction: "None",
			HealthStatusReason: fmt.Sprintf("The node is back in service after its %s for %s (repair %s).", actionNoun(after.Action), after.Fault, after.ID)}
	case store.RepairFailed:
		return &HealthSummary{HealthStatus: "Unhealthy", RepairAction: "None",
			HealthStatusReason: fmt.Sprintf("The %s for %s failed: %s (repair %s).", actionNoun(after.Action), after.Fault, after.Message, after.ID),
			Recommendation:     "Look at the node, then replace it (BatchReplaceClusterNodes)."}
	case store.RepairCancelled:
		if nodeGone {
			return nil
		}
		why := "it was cancelled"
		if n := len(after.Timeline); n > 0 {
			why = after.Timeline[n-1].What
		}
		return &HealthSummary{HealthStatus: "Healthy", RepairAction: "None",
			HealthStatusReason: fmt.Sprintf("The node is in service again without its %s for %s: %s (repair %s).", actionNoun(after.Action), after.Fault, why, after.ID)}
	case store.RepairQuarantined:
		return &HealthSummary{HealthStatus: "Unhealthy", RepairAction: "None",
			HealthStatusReason: fmt.Sprintf("%s It is quarantined: it was replaced too often for %s (repair %s).", detected(after), after.Fault, after.ID),
			Recommendation:     "Replace the node by hand (BatchReplaceClusterNodes) once its hardware is looked at."}
	}
	return nil
}

func detected(rp *store.Repair) string {
	switch rp.Source {
	case "health":
		return fmt.Sprintf("hale's health monitor found %s. The node is unhealthy.", rp.Reason)
	case "heartbeat":
		return fmt.Sprintf("The node stopped answering (%s). It is unhealthy.", rp.Reason)
	}
	return fmt.Sprintf("An operator marked the node unhealthy in %s (%s).", rp.Source, rp.Reason)
}

func actionNoun(action store.RepairAction) string {
	switch action {
	case store.RepairReboot:
		return "reboot"
	case store.RepairReplace:
		return "replacement"
	case store.RepairResetGPU:
		return "GPU reset"
	}
	return string(action)
}

func actionVerb(action store.RepairAction) string {
	switch action {
	case store.RepairReboot:
		return "reboot"
	case store.RepairReplace:
		return "replace"
	case store.RepairResetGPU:
		return "reset the GPU of"
	}
	return string(action)
}

func actionVerbCap(action store.RepairAction) string {
	switch action {
	case store.RepairReplace:
		return "Replace"
	}
	return "Reboot" // a GPU reset by hand is a reboot through the API
}
