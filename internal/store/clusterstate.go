package store

import (
	"encoding/json"
	"time"
)

// Partition is a network fault that cut nodes (logical ids) off the server from Since to Ended.
type Partition struct {
	Nodes []string
	Since time.Time
	Ended time.Time
}

// UnmarshalJSON reads a ClusterState, and what stores written before its fields were typed kept
// in the free-form Extra map ("RollbackOf": "update", "heartbeat-outage", "last-partition"), so
// that an upgraded server carries on with a rollback, an outage or a partition under way.
func (s *ClusterState) UnmarshalJSON(b []byte) error {
	type plain ClusterState // without this method
	var v struct {
		plain
		Extra map[string]string `json:",omitempty"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = ClusterState(v.plain)
	if v.Extra["RollbackOf"] == "update" {
		s.RollingBackUpdate = true
	}
	if t, err := time.Parse(time.RFC3339Nano, v.Extra["heartbeat-outage"]); err == nil && s.HeartbeatOutageSince.IsZero() {
		s.HeartbeatOutageSince = t
	}
	if p := v.Extra["last-partition"]; p != "" && s.LastPartition == nil {
		var lp Partition
		if json.Unmarshal([]byte(p), &lp) == nil {
			s.LastPartition = &lp
		}
	}
	return nil
}
