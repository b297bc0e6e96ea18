package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// t0 is the suite's epoch: whole milliseconds, as the stores keep times.
var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func newCluster(i int, name string) *store.Cluster {
	id := fmt.Sprintf("c%011d", i)
	at := t0.Add(time.Duration(i) * time.Second)
	return &store.Cluster{ID: id, Name: name, ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + id,
		Status: api.ClusterStatusCreating, CreatedAt: at, UpdatedAt: at}
}

func newNode(c *store.Cluster, group string, i int) *store.Node {
	return &store.Node{ClusterID: c.ID, InstanceID: fmt.Sprintf("i-%017d", i), LogicalID: fmt.Sprintf("%s-%d", group, i),
		GroupName: group, InstanceType: "ml.c5.xlarge", Status: api.ClusterInstanceStatusRunning,
		LaunchTime: t0.Add(time.Duration(i%7) * time.Second)}
}

func newEvent(c *store.Cluster, i int, at time.Time) *store.Event {
	return &store.Event{ID: fmt.Sprintf("ev-%04d", i), ClusterID: c.ID, ClusterName: c.Name, ClusterARN: c.ARN,
		ResourceType: api.ClusterEventResourceTypeCluster, Level: api.ClusterEventLevelInfo, Time: at,
		Description: fmt.Sprintf("event %d", i)}
}

func write(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Write(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Read(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func insertCluster(t *testing.T, s store.Store, c *store.Cluster) {
	t.Helper()
	write(t, s, func(tx store.Tx) error { return tx.InsertCluster(c) })
}
