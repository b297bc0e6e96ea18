package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// testRepairs: repairs and findings by node and by time, open ones, and their counts.
func testRepairs(t *testing.T, o Opener) {
	s := o.fresh(t)
	c, other := newCluster(1, "repairs"), newCluster(2, "other")
	repair := func(id string, cl *store.Cluster, logical string, at time.Duration, state store.RepairState) *store.Repair {
		return &store.Repair{ID: id, ClusterID: cl.ID, LogicalID: logical, Action: store.RepairReplace, State: state,
			Timeline: []store.RepairStep{{At: t0.Add(at), What: "found"}}, CreatedAt: t0.Add(at), UpdatedAt: t0.Add(at)}
	}
	write(t, s, func(tx store.Tx) error {
		for _, x := range []*store.Cluster{c, other} {
			if err := tx.InsertCluster(x); err != nil {
				return err
			}
		}
		for _, r := range []*store.Repair{repair("old", c, "g-1", 0, store.RepairDone), repair("r2", c, "g-2", 2*time.Second, store.RepairRepairing),
			repair("r1", c, "g-1", time.Second, store.RepairDraining), repair("x", other, "g-1", time.Second, store.RepairDraining)} {
			if err := tx.InsertRepair(r); err != nil {
				return err
			}
		}
		f := &store.Finding{ClusterID: c.ID, LogicalID: "g-1", InstanceID: "i-1", At: t0.Add(time.Second),
			Finding: health.Finding{Fault: "gpu.xid"}, Decision: "Replace"}
		if err := tx.InsertFinding(f); err != nil {
			return err
		}
		f.Lines, f.LastAt = 3, t0.Add(2*time.Second)
		return tx.UpdateFinding(f)
	})
	read(t, s, func(tx store.Tx) error {
		ids := func(rs []*store.Repair, err error) string {
			var out []string
			for _, r := range rs {
				out = append(out, r.ID+"/"+r.LogicalID)
			}
			return fmt.Sprint(out, err)
		}
		for _, c := range []struct{ got, want string }{
			{ids(tx.RepairsSince(c.ID, t0.Add(time.Second))), "[r1/g-1 r2/g-2] <nil>"},
			{ids(tx.RepairsOf(c.ID, "g-1", t0)), "[old/g-1 r1/g-1] <nil>"},
			{ids(tx.OpenRepairs(c.ID)), "[r1/g-1 r2/g-2] <nil>"},
		} {
			if c.got != c.want {
				return fmt.Errorf("got %s, want %s", c.got, c.want)
			}
		}
		r, err := tx.Repair("r1")
		if err != nil || len(r.Timeline) != 1 || !r.Timeline[0].At.Equal(t0.Add(time.Second)) {
			return fmt.Errorf("Repair r1: %+v, %v", r, err)
		}
		counts, err := tx.RepairCounts(c.ID)
		if err != nil {
			return err
		}
		if want := (map[store.RepairCount]int{{Action: "Replace", State: store.RepairDone}: 1,
			{Action: "Replace", State: store.RepairDraining}: 1, {Action: "Replace", State: store.RepairRepairing}: 1}); fmt.Sprint(counts) != fmt.Sprint(want) {
			return fmt.Errorf("RepairCounts: %v, want %v", counts, want)
		}
		fs, err := tx.FindingsOf(c.ID, "g-1", t0)
		if err != nil || len(fs) != 1 || fs[0].Lines != 3 || fs[0].Fault != "gpu.xid" {
			return fmt.Errorf("FindingsOf: %+v, %v", fs, err)
		}
		return nil
	})
}

// testRecords: tags, access keys, Kubernetes registrations and orchestrator records keep what
// they were given.
func testRecords(t *testing.T, o Opener) {
	s := o.fresh(t)
	c := newCluster(1, "records")
	insertCluster(t, s, c)
	kc := &store.KubeCluster{Name: "eks-1", ARN: "arn:aws:eks:us-west-2:123456789012:cluster/eks-1", Kubeconfig: []byte("apiVersion: v1\x00\xff"),
		Local: true, Server: "https://127.0.0.1:6443", CreatedAt: t0, NodeJoin: &store.KubeNodeJoin{PodCIDR: "10.244.0.0/16"}}
	key := &store.AccessKey{ID: "AKIAEXAMPLE", Secret: "s", Principal: "ops", Actions: []string{"sagemaker:*"}, CreatedAt: t0}
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutTags(c.ARN, []api.Tag{{Key: new("b"), Value: new("1")}, {Key: new("a"), Value: new("2")}}); err != nil {
			return err
		}
		if err := tx.PutTags(c.ARN, []api.Tag{{Key: new("b"), Value: new("3")}}); err != nil {
			return err
		}
		if err := tx.DeleteTags(c.ARN, []string{"a", "absent"}); err != nil {
			return err
		}
		if err := tx.PutKubeCluster(kc); err != nil {
			return err
		}
		if err := tx.InsertAccessKey(key); err != nil {
			return err
		}
		if err := tx.InsertAccessKey(key); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("a duplicate access key: %v", err)
		}
		for _, body := range []string{`{"v":1}`, `{"v":2}`} {
			if err := tx.PutOrchestratorRecord(&store.OrchestratorRecord{ClusterID: c.ID, Scope: "", Kind: "slurm", Body: []byte(body)}); err != nil {
				return err
			}
		}
		return nil
	})
	read(t, s, func(tx store.Tx) error {
		tags, err := tx.Tags(c.ARN)
		if err != nil || len(tags) != 1 || tags[0].GetKey() != "b" || tags[0].GetValue() != "3" {
			return fmt.Errorf("tags: %v, %v", tags, err)
		}
		got, err := tx.KubeCluster(kc.ARN)
		if err != nil || string(got.Kubeconfig) != string(kc.Kubeconfig) || !got.Local || got.NodeJoin == nil || got.NodeJoin.PodCIDR != "10.244.0.0/16" {
			return fmt.Errorf("KubeCluster by ARN: %+v, %v", got, err)
		}
		k, err := tx.AccessKey(key.ID)
		if err != nil || k.Secret != "s" || fmt.Sprint(k.Actions) != "[sagemaker:*]" {
			return fmt.Errorf("AccessKey: %+v, %v", k, err)
		}
		r, err := tx.OrchestratorRecord(c.ID, "")
		if err != nil || string(r.Body) != `{"v":2}` {
			return fmt.Errorf("OrchestratorRecord: %+v, %v", r, err)
		}
		return nil
	})
}
