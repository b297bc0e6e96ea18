package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/haleproject/hale/internal/store"
)

// TestMigrationMovesSlurmState fills a database of schema version 4 with a Slurm cluster as hale
// kept it then, and checks what migration 5 makes of it.
func TestMigrationMovesSlurmState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hale.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	must(t, err)
	must(t, (&Store{w: db, path: path}).migrateTo(ctx, 4))
	for _, q := range []string{
		`INSERT INTO clusters (id, name, arn, status, spec, state, created_at, updated_at) VALUES
			('c1', 'slurm', 'arn:c1', 'InService', '{}', '{"CreateLogStream":"x","Slurm":{"Resolved":true,"Controller":"controller","Generation":2,"Hash":"h1","Nodes":[{"Name":"ip-10-1-0-2","Addr":"10.1.0.2","CPUs":2,"RealMemory":100,"Group":"gpu","Partition":"gpu"}]}}', 1, 1),
			('c2', 'plain', 'arn:c2', 'InService', '{}', '{"CreateLogStream":"y"}', 1, 1),
			('c3', 'fresh', 'arn:c3', 'InService', '{}', '{"Slurm":{"Resolved":true}}', 1, 1),
			('c4', 'eks', 'arn:c4', 'InService', '{"Orchestrator":{"Eks":{"ClusterArn":"arn:aws:eks:us-west-2:123456789012:cluster/k"}}}', '{"Slurm":{"Resolved":true}}', 1, 1)`,
		`INSERT INTO nodes (cluster_id, instance_id, logical_id, group_name, instance_type, status, launch_time, details) VALUES
			('c1', 'i-1', 'gpu-1', 'gpu', 'ml.c5.xlarge', 'Running', 1, '{"PrivateIP":"10.1.0.2","SlurmConf":"h1","SlurmState":"IDLE","SlurmReason":"","HaleDrain":"Action:Replace","Phase":"Ready"}'),
			('c1', 'i-2', 'gpu-2', 'gpu', 'ml.c5.xlarge', 'Running', 1, '{"PrivateIP":"10.1.0.3","Phase":"Ready"}'),
			('c1', 'i-4', 'gpu-3', 'gpu', 'ml.c5.xlarge', 'Running', 1, '{"SlurmState":"IDLE+DRAIN","SlurmReason":"Action:Reboot","RepairRequest":"Reboot","Phase":"Ready"}'),
			('c1', '', 'gpu-4', 'gpu', 'ml.c5.xlarge', 'Pending', 1, '{"Phase":"Pending"}'),
			('c2', 'i-3', 'g-1', 'g', 'ml.c5.xlarge', 'Running', 1, '{"PrivateIP":"10.2.0.2"}')`,
		`INSERT INTO repairs (id, cluster_id, logical_id, state, created_at, updated_at, body) VALUES
			('r1', 'c1', 'gpu-1', 'Done', 1, 1, '{"ID":"r1","Action":"Reboot","State":"Done","InService":true,"SlurmName":"ip-10-1-0-2","SlurmState":"idle"}'),
			('r2', 'c2', 'g-1', 'Done', 1, 1, '{"ID":"r2","Action":"Reboot","State":"Done"}')`,
	} {
		_, err := db.Exec(q)
		must(t, err)
	}
	must(t, db.Close())

	s := open(t, path) // applies migration 5
	jsonEq := func(what string, got []byte, want string) {
		t.Helper()
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		must(t, json.Unmarshal([]byte(want), &w))
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", what, got, want)
		}
	}
	must(t, s.Read(ctx, func(tx store.Tx) error {
		c1, err := tx.ClusterByID("c1")
		must(t, err)
		if want := (store.ClusterState{CreateLogStream: "x", UpdateGeneration: 2}); !reflect.DeepEqual(c1.State, want) {
			t.Errorf("c1 state %+v, want %+v", c1.State, want)
		}
		recs, err := tx.OrchestratorRecords("c1")
		must(t, err)
		if len(recs) != 3 || recs[""] == nil || recs["gpu-1"] == nil || recs["gpu-3"] == nil {
			t.Fatalf("c1 records: %s (want the cluster's, gpu-1's and gpu-3's)", recordsString(recs))
		}
		// An operator's request and Slurm's reason come across; no files held, no ConfInstance.
		jsonEq("gpu-3 record", recs["gpu-3"].Body, `{"State":"IDLE+DRAIN","Reason":"Action:Reboot","RepairRequest":"Reboot"}`)
		if recs[""].Kind != "slurm" || recs["gpu-1"].Kind != "slurm" {
			t.Errorf("kinds %q, %q", recs[""].Kind, recs["gpu-1"].Kind)
		}
		jsonEq("c1 record", recs[""].Body, `{"Resolved":true,"Controller":"controller","Hash":"h1",
			"Nodes":[{"Name":"ip-10-1-0-2","Addr":"10.1.0.2","CPUs":2,"RealMemory":100,"Group":"gpu","Partition":"gpu"}]}`)
		jsonEq("gpu-1 record", recs["gpu-1"].Body,
			`{"Conf":"h1","ConfInstance":"i-1","State":"IDLE","Reason":"","HaleDrain":"Action:Replace"}`)
		n, err := tx.NodeByLogicalID("c1", "gpu-1")
		must(t, err)
		if n.Details.PrivateIP != "10.1.0.2" || n.Details.Phase != store.PhaseReady {
			t.Errorf("gpu-1 details %+v", n.Details)
		}
		r, err := tx.Repair("r1")
		must(t, err)
		if r.NodeName != "ip-10-1-0-2" || r.ServiceState != "idle" || !r.InService {
			t.Errorf("repair r1 %+v", r)
		}

		// A cluster without Slurm keeps its state and gets no record; one without a Generation
		// gets no UpdateGeneration.
		if recs, err := tx.OrchestratorRecords("c2"); err != nil || len(recs) != 0 {
			t.Errorf("c2 records: %s, %v", recordsString(recs), err)
		}
		c3, err := tx.ClusterByID("c3")
		must(t, err)
		if !reflect.DeepEqual(c3.State, store.ClusterState{}) {
			t.Errorf("c3 state %+v", c3.State)
		}
		r3, err := tx.OrchestratorRecord("c3", "")
		must(t, err)
		jsonEq("c3 record", r3.Body, `{"Resolved":true}`)
		// An EKS cluster had Slurm state only to say it has none: no record of Slurm's.
		if recs, err := tx.OrchestratorRecords("c4"); err != nil || len(recs) != 0 {
			t.Errorf("c4 (EKS) records: %s, %v", recordsString(recs), err)
		}
		return nil
	}))

	// The old keys are gone from the stored JSON, and what had none is untouched.
	for _, c := range []struct{ q, want string }{
		{`SELECT state FROM clusters WHERE id = 'c1'`, `{"CreateLogStream":"x","UpdateGeneration":2}`},
		{`SELECT state FROM clusters WHERE id = 'c2'`, `{"CreateLogStream":"y"}`},
		{`SELECT state FROM clusters WHERE id = 'c3'`, `{}`},
		{`SELECT state FROM clusters WHERE id = 'c4'`, `{}`},
		{`SELECT details FROM nodes WHERE logical_id = 'gpu-3'`, `{"Phase":"Ready"}`},
		{`SELECT details FROM nodes WHERE logical_id = 'gpu-4'`, `{"Phase":"Pending"}`},
		{`SELECT details FROM nodes WHERE logical_id = 'gpu-1'`, `{"PrivateIP":"10.1.0.2","Phase":"Ready"}`},
		{`SELECT details FROM nodes WHERE logical_id = 'gpu-2'`, `{"PrivateIP":"10.1.0.3","Phase":"Ready"}`},
		{`SELECT body FROM repairs WHERE id = 'r1'`, `{"ID":"r1","Action":"Reboot","State":"Done","InService":true,"NodeName":"ip-10-1-0-2","ServiceState":"idle"}`},
		{`SELECT body FROM repairs WHERE id = 'r2'`, `{"ID":"r2","Action":"Reboot","State":"Done"}`},
	} {
		var got string
		must(t, s.r.QueryRow(c.q).Scan(&got))
		jsonEq(c.q, []byte(got), c.want)
	}
}
