// Package controller holds hale's reconcilers: level-triggered loops that drive each cluster's
// actual state towards the desired state the API recorded. Work is keyed by cluster id in one
// queue; every cluster is reconciled once at start, so a restarted server resumes where it
// stopped.
//
// Until a provider is configured there are no machines to drive: a Creating cluster waits (the
// API has said why), and a Deleting cluster is removed at once, since none of its nodes has a
// machine behind it.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Controller runs the reconcilers over a store.
type Controller struct {
	st    store.Store
	log   *slog.Logger
	queue *queue
	// RetryDelay is how long a cluster whose reconcile failed waits before the next try.
	RetryDelay time.Duration
}

// New returns a Controller; call Run to start it.
func New(st store.Store, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	return &Controller{st: st, log: log, queue: newQueue(), RetryDelay: 2 * time.Second}
}

// Enqueue asks for the cluster to be reconciled. It never blocks.
func (c *Controller) Enqueue(clusterID string) { c.queue.Add(clusterID) }

// Run reconciles every cluster once, then whatever is enqueued, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		c.queue.Close()
	}()
	if err := c.resync(ctx); err != nil {
		return err
	}
	for {
		id, ok := c.queue.Get()
		if !ok {
			return nil
		}
		if err := c.reconcile(ctx, id); err != nil && ctx.Err() == nil {
			c.log.Error("reconcile failed; will retry", "cluster_id", id, "error", err)
			time.AfterFunc(c.RetryDelay, func() { c.queue.Add(id) })
		}
		c.queue.Done(id)
	}
}

// resync enqueues every cluster.
func (c *Controller) resync(ctx context.Context) error {
	var ids []string
	err := c.st.Read(ctx, func(tx store.Tx) error {
		q := store.ClusterQuery{Limit: 1000}
		for {
			page, err := tx.ListClusters(q)
			if err != nil {
				return err
			}
			for _, cl := range page {
				ids = append(ids, cl.ID)
			}
			if len(page) < q.Limit {
				return nil
			}
			last := page[len(page)-1]
			q.After = &store.ClusterCursor{CreatedAt: last.CreatedAt, Seq: last.Seq}
		}
	})
	for _, id := range ids {
		c.queue.Add(id)
	}
	return err
}

// reconcile moves one cluster a step towards its desired state.
func (c *Controller) reconcile(ctx context.Context, id string) error {
	return c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(id)
		if errors.Is(err, store.ErrNotFound) {
			return nil // already gone
		}
		if err != nil {
			return err
		}
		if cl.Status == api.ClusterStatusDeleting {
			// No provider: no node has a machine to terminate, so removing the records is the
			// whole deletion.
			if err := tx.DeleteCluster(cl.ID); err != nil {
				return err
			}
			c.log.Info("cluster deleted", "cluster", cl.Name, "cluster_arn", cl.ARN)
		}
		return nil
	})
}
