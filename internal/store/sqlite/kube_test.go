package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// Registered Kubernetes clusters: found by name or ARN, replaced by name (what real kubelets
// need to join it too), listed, removed.
func TestKubeClusters(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "hale.db"))
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	k := &store.KubeCluster{Name: "k", ARN: "arn:aws:eks:us-west-2:123456789012:cluster/k", Kubeconfig: []byte("apiVersion: v1\n"),
		Server: "https://127.0.0.1:6443", Local: true, CreatedAt: now}
	must(t, s.Write(ctx, func(tx store.Tx) error { return tx.PutKubeCluster(k) }))
	must(t, s.Read(ctx, func(tx store.Tx) error {
		for _, ref := range []string{"k", k.ARN} {
			got, err := tx.KubeCluster(ref)
			if err != nil || got.ARN != k.ARN || string(got.Kubeconfig) != "apiVersion: v1\n" || !got.Local || !got.CreatedAt.Equal(now) || got.NodeJoin != nil {
				t.Errorf("KubeCluster(%s) = %+v, %v", ref, got, err)
			}
		}
		if _, err := tx.KubeCluster("other"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an unknown name: %v", err)
		}
		return nil
	}))
	k.Server, k.Local = "https://10.0.0.1:443", false
	k.NodeJoin = &store.KubeNodeJoin{ProxyToken: "t", ClusterDNS: "10.96.0.10", PodCIDR: "10.244.0.0/16"}
	must(t, s.Write(ctx, func(tx store.Tx) error { return tx.PutKubeCluster(k) }))
	must(t, s.Write(ctx, func(tx store.Tx) error {
		ks, err := tx.ListKubeClusters()
		if err != nil || len(ks) != 1 || ks[0].Server != "https://10.0.0.1:443" || ks[0].Local || ks[0].NodeJoin == nil || *ks[0].NodeJoin != *k.NodeJoin {
			t.Errorf("after a second registration: %+v %v", ks, err)
		}
		if err := tx.DeleteKubeCluster("k"); err != nil {
			return err
		}
		if err := tx.DeleteKubeCluster("k"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a second delete: %v", err)
		}
		return nil
	}))
}
