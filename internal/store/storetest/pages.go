package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// pageAll walks a list page by page (size 3) and returns the keys it saw.
func pageAll[T any](t *testing.T, s store.Store, list func(tx store.Tx, after *T) ([]string, *T, error)) []string {
	t.Helper()
	var out []string
	var after *T
	for i := 0; i < 100; i++ {
		var keys []string
		var next *T
		read(t, s, func(tx store.Tx) error {
			var err error
			keys, next, err = list(tx, after)
			return err
		})
		out = append(out, keys...)
		if len(keys) < 3 {
			return out
		}
		after = next
	}
	t.Fatal("the list never ended")
	return nil
}

// testClusterPages: keyset pages of clusters by creation time and by name, both directions, and
// the filters.
func testClusterPages(t *testing.T, o Opener) {
	s := o.fresh(t)
	names := []string{"delta", "Alpha", "echo", "bravo", "charlie", "fox_trot", "golf%"}
	write(t, s, func(tx store.Tx) error {
		for i, name := range names {
			c := newCluster(i+1, name)
			// Two clusters created in the same millisecond: seq orders them.
			if i == 4 {
				c.CreatedAt = t0.Add(4 * time.Second)
			}
			if err := tx.InsertCluster(c); err != nil {
				return err
			}
		}
		return nil
	})
	list := func(q store.ClusterQuery) []string {
		q.Limit = 3
		return pageAll(t, s, func(tx store.Tx, after *store.ClusterCursor) ([]string, *store.ClusterCursor, error) {
			q.After = after
			cs, err := tx.ListClusters(q)
			var keys []string
			var last *store.ClusterCursor
			for _, c := range cs {
				keys = append(keys, c.Name)
				last = &store.ClusterCursor{Name: c.Name, CreatedAt: c.CreatedAt, Seq: c.Seq}
			}
			return keys, last, err
		})
	}
	after := t0.Add(2 * time.Second)
	for _, c := range []struct {
		q    store.ClusterQuery
		want []string
	}{
		{store.ClusterQuery{}, names},
		{store.ClusterQuery{Order: store.Descending}, []string{"golf%", "fox_trot", "charlie", "bravo", "echo", "Alpha", "delta"}},
		{store.ClusterQuery{ByName: true}, []string{"Alpha", "bravo", "charlie", "delta", "echo", "fox_trot", "golf%"}},
		{store.ClusterQuery{ByName: true, Order: store.Descending}, []string{"golf%", "fox_trot", "echo", "delta", "charlie", "bravo", "Alpha"}},
		{store.ClusterQuery{CreatedAfter: &after}, []string{"echo", "bravo", "charlie", "fox_trot", "golf%"}},
		{store.ClusterQuery{CreatedBefore: &after}, []string{"delta"}},
		// Name filters ignore case and match LIKE's wildcards literally.
		{store.ClusterQuery{NameContains: "ALPH"}, []string{"Alpha"}},
		{store.ClusterQuery{NameContains: "_"}, []string{"fox_trot"}},
		{store.ClusterQuery{NameContains: "%"}, []string{"golf%"}},
	} {
		if got := list(c.q); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ListClusters %+v: %v, want %v", c.q, got, c.want)
		}
	}
}

