package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// testUniqueAndCascade: unique keys answer ErrExists, and a deleted cluster takes everything of
// its own with it.
func testUniqueAndCascade(t *testing.T, o Opener) {
	s := o.fresh(t)
	c := newCluster(1, "alpha")
	write(t, s, func(tx store.Tx) error {
		if err := tx.InsertCluster(c); err != nil {
			return err
		}
		dup := *newCluster(2, "alpha")
		if err := tx.InsertCluster(&dup); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("a second cluster named alpha: %v, want ErrExists", err)
		}
		n := newNode(c, "g", 1)
		if err := tx.InsertNode(n); err != nil {
			return err
		}
		n2 := *n
		n2.LogicalID = "g-other"
		if err := tx.InsertNode(&n2); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("a second node with instance %s: %v, want ErrExists", n.InstanceID, err)
		}
		if err := tx.PutGroup(&store.Group{ClusterID: c.ID, Name: "g", CreatedAt: t0}); err != nil {
			return err
		}
		if err := tx.PutTags(c.ARN, []api.Tag{{Key: new("k"), Value: new("v")}}); err != nil {
			return err
		}
		if err := tx.PutOrchestratorRecord(&store.OrchestratorRecord{ClusterID: c.ID, Scope: n.LogicalID, Kind: "slurm", Body: []byte(`{}`)}); err != nil {
			return err
		}
		return tx.AppendEvent(newEvent(c, 1, t0))
	})
	write(t, s, func(tx store.Tx) error { return tx.DeleteCluster(c.ID) })
	read(t, s, func(tx store.Tx) error {
		if n, err := tx.CountAllNodes(); err != nil || n != 0 {
			return fmt.Errorf("nodes of a deleted cluster: %d, %v", n, err)
		}
		if tags, err := tx.Tags(c.ARN); err != nil || len(tags) != 0 {
			return fmt.Errorf("tags of a deleted cluster: %v, %v", tags, err)
		}
		if _, err := tx.Event(c.ID, "ev-0001"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("an event of a deleted cluster: %v", err)
		}
		if rs, err := tx.OrchestratorRecords(c.ID); err != nil || len(rs) != 0 {
			return fmt.Errorf("orchestrator records of a deleted cluster: %v, %v", rs, err)
		}
		if gs, err := tx.Groups(c.ID); err != nil || len(gs) != 0 {
			return fmt.Errorf("groups of a deleted cluster: %v, %v", gs, err)
		}
		return nil
	})
	// The name is free again.
	insertCluster(t, s, newCluster(3, "alpha"))
}

