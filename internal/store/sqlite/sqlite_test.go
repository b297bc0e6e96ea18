package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrationsAreVersionedAndIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hale.db")
	s := open(t, path)
	s.Close()
	s = open(t, path) // reopening applies nothing twice
	var n, v int
	s.w.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &v)
	if n != SchemaVersion() || v != SchemaVersion() {
		t.Fatalf("schema_migrations has %d rows up to %d, want %d", n, v, SchemaVersion())
	}
	// A database from a newer hale is refused, not damaged.
	s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)`)
	s.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "newer than this hale") {
		t.Fatalf("opening a newer schema: %v", err)
	}
}

func TestUniqueAndCascade(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "hale.db"))
	ctx := context.Background()
	now := time.Now()
	c := &store.Cluster{ID: "abcdefghijkl", Name: "c", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl", Status: api.ClusterStatusCreating, CreatedAt: now, UpdatedAt: now}
	err := s.Write(ctx, func(tx store.Tx) error {
		if err := tx.InsertCluster(c); err != nil {
			return err
		}
		dup := *c
		dup.ID = "mnopqrstuvwx"
		dup.ARN += "x"
		if err := tx.InsertCluster(&dup); !errors.Is(err, store.ErrExists) {
			t.Errorf("duplicate name: %v, want ErrExists", err)
		}
		n := &store.Node{ClusterID: c.ID, InstanceID: "i-0123456789abcdef0", LogicalID: "g-1", GroupName: "g", InstanceType: "ml.c5.xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: now}
		if err := tx.InsertNode(n); err != nil {
			return err
		}
		n2 := *n
		n2.LogicalID = "g-2"
		if err := tx.InsertNode(&n2); !errors.Is(err, store.ErrExists) {
			t.Errorf("duplicate instance id: %v, want ErrExists", err)
		}
		if err := tx.PutTags(c.ARN, []api.Tag{{Key: new("k"), Value: new("v")}}); err != nil {
			return err
		}
		return tx.AppendEvent(&store.Event{ID: "e1", ClusterID: c.ID, ClusterName: c.Name, ClusterARN: c.ARN, ResourceType: "Cluster", Level: "Info", Time: now, Description: "d"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, func(tx store.Tx) error { return tx.DeleteCluster(c.ID) }); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"nodes", "events", "tags", "instance_groups", "node_actions"} {
		var n int
		s.r.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n)
		if n != 0 {
			t.Errorf("%s keeps %d rows of a deleted cluster", table, n)
		}
	}
	// A failed Write changes nothing.
	boom := errors.New("boom")
	err = s.Write(ctx, func(tx store.Tx) error {
		tx.InsertCluster(c)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	err = s.Read(ctx, func(tx store.Tx) error {
		_, err := tx.ClusterByID(c.ID)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rolled-back insert is visible: %v", err)
	}
}

// TestNodeListUsesIndex checks the planner walks an index for every node list, so a page stays
// cheap however large the cluster.
func TestNodeListUsesIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "hale.db"))
	for _, q := range []string{
		`SELECT seq FROM nodes INDEXED BY nodes_by_time WHERE cluster_id = 'x' AND (launch_time, seq) > (1, 1) AND instance_id != '' ORDER BY launch_time, seq LIMIT 100`,
		`SELECT seq FROM nodes INDEXED BY nodes_by_name WHERE cluster_id = 'x' AND (group_name, instance_id, seq) < ('a', 'b', 1) ORDER BY group_name DESC, instance_id DESC, seq DESC LIMIT 100`,
		`SELECT seq FROM events INDEXED BY events_by_time WHERE cluster_id = 'x' ORDER BY time DESC, seq DESC LIMIT 100`,
	} {
		rows, err := s.r.Query(`EXPLAIN QUERY PLAN ` + q)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail sql.NullString
			rows.Scan(&id, &parent, &unused, &detail)
			plan = append(plan, detail.String)
		}
		rows.Close()
		joined := strings.Join(plan, " | ")
		if strings.Contains(joined, "TEMP B-TREE") || !strings.Contains(joined, "INDEX nodes_by") && !strings.Contains(joined, "INDEX events_by") {
			t.Errorf("plan sorts or scans instead of walking an index:\n%s\n%s", q, joined)
		}
	}
}

// BenchmarkListNodesPage measures the store's part of a ListClusterNodes page: one keyset
// query for 100 nodes from the middle of a cluster, by launch time and by name.
func BenchmarkListNodesPage(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "hale.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	for _, n := range []int{250, 10000, 100000} {
		id := fmt.Sprintf("c%011d", n)
		s.Write(ctx, func(tx store.Tx) error {
			if err := tx.InsertCluster(&store.Cluster{ID: id, Name: id, ARN: id, Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				if err := tx.InsertNode(&store.Node{ClusterID: id, InstanceID: fmt.Sprintf("i-%017x", i), LogicalID: fmt.Sprint(i),
					GroupName: fmt.Sprintf("g%d", i%4), InstanceType: "ml.p5.48xlarge", Status: api.ClusterInstanceStatusRunning,
					LaunchTime: now.Add(time.Duration(i/10) * time.Second)}); err != nil {
					return err
				}
			}
			return nil
		})
		for _, byName := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/byName=%v", n, byName), func(b *testing.B) {
				mid := n / 2
				after := &store.NodeCursor{GroupName: fmt.Sprintf("g%d", mid%4), InstanceID: fmt.Sprintf("i-%017x", mid), LaunchTime: now.Add(time.Duration(mid/10) * time.Second), Seq: int64(mid)}
				for i := 0; i < b.N; i++ {
					s.Read(ctx, func(tx store.Tx) error {
						page, err := tx.ListNodes(store.NodeQuery{ClusterID: id, ByName: byName, After: after, Limit: 100})
						if err != nil || len(page) != 100 {
							b.Fatalf("%d nodes, %v", len(page), err)
						}
						return nil
					})
				}
			})
		}
	}
}

func TestOrchestratorRecords(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "hale.db"))
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	c := &store.Cluster{ID: "abcdefghijkl", Name: "c", ARN: "arn:c", Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now,
		State: store.ClusterState{UpdateGeneration: 3}}
	n1 := &store.Node{ClusterID: c.ID, InstanceID: "i-1", LogicalID: "g-1", GroupName: "g", InstanceType: "ml.c5.xlarge",
		Status: api.ClusterInstanceStatusRunning, LaunchTime: now, Details: store.NodeDetails{OrchestratorStatus: "Slurm node ip-10-1-0-3: idle"}}
	n2 := &store.Node{ClusterID: c.ID, InstanceID: "i-2", LogicalID: "g-2", GroupName: "g", InstanceType: "ml.c5.xlarge",
		Status: api.ClusterInstanceStatusRunning, LaunchTime: now}
	rp := &store.Repair{ID: "r1", ClusterID: c.ID, LogicalID: "g-1", Action: "Reboot", State: store.RepairResuming,
		InService: true, ServiceState: "idle", NodeName: "ip-10-1-0-3", CreatedAt: now, UpdatedAt: now}
	rec := func(scope, body string) *store.OrchestratorRecord {
		return &store.OrchestratorRecord{ClusterID: c.ID, Scope: scope, Kind: "slurm", Body: []byte(body)}
	}
	must(t, s.Write(ctx, func(tx store.Tx) error {
		for _, err := range []error{tx.InsertCluster(c), tx.InsertNode(n1), tx.InsertNode(n2), tx.InsertRepair(rp),
			tx.PutOrchestratorRecord(rec("", `{"Hash":"h1"}`)), tx.PutOrchestratorRecord(rec("g-1", `{"State":"IDLE"}`)),
			tx.PutOrchestratorRecord(rec("g-2", `{"State":"MIXED"}`)),
			tx.PutOrchestratorRecord(rec("", `{"Hash":"h2"}`))} { // replaces the first
			if err != nil {
				return err
			}
		}
		if err := tx.PutOrchestratorRecord(rec("g-3", `not json`)); err == nil {
			t.Error("a body that is not JSON was stored")
		}
		return nil
	}))
	read := func() (recs map[string]*store.OrchestratorRecord) {
		must(t, s.Read(ctx, func(tx store.Tx) (err error) {
			recs, err = tx.OrchestratorRecords(c.ID)
			return err
		}))
		return recs
	}
	got := read()
	want := map[string]*store.OrchestratorRecord{"": rec("", `{"Hash":"h2"}`), "g-1": rec("g-1", `{"State":"IDLE"}`), "g-2": rec("g-2", `{"State":"MIXED"}`)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records: %s", recordsString(got))
	}
	must(t, s.Read(ctx, func(tx store.Tx) error {
		r, err := tx.OrchestratorRecord(c.ID, "g-1")
		if err != nil || !reflect.DeepEqual(r, want["g-1"]) {
			t.Errorf("record g-1: %+v, %v", r, err)
		}
		if _, err := tx.OrchestratorRecord(c.ID, "g-9"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("absent record: %v, want ErrNotFound", err)
		}
		// The renamed and new fields of the generic records round-trip.
		gc, err := tx.ClusterByID(c.ID)
		if err != nil || !reflect.DeepEqual(gc.State, c.State) {
			t.Errorf("cluster state %+v, %v; want %+v", gc.State, err, c.State)
		}
		gn, err := tx.NodeByLogicalID(c.ID, "g-1")
		if err != nil || !reflect.DeepEqual(gn.Details, n1.Details) {
			t.Errorf("node details %+v, %v; want %+v", gn.Details, err, n1.Details)
		}
		gr, err := tx.Repair("r1")
		if err != nil || !reflect.DeepEqual(gr, rp) {
			t.Errorf("repair %+v, %v; want %+v", gr, err, rp)
		}
		return nil
	}))

	// DeleteNode takes the node's record and leaves the cluster's and the other node's.
	must(t, s.Write(ctx, func(tx store.Tx) error { return tx.DeleteNode(c.ID, n1.Seq) }))
	if got := read(); len(got) != 2 || got[""] == nil || got["g-2"] == nil {
		t.Errorf("after DeleteNode: %s", recordsString(got))
	}
	if err := s.Write(ctx, func(tx store.Tx) error { return tx.DeleteNode(c.ID, n1.Seq) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting an absent node: %v, want ErrNotFound", err)
	}
	// DeleteCluster takes them all.
	must(t, s.Write(ctx, func(tx store.Tx) error { return tx.DeleteCluster(c.ID) }))
	if got := read(); len(got) != 0 {
		t.Errorf("after DeleteCluster: %s", recordsString(got))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func recordsString(m map[string]*store.OrchestratorRecord) string {
	var b strings.Builder
	for scope, r := range m {
		fmt.Fprintf(&b, "[%q %s %s %s] ", scope, r.ClusterID, r.Kind, r.Body)
	}
	return b.String()
}
