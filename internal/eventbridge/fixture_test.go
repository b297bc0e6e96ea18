package eventbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// fixture is a real SQLite store publishing through a Publisher with fixed ids and times.
type fixture struct {
	t   *testing.T
	st  *sqlite.Store
	pub *Publisher
	ids int
	now time.Time
}

const testARN = "arn:aws:sagemaker:eu-west-1:123456789012:cluster/abcdefghijkl"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, st: st, now: time.Date(2026, 12, 2, 7, 30, 15, 250e6, time.UTC)}
	f.pub = &Publisher{Now: func() time.Time { return f.now }, NewID: func() string {
		f.ids++
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", f.ids)
	}}
	st.SetPublisher(f.pub)
	return f
}

func (f *fixture) write(fn func(tx store.Tx) error) error {
	return f.st.Write(context.Background(), fn)
}

func (f *fixture) mustWrite(fn func(tx store.Tx) error) {
	f.t.Helper()
	if err := f.write(fn); err != nil {
		f.t.Fatal(err)
	}
}

// outbox is every entry in the outbox, in order.
func (f *fixture) outbox() []store.OutboxEntry {
	f.t.Helper()
	var out []store.OutboxEntry
	err := f.st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		out, err = tx.Outbox(0, 1000)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// decoded is an entry's JSON as maps.
func decoded(t *testing.T, e store.OutboxEntry) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Body, &m); err != nil {
		t.Fatalf("entry %s: %v: %s", e.ID, err, e.Body)
	}
	return m
}

// cluster is a Slurm cluster with one group of two Running nodes and a tag, Creating.
func (f *fixture) cluster(tx store.Tx) (*store.Cluster, error) {
	c := &store.Cluster{ID: "abcdefghijkl", Name: "train", ARN: testARN, Status: api.ClusterStatusCreating,
		CreatedAt: time.UnixMilli(1764660000123).UTC(), UpdatedAt: f.now,
		Spec: api.CreateClusterRequest{
			VpcConfig:    &api.VpcConfig{SecurityGroupIds: []string{"sg-1"}, Subnets: []string{"subnet-1"}},
			Orchestrator: &api.ClusterOrchestrator{Slurm: &api.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: new(api.ClusterSlurmConfigStrategyManaged)}},
			NodeRecovery: new(api.ClusterNodeRecoveryAutomatic),
		}}
	if err := tx.InsertCluster(c); err != nil {
		return nil, err
	}
	g := &store.Group{ClusterID: c.ID, Name: "gpu", CreatedAt: f.now, Spec: api.ClusterInstanceGroupSpecification{
		InstanceGroupName: new("gpu"), InstanceType: new(api.ClusterInstanceType("ml.g5.2xlarge")), InstanceCount: new(int32(2)),
		ExecutionRole:   new("arn:aws:iam::123456789012:role/hale"),
		LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://sagemaker-lc/base"), OnCreate: new("on_create.sh")},
		ThreadsPerCore:  new(int32(1)),
	}, State: store.GroupState{Status: api.InstanceGroupStatusInService}}
	if err := tx.PutGroup(g); err != nil {
		return nil, err
	}
	for i := range 2 {
		n := &store.Node{ClusterID: c.ID, InstanceID: fmt.Sprintf("i-0000000000000000%d", i+1), LogicalID: fmt.Sprintf("gpu-%d", i+1),
			GroupName: "gpu", InstanceType: "ml.g5.2xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: f.now}
		if err := tx.InsertNode(n); err != nil {
			return nil, err
		}
	}
	return c, tx.PutTags(c.ARN, []api.Tag{{Key: new("team"), Value: new("ml")}})
}

// setStatus moves the stored cluster to a status.
func setStatus(tx store.Tx, status api.ClusterStatus) error {
	c, err := tx.ClusterByID("abcdefghijkl")
	if err != nil {
		return err
	}
	c.Status = status
	return tx.UpdateCluster(c)
}