// testNodePages: a cluster's nodes by launch time and by group and instance id, both directions,
// without another cluster's, and logical-only nodes only when asked.
func testNodePages(t *testing.T, o Opener) {
	s := o.fresh(t)
	c, other := newCluster(1, "nodes"), newCluster(2, "other")
	var byTime, byName []string
	write(t, s, func(tx store.Tx) error {
		for _, x := range []*store.Cluster{c, other} {
			if err := tx.InsertCluster(x); err != nil {
				return err
			}
		}
		for i := 1; i <= 8; i++ {
			group := "gpu"
			if i%2 == 0 {
				group = "Cpu"
			}
			if err := tx.InsertNode(newNode(c, group, i)); err != nil {
				return err
			}
		}
		if err := tx.InsertNode(newNode(other, "gpu", 99)); err != nil {
			return err
		}
		logical := newNode(c, "gpu", 100)
		logical.InstanceID = ""
		return tx.InsertNode(logical)
	})
	// launch times are i%7 seconds: 1..6, then 0 for i=7, 1 for i=8 (seq breaks the tie with 1).
	byTime = []string{"gpu-7", "gpu-1", "Cpu-8", "Cpu-2", "gpu-3", "Cpu-4", "gpu-5", "Cpu-6"}
	byName = []string{"Cpu-2", "Cpu-4", "Cpu-6", "Cpu-8", "gpu-1", "gpu-3", "gpu-5", "gpu-7"}
	list := func(q store.NodeQuery) []string {
		q.ClusterID, q.Limit = c.ID, 3
		return pageAll(t, s, func(tx store.Tx, after *store.NodeCursor) ([]string, *store.NodeCursor, error) {
			q.After = after
			ns, err := tx.ListNodes(q)
			var keys []string
			var last *store.NodeCursor
			for _, n := range ns {
				keys = append(keys, n.LogicalID)
				last = &store.NodeCursor{GroupName: n.GroupName, InstanceID: n.InstanceID, LaunchTime: n.LaunchTime, Seq: n.Seq}
			}
			return keys, last, err
		})
	}
	rev := func(in []string) []string {
		out := make([]string, len(in))
		for i, v := range in {
			out[len(in)-1-i] = v
		}
		return out
	}
	for _, c := range []struct {
		q    store.NodeQuery
		want []string
	}{
		{store.NodeQuery{}, byTime},
		{store.NodeQuery{Order: store.Descending}, rev(byTime)},
		{store.NodeQuery{ByName: true}, byName},
		{store.NodeQuery{ByName: true, Order: store.Descending}, rev(byName)},
		{store.NodeQuery{GroupNameContains: "cpu", ByName: true}, byName[:4]},
		// A node without an instance id sorts first in its group.
		{store.NodeQuery{IncludeLogicalOnly: true, ByName: true}, append(append(append([]string{}, byName[:4]...), "gpu-100"), byName[4:]...)},
	} {
		if got := list(c.q); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ListNodes %+v: %v, want %v", c.q, got, c.want)
		}
	}
	read(t, s, func(tx store.Tx) error {
		counts, err := tx.NodeCounts(c.ID)
		if err != nil {
			return err
		}
		if fmt.Sprint(counts) != "map[Cpu:map[Running:4] gpu:map[Running:5]]" {
			return fmt.Errorf("NodeCounts: %v", counts)
		}
		n, err := tx.NodeByAnyInstanceID(newNode(other, "gpu", 99).InstanceID)
		if err != nil || n.ClusterID != other.ID {
			return fmt.Errorf("NodeByAnyInstanceID: %v, %v", n, err)
		}
		return nil
	})
}

// testEventPages: a cluster's events by time (ties by insertion), both directions, filtered.
func testEventPages(t *testing.T, o Opener) {
	s := o.fresh(t)
	c := newCluster(1, "events")
	write(t, s, func(tx store.Tx) error {
		if err := tx.InsertCluster(c); err != nil {
			return err
		}
		for i := 1; i <= 7; i++ {
			e := newEvent(c, i, t0.Add(time.Duration(i/2)*time.Second)) // pairs share a time
			if i >= 6 {
				e.GroupName = "gpu"
			}
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
	list := func(q store.EventQuery) []string {
		q.ClusterID, q.Limit = c.ID, 3
		return pageAll(t, s, func(tx store.Tx, after *store.EventCursor) ([]string, *store.EventCursor, error) {
			q.After = after
			es, err := tx.ListEvents(q)
			var keys []string
			var last *store.EventCursor
			for _, e := range es {
				keys = append(keys, e.ID[3:])
				last = &store.EventCursor{Time: e.Time, Seq: e.Seq}
			}
			return keys, last, err
		})
	}
	before := t0.Add(2 * time.Second)
	for _, c := range []struct {
		q    store.EventQuery
		want string
	}{
		{store.EventQuery{}, "[0001 0002 0003 0004 0005 0006 0007]"},
		{store.EventQuery{Order: store.Descending}, "[0007 0006 0005 0004 0003 0002 0001]"},
		{store.EventQuery{GroupName: "gpu"}, "[0006 0007]"},
		{store.EventQuery{TimeBefore: &before}, "[0001 0002 0003]"},
	} {
		if got := fmt.Sprint(list(c.q)); got != c.want {
			t.Errorf("ListEvents %+v: %v, want %v", c.q, got, c.want)
		}
	}
}
