// Package leader elects the one hale server that runs the reconcilers among the servers that
// share a store, on a lease held in the store (store.Lease) — Kubernetes' leader election, with
// the difference that the lease's fencing token travels with every write the leader makes
// (store.WithFence) and the store itself refuses the writes of a leader that was deposed: a
// server paused past its lease, or cut off from the database, cannot undo its successor's work
// when it wakes up, whatever it believes.
//
// The lease's expiry is judged by the store's clock; a leader judges its own tenure by its
// monotonic clock from the start of its last successful renewal, and stops (cancels the context
// it leads with) before the lease can have expired.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// Defaults. A dead leader's lease passes to another server at most DefaultTTL after its last
// renewal, plus one RetryPeriod for a candidate to see it: within the 5 s goal of failover
// (docs/reliability.md). A leader ends its tenure when no renewal succeeded for 3/4 of the
// TTL (3 s): renewals 0.5 s apart may each be slow on a busy machine without costing it.
const (
	DefaultLease       = "reconcilers"
	DefaultTTL         = 4 * time.Second
	DefaultRetryPeriod = 500 * time.Millisecond
)

// ErrLost: this server led and its lease is gone (taken by another, or not renewed in time).
var ErrLost = errors.New("leader: lost the lease")

// Config is an election.
type Config struct {
	Store  store.Store
	Lease  string // the lease's name; DefaultLease when empty
	Holder string // this server's identity among the candidates: stable across its restarts
	// TTL is how long a lease lasts without renewal; RetryPeriod how often a candidate tries
	// and a leader renews (at most TTL/3).
	TTL, RetryPeriod time.Duration
	Logger           *slog.Logger
}

func (c *Config) defaults() {
	if c.Lease == "" {
		c.Lease = DefaultLease
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.RetryPeriod <= 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	c.RetryPeriod = min(c.RetryPeriod, c.TTL/3)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Run campaigns for the lease until ctx ends. Once this holder has it, Run calls lead with a
// context that carries the lease's fence and is cancelled when the tenure ends, and keeps
// renewing. It returns ctx's error when ctx ends (releasing a lease it holds, so a successor
// need not wait for it to expire), or ErrLost once lead has returned after the lease was lost:
// a deposed leader's components are not started again in this Run (their state was the
// tenure's); hale's server starts its process over, much as Kubernetes' components exit.
func Run(ctx context.Context, c Config, lead func(ctx context.Context)) error {
	c.defaults()
	var l *store.Lease
	var following string // the leader this server last said it stands by for
	for failed := 0; ; {
		start := time.Now()
		held, err := try(ctx, c, &l)
		if held {
			c.Logger.Info("leading", "lease", c.Lease, "holder", c.Holder, "token", l.Token)
			return tenure(ctx, c, l.Token, start, lead)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			// Said at the first failure and every 30 s after, not at every try.
			if failed%int(max(1, 30*time.Second/c.RetryPeriod)) == 0 {
				c.Logger.Warn("lease: the store did not answer; trying again", "lease", c.Lease, "error", err, "failures", failed+1)
			}
			failed++
		case l != nil:
			failed = 0
			if l.Holder != following {
				// Once per leader: an operator reading a standby's log learns it stands by, and for whom.
				c.Logger.Info("standing by", "lease", c.Lease, "leader", l.Holder, "token", l.Token)
				following = l.Holder
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.RetryPeriod):
		}
	}
}

// try asks for (or renews) the lease once: apart from the store's writers where it can
// (store.Leaser), so that a renewal never waits behind the leader's own long writes.
func try(ctx context.Context, c Config, l **store.Lease) (held bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, c.TTL/2)
	defer cancel()
	if ls, ok := c.Store.(store.Leaser); ok {
		*l, held, err = ls.AcquireLease(tctx, c.Lease, c.Holder, c.TTL)
		return held && err == nil, err
	}
	err = c.Store.Write(tctx, func(tx store.Tx) error {
		var err error
		*l, held, err = tx.AcquireLease(c.Lease, c.Holder, c.TTL)
		return err
	})
	return held && err == nil, err
}

// tenure runs lead while the lease is renewed.
func tenure(ctx context.Context, c Config, token int64, renewed time.Time, lead func(context.Context)) error {
	lctx, stop := context.WithCancelCause(store.WithFence(ctx, store.Fence{Lease: c.Lease, Token: token}))
	defer stop(nil)
	// The tenure ends, by this process's clock, a quarter TTL before the lease can expire by the
	// store's (the store set the expiry after the renewal started), however long a renewal
	// hangs: a watchdog, put back at each renewal, cancels lead's context.
	limit := c.TTL - c.TTL/4
	watchdog := time.AfterFunc(limit-time.Since(renewed), func() {
		stop(fmt.Errorf("%w: not renewed for %s", ErrLost, limit))
	})
	defer watchdog.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	for {
		select {
		case <-ctx.Done():
			stop(ctx.Err())
			<-done
			release(c)
			return ctx.Err()
		case <-done:
			why := context.Cause(lctx)
			if why == nil || ctx.Err() != nil {
				why = fmt.Errorf("%w: the reconcilers stopped", ErrLost)
			}
			release(c)
			c.Logger.Error("no longer leading", "lease", c.Lease, "holder", c.Holder, "error", why)
			return why
		case <-time.After(c.RetryPeriod):
		}
		start := time.Now()
		var l *store.Lease
		held, err := try(ctx, c, &l) // not fenced: a renewal is how the token is checked
		switch {
		case held && l.Token == token:
			watchdog.Reset(limit - time.Since(start))
		case err == nil:
			stop(fmt.Errorf("%w: %s holds it now (token %d)", ErrLost, l.Holder, l.Token))
		case lctx.Err() == nil:
			c.Logger.Warn("lease: renewal failed; trying again", "lease", c.Lease, "error", err)
		}
	}
}

// release gives the lease up at once (best effort: it expires anyway).
func release(c Config) {
	ctx, cancel := context.WithTimeout(context.Background(), c.TTL/2)
	defer cancel()
	if ls, ok := c.Store.(store.Leaser); ok {
		ls.ReleaseLease(ctx, c.Lease, c.Holder)
		return
	}
	c.Store.Write(ctx, func(tx store.Tx) error { return tx.ReleaseLease(c.Lease, c.Holder) })
}
