package eventbridge

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// The field names AWS documents, from the examples of the SageMaker developer guide ("Events that
// Amazon SageMaker AI sends to Amazon EventBridge": SageMaker HyperPod cluster state change,
// cluster node health, cluster event) and the EventBridge user guide's event structure.
var (
	envelopeFields = []string{"version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"}
	// The state change's detail is DescribeCluster's answer; these are the members AWS's example
	// shows that a hale cluster of fixture's kind has.
	stateChangeFields = []string{"ClusterArn", "ClusterName", "ClusterStatus", "CreationTime", "FailureMessage", "InstanceGroups",
		"NodeRecovery", "Orchestrator", "VpcConfig"}
	stateChangeGroupFields = []string{"CurrentCount", "ExecutionRole", "InstanceGroupName", "InstanceType", "LifeCycleConfig",
		"Status", "TargetCount", "ThreadsPerCore"}
	nodeHealthFields    = []string{"ClusterName", "ClusterArn", "InstanceId", "Tags", "HealthSummary"}
	healthSummaryFields = []string{"HealthStatus", "HealthStatusReason", "RepairAction", "Recommendation"}
	// detail.EventDetails of a cluster event: DescribeClusterEvent's record (ClusterEventDetail).
	clusterEventFields = []string{"EventId", "ClusterArn", "ClusterName", "InstanceGroupName", "InstanceId", "ResourceType",
		"EventTime", "EventLevel", "Description", "EventDetails"}
)

func keys(m map[string]any) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// hasFields fails unless m has every one of want (and, when exact, nothing else).
func hasFields(t *testing.T, what string, m map[string]any, want []string, exact bool) {
	t.Helper()
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %s: has %v", what, k, keys(m))
		}
	}
	if exact && !slices.Equal(keys(m), sorted(want)) {
		t.Errorf("%s has %v, want exactly %v", what, keys(m), sorted(want))
	}
}

// checkEnvelope checks the envelope every event has and returns its detail.
func checkEnvelope(t *testing.T, e store.OutboxEntry, detailType string, at time.Time) map[string]any {
	t.Helper()
	m := decoded(t, e)
	hasFields(t, "the envelope", m, envelopeFields, true)
	// The members' order is the documented one too (receivers may log the raw body).
	var ordered []string
	dec := json.NewDecoder(bytesOf(e.Body))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		ordered = append(ordered, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if !slices.Equal(ordered, envelopeFields) {
		t.Errorf("envelope members in order %v, want %v", ordered, envelopeFields)
	}
	want := map[string]any{"version": "0", "id": e.ID, "detail-type": detailType, "source": "aws.sagemaker",
		"account": "123456789012", "region": "eu-west-1", "time": at.UTC().Format("2006-01-02T15:04:05Z")}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s: %s = %v, want %v", detailType, k, m[k], v)
		}
	}
	if r, _ := m["resources"].([]any); len(r) != 1 || r[0] != testARN {
		t.Errorf("%s: resources %v, want [%s]", detailType, m["resources"], testARN)
	}
	d, ok := m["detail"].(map[string]any)
	if !ok {
		t.Fatalf("%s: detail %T", detailType, m["detail"])
	}
	return d
}

func TestClusterStateChangeShape(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	f.mustWrite(func(tx store.Tx) error { return setStatus(tx, api.ClusterStatusInService) })
	out := f.outbox()
	if len(out) != 2 {
		t.Fatalf("%d entries, want 2 (Creating, InService)", len(out))
	}
	for i, status := range []string{"Creating", "InService"} {
		d := checkEnvelope(t, out[i], ClusterStateChange, f.now)
		hasFields(t, "the state change's detail", d, stateChangeFields, false)
		if d["ClusterStatus"] != status || d["ClusterName"] != "train" || d["ClusterArn"] != testARN || d["FailureMessage"] != "" {
			t.Errorf("detail %v", d)
		}
		// Epoch milliseconds, as AWS's example (1745858447412), not the API's epoch seconds.
		if d["CreationTime"] != float64(1764660000123) {
			t.Errorf("CreationTime %v, want 1764660000123 (ms)", d["CreationTime"])
		}
		groups, _ := d["InstanceGroups"].([]any)
		if len(groups) != 1 {
			t.Fatalf("InstanceGroups %v", d["InstanceGroups"])
		}
		g := groups[0].(map[string]any)
		hasFields(t, "a group", g, stateChangeGroupFields, false)
		if g["CurrentCount"] != float64(2) || g["TargetCount"] != float64(2) || g["Status"] != "InService" || g["InstanceType"] != "ml.g5.2xlarge" {
			t.Errorf("group %v", g)
		}
		if lc, _ := g["LifeCycleConfig"].(map[string]any); lc["OnCreate"] != "on_create.sh" || lc["SourceS3Uri"] != "s3://sagemaker-lc/base" {
			t.Errorf("LifeCycleConfig %v", g["LifeCycleConfig"])
		}
	}
}

