package store

import (
	"encoding/json"
	"testing"
	"time"
)

// A cluster's state written before its bookkeeping had fields of its own (the free-form Extra
// map) is read into those fields, so an upgraded server carries on with a rollback of an update,
// a heartbeat outage or a partition under way; written again, it has the fields and no Extra.
func TestClusterStateReadsTheOldExtraMap(t *testing.T) {
	old := `{"CreateLogStream":"c-1","Extra":{"RollbackOf":"update","heartbeat-outage":"2026-12-01T10:00:03.5Z",` +
		`"last-partition":"{\"Nodes\":[\"gpu-1\",\"gpu-2\"],\"Since\":\"2026-12-01T09:00:00Z\",\"Ended\":\"2026-12-01T09:01:00Z\"}"}}`
	var s ClusterState
	if err := json.Unmarshal([]byte(old), &s); err != nil {
		t.Fatal(err)
	}
	outage := time.Date(2026, 12, 1, 10, 0, 3, 500_000_000, time.UTC)
	if s.CreateLogStream != "c-1" || !s.RollingBackUpdate || !s.HeartbeatOutageSince.Equal(outage) ||
		s.LastPartition == nil || len(s.LastPartition.Nodes) != 2 || !s.LastPartition.Ended.Equal(time.Date(2026, 12, 1, 9, 1, 0, 0, time.UTC)) {
		t.Fatalf("read %+v (partition %+v)", s, s.LastPartition)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var again ClusterState
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	if string(b) == old || !again.RollingBackUpdate || !again.HeartbeatOutageSince.Equal(outage) || again.LastPartition == nil {
		t.Errorf("written again: %s, read back %+v", b, again)
	}
	var none ClusterState
	if err := json.Unmarshal([]byte(`{"UpdateGeneration":2}`), &none); err != nil || none.RollingBackUpdate || !none.HeartbeatOutageSince.IsZero() || none.LastPartition != nil || none.UpdateGeneration != 2 {
		t.Errorf("a state without Extra: %+v, %v", none, err)
	}
}
