package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// RepairsSince returns the repairs of every node of one cluster created since a time, oldest
// first, and none of another cluster's.
func TestRepairsSince(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "hale.db"))
	ctx := context.Background()
	t0 := time.UnixMilli(time.Now().UnixMilli()).UTC()
	var clusters []*store.Cluster
	for _, id := range []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb"} {
		clusters = append(clusters, &store.Cluster{ID: id, Name: id, ARN: "arn:" + id, Status: api.ClusterStatusInService, CreatedAt: t0, UpdatedAt: t0})
	}
	repair := func(id, cluster, logical string, at time.Duration) *store.Repair {
		return &store.Repair{ID: id, ClusterID: cluster, LogicalID: logical, Action: "Replace", State: store.RepairDone,
			CreatedAt: t0.Add(at), UpdatedAt: t0.Add(at)}
	}
	must(t, s.Write(ctx, func(tx store.Tx) error {
		for _, c := range clusters {
			if err := tx.InsertCluster(c); err != nil {
				return err
			}
		}
		for _, rp := range []*store.Repair{repair("old", "aaaaaaaaaaaa", "g-1", 0), repair("r2", "aaaaaaaaaaaa", "g-2", 2*time.Second),
			repair("r1", "aaaaaaaaaaaa", "g-1", time.Second), repair("other", "bbbbbbbbbbbb", "g-1", time.Second)} {
			if err := tx.InsertRepair(rp); err != nil {
				return err
			}
		}
		return nil
	}))
	var got []string
	must(t, s.Read(ctx, func(tx store.Tx) error {
		rs, err := tx.RepairsSince("aaaaaaaaaaaa", t0.Add(time.Second))
		for _, rp := range rs {
			got = append(got, rp.ID+"/"+rp.LogicalID)
		}
		return err
	}))
	if want := "[r1/g-1 r2/g-2]"; fmt.Sprint(got) != want {
		t.Errorf("RepairsSince: %s, want %s", fmt.Sprint(got), want)
	}
}