func TestNodeHealthEventShape(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	rp := &store.Repair{ID: "repair-0123456789ab", ClusterID: "abcdefghijkl", LogicalID: "gpu-1", InstanceID: "i-00000000000000001",
		Action: "Replace", Fault: "gpu.bus_lost", Source: "health", Reason: "gpu.bus_lost (Xid 79): the GPU fell off the bus",
		State: store.RepairDraining, CreatedAt: f.now, UpdatedAt: f.now}
	f.mustWrite(func(tx store.Tx) error { return tx.InsertRepair(rp) })
	rp.State, rp.NewInstanceID = store.RepairDone, "i-00000000000000009"
	f.mustWrite(func(tx store.Tx) error { return tx.PutRepair(rp) })
	out := f.outbox()[1:] // after the cluster's Creating
	if len(out) != 2 {
		t.Fatalf("%d node health entries, want 2 (Unhealthy, Healthy)", len(out))
	}
	for i, want := range []HealthSummary{
		{HealthStatus: "Unhealthy", RepairAction: "Replace"},
		{HealthStatus: "Healthy", RepairAction: "None"},
	} {
		d := checkEnvelope(t, out[i], NodeHealthEvent, f.now)
		hasFields(t, "the node health detail", d, nodeHealthFields, true)
		hs, _ := d["HealthSummary"].(map[string]any)
		hasFields(t, "HealthSummary", hs, healthSummaryFields, true)
		if hs["HealthStatus"] != want.HealthStatus || hs["RepairAction"] != want.RepairAction || hs["HealthStatusReason"] == "" {
			t.Errorf("HealthSummary %v, want %+v", hs, want)
		}
		if tags, _ := d["Tags"].(map[string]any); tags["team"] != "ml" || len(tags) != 1 {
			t.Errorf("Tags %v, want {team: ml}", d["Tags"])
		}
	}
	if id := decoded(t, out[0])["detail"].(map[string]any)["InstanceId"]; id != "i-00000000000000001" {
		t.Errorf("Unhealthy names %v, want the faulty instance", id)
	}
	if id := decoded(t, out[1])["detail"].(map[string]any)["InstanceId"]; id != "i-00000000000000009" {
		t.Errorf("Healthy names %v, want the replacement", id)
	}
}

func TestClusterEventShape(t *testing.T) {
	f := newFixture(t)
	f.mustWrite(func(tx store.Tx) error { _, err := f.cluster(tx); return err })
	at := time.UnixMilli(1764661234567).UTC()
	ev := &store.Event{ID: "83ea0bb5-be77-45e8-a458-0a87f778a205", ClusterID: "abcdefghijkl", ClusterName: "train", ClusterARN: testARN,
		GroupName: "gpu", InstanceID: "i-00000000000000001", ResourceType: api.ClusterEventResourceTypeInstance, Level: api.ClusterEventLevelInfo,
		Time: at, Description: "Instance lifecycle script execution for EC2InstanceId i-00000000000000001 has Started",
		Metadata: &api.EventMetadata{Instance: &api.InstanceMetadata{LcsExecutionState: new("Started")}}}
	f.mustWrite(func(tx store.Tx) error { return tx.AppendEvent(ev) })
	out := f.outbox()
	e := out[len(out)-1]
	d := checkEnvelope(t, e, ClusterEvent, at) // the envelope's time is the event's
	hasFields(t, "the cluster event's detail", d, []string{"EventDetails"}, true)
	rec := d["EventDetails"].(map[string]any)
	hasFields(t, "detail.EventDetails", rec, clusterEventFields, true)
	if rec["EventId"] != ev.ID || rec["EventTime"] != float64(1764661234567) || rec["ResourceType"] != "Instance" || rec["EventLevel"] != "Info" {
		t.Errorf("record %v", rec)
	}
	meta, _ := rec["EventDetails"].(map[string]any)["EventMetadata"].(map[string]any)
	if inst, _ := meta["Instance"].(map[string]any); inst["LcsExecutionState"] != "Started" {
		t.Errorf("EventMetadata %v", meta)
	}
	if e.ID == ev.ID {
		t.Error("the envelope's id is the cluster event's id: EventBridge gives each delivery event an id of its own")
	}
}

func bytesOf(b []byte) *bytes.Reader { return bytes.NewReader(b) }