// testAllOrNothing: a Write whose function fails, or panics, leaves nothing behind, and the store
// goes on serving writes.
func testAllOrNothing(t *testing.T, o Opener) {
	s := o.fresh(t)
	boom := errors.New("boom")
	err := s.Write(context.Background(), func(tx store.Tx) error {
		if err := tx.InsertCluster(newCluster(1, "rolled-back")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write returned %v, want the function's error", err)
	}
	func() {
		defer func() { recover() }()
		s.Write(context.Background(), func(tx store.Tx) error {
			tx.InsertCluster(newCluster(2, "panicked"))
			panic("a bug")
		})
	}()
	insertCluster(t, s, newCluster(3, "after"))
	read(t, s, func(tx store.Tx) error {
		for _, name := range []string{"rolled-back", "panicked"} {
			if _, err := tx.Cluster(name); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("cluster %s of an aborted Write: %v", name, err)
			}
		}
		n, err := tx.CountClusters()
		if err == nil && n != 1 {
			err = fmt.Errorf("%d clusters, want 1", n)
		}
		return err
	})
}

// testReadSnapshot: a Read sees one state of the store, whatever commits while it runs.
func testReadSnapshot(t *testing.T, o Opener) {
	s := o.fresh(t)
	insertCluster(t, s, newCluster(1, "first"))
	read(t, s, func(tx store.Tx) error {
		before, err := tx.CountClusters()
		if err != nil {
			return err
		}
		insertCluster(t, s, newCluster(2, "second"))
		after, err := tx.CountClusters()
		if err != nil {
			return err
		}
		if _, err := tx.Cluster("second"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("a read saw a cluster committed after its first read: %v", err)
		}
		if before != 1 || after != 1 {
			return fmt.Errorf("counts %d then %d inside one read, want 1 and 1", before, after)
		}
		return nil
	})
}

// testConcurrentWriters: read-modify-write in Write, from many goroutines (and, for a shared
// database, many connections) at once, loses no update and never conflicts.
func testConcurrentWriters(t *testing.T, o Opener) {
	s := o.fresh(t)
	c := newCluster(1, "counter")
	insertCluster(t, s, c)
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := s.Write(context.Background(), func(tx store.Tx) error {
					got, err := tx.ClusterByID(c.ID)
					if err != nil {
						return err
					}
					got.State.UpdateGeneration++
					return tx.UpdateCluster(got)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	read(t, s, func(tx store.Tx) error {
		got, err := tx.ClusterByID(c.ID)
		if err != nil {
			return err
		}
		if got.State.UpdateGeneration != writers*each {
			return fmt.Errorf("%d increments stored, want %d", got.State.UpdateGeneration, writers*each)
		}
		if got.Version != 1+writers*each {
			return fmt.Errorf("version %d, want %d", got.Version, 1+writers*each)
		}
		return nil
	})
}

// testStaleUpdates: a record read in one transaction and written back in a later one, after
// another writer changed it, is refused with ErrConflict and changes nothing; each versioned
// record behaves so.
func testStaleUpdates(t *testing.T, o Opener) {
	s := o.fresh(t)
	c := newCluster(1, "versions")
	n := newNode(c, "g", 1)
	a := &store.Action{ClusterID: c.ID, NodeSeq: 1, LogicalID: n.LogicalID, Kind: store.ActionReboot, State: store.ActionPending, CreatedAt: t0, UpdatedAt: t0}
	r := &store.Repair{ID: "r-1", ClusterID: c.ID, LogicalID: n.LogicalID, Action: store.RepairReboot, State: store.RepairDraining, CreatedAt: t0, UpdatedAt: t0}
	write(t, s, func(tx store.Tx) error {
		for _, err := range []error{tx.InsertCluster(c), tx.InsertNode(n), tx.InsertAction(a), tx.InsertRepair(r)} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	for _, v := range []int64{c.Version, n.Version, a.Version, r.Version} {
		if v != 1 {
			t.Fatalf("an inserted record has version %d, want 1", v)
		}
	}
	// Stale copies, then the records changed by another writer.
	oldC, oldN, oldA, oldR := *c, *n, *a, *r
	write(t, s, func(tx store.Tx) error {
		c.Status, n.StatusMessage, a.State, r.State = api.ClusterStatusInService, "fresh", store.ActionInProgress, store.RepairRepairing
		for _, err := range []error{tx.UpdateCluster(c), tx.UpdateNode(n), tx.UpdateAction(a), tx.PutRepair(r)} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if c.Version != 2 || n.Version != 2 || a.Version != 2 || r.Version != 2 {
		t.Fatalf("versions after an update: %d %d %d %d, want 2", c.Version, n.Version, a.Version, r.Version)
	}
	oldC.Status, oldN.StatusMessage, oldA.State, oldR.State = api.ClusterStatusFailed, "stale", store.ActionFailed, store.RepairFailed
	for what, update := range map[string]func(store.Tx) error{
		"cluster": func(tx store.Tx) error { return tx.UpdateCluster(&oldC) },
		"node":    func(tx store.Tx) error { return tx.UpdateNode(&oldN) },
		"action":  func(tx store.Tx) error { return tx.UpdateAction(&oldA) },
		"repair":  func(tx store.Tx) error { return tx.PutRepair(&oldR) },
	} {
		if err := s.Write(context.Background(), update); !errors.Is(err, store.ErrConflict) {
			t.Errorf("a stale %s's update: %v, want ErrConflict", what, err)
		}
	}
	read(t, s, func(tx store.Tx) error {
		gc, err := tx.ClusterByID(c.ID)
		if err != nil {
			return err
		}
		gn, err := tx.NodeByLogicalID(c.ID, n.LogicalID)
		if err != nil {
			return err
		}
		acts, err := tx.OpenActions(c.ID)
		if err != nil {
			return err
		}
		gr, err := tx.Repair(r.ID)
		if err != nil {
			return err
		}
		if gc.Status != api.ClusterStatusInService || gn.StatusMessage != "fresh" || len(acts) != 1 ||
			acts[0].State != store.ActionInProgress || gr.State != store.RepairRepairing {
			return fmt.Errorf("a refused update changed records: %s %q %v %s", gc.Status, gn.StatusMessage, acts, gr.State)
		}
		return nil
	})
	// An update of a record that is gone is ErrNotFound, not a conflict.
	gone := *newCluster(9, "gone")
	gone.Version = 1
	if err := s.Write(context.Background(), func(tx store.Tx) error { return tx.UpdateCluster(&gone) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("updating a cluster that does not exist: %v, want ErrNotFound", err)
	}
}
