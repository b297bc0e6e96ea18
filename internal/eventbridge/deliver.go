package eventbridge

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// Deliverer defaults.
const (
	// DefaultPoll is how often a sink looks at the outbox when no commit woke it.
	DefaultPoll = time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a failed delivery is tried
	// again: it doubles from the minimum at each failure up to the maximum, half of it random
	// (jitter, so many servers do not retry a receiver in step).
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
	// DefaultBatch is how many outbox entries a sink reads at a time.
	DefaultBatch = 100
)

// Config configures a Deliverer.
type Config struct {
	Store     store.Store
	Publisher *Publisher // its commits wake the sinks
	Sinks     []Sink
	// Poll, MinBackoff, MaxBackoff and Batch: zero takes the defaults above.
	Poll       time.Duration
	MinBackoff time.Duration
	MaxBackoff time.Duration
	Batch      int
	Logger     *slog.Logger
}

// Deliverer hands the store's outbox to each sink, in order, independently: a dead receiver
// holds back its own sink only, never the other sinks, the controller or the API (deliveries
// run outside every transaction; a sink's only writes are its cursor and the outbox's pruning).
type Deliverer struct {
	cfg   Config
	log   *slog.Logger
	wakes []chan struct{}
}

// New returns a Deliverer; Start it.
func New(cfg Config) *Deliverer {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Deliverer{cfg: cfg, log: cfg.Logger}
	for range cfg.Sinks {
		d.wakes = append(d.wakes, make(chan struct{}, 1))
	}
	if cfg.Publisher != nil {
		cfg.Publisher.onCommit(d.wake)
	}
	return d
}

func (d *Deliverer) wake() {
	for _, w := range d.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Prepare gives each sink its cursor before anything is published: a sink the store has never
// seen starts at the outbox's head (it gets the events from now on), and a sink that holds
// events its cursor does not count (Resumer: the server stopped between the two) has its cursor
// moved past them, so nothing is delivered to it twice. Call it before the store's first write.
func (d *Deliverer) Prepare(ctx context.Context) error {
	for _, s := range d.cfg.Sinks {
		last := ""
		if r, ok := s.(Resumer); ok {
			var err error
			if last, err = r.LastDelivered(); err != nil {
				// Not ours to refuse a start over: the sink may get its last event again.
				d.log.Warn("events: cannot tell what the sink holds; it may get its last event again", "sink", s.Name(), "error", err)
			}
		}
		err := d.cfg.Store.Write(ctx, func(tx store.Tx) error {
			cur, ok, err := tx.OutboxCursor(s.Name())
			if err != nil {
				return err
			}
			if !ok {
				if cur, err = tx.OutboxHead(); err != nil {
					return err
				}
			}
			if last != "" {
				e, err := tx.OutboxEntry(last)
				switch {
				case errors.Is(err, store.ErrNotFound): // pruned: at or before the cursor
				case err != nil:
					return err
				case e.Seq > cur:
					d.log.Info("events: the sink holds events its cursor did not count; moving it past them", "sink", s.Name(), "from", cur, "to", e.Seq)
					cur = e.Seq
				}
			}
			return tx.PutOutboxCursor(s.Name(), cur)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Run delivers until ctx ends, one goroutine per sink.
func (d *Deliverer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, s := range d.cfg.Sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.runSink(ctx, s, d.wakes[i])
		}()
	}
	wg.Wait()
}

func (d *Deliverer) runSink(ctx context.Context, s Sink, wake <-chan struct{}) {
	name := s.Name()
	for ctx.Err() == nil {
		var cur int64
		var batch []store.OutboxEntry
		err := d.cfg.Store.Read(ctx, func(tx store.Tx) error {
			var err error
			if cur, _, err = tx.OutboxCursor(name); err != nil {
				return err
			}
			batch, err = tx.Outbox(cur, d.cfg.Batch)
			return err
		})
		if err != nil && ctx.Err() == nil {
			d.log.Error("events: read the outbox", "sink", name, "error", err)
		}
		recorded := time.Now()
		for i, e := range batch {
			if !d.deliver(ctx, s, e) {
				return
			}
			// The cursor moves only after a delivery, and at most every CursorEvery within a
			// batch (a write per event would compete with the reconcilers' writes): a crash
			// in between delivers those events again after the restart, under the same ids
			// (the receiver's idempotency key); a Resumer finds them in itself instead.
			if i == len(batch)-1 || time.Since(recorded) >= CursorEvery {
				if !d.record(ctx, name, e.Seq) {
					return
				}
				recorded = time.Now()
			}
		}
		if len(batch) == d.cfg.Batch {
			continue
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-time.After(d.cfg.Poll):
		}
	}
}

// CursorEvery is how often, at most, a sink delivering a batch records how far it got.
const CursorEvery = 200 * time.Millisecond

// deliver hands e to s until it is taken; false when ctx ended first.
func (d *Deliverer) deliver(ctx context.Context, s Sink, e store.OutboxEntry) bool {
	for attempt := 0; ; attempt++ {
		err := s.Deliver(ctx, e)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := d.backoff(attempt)
		d.log.Warn("events: delivery failed; will retry", "sink", s.Name(), "id", e.ID, "attempt", attempt+1, "retry_in", wait.Round(time.Millisecond), "error", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// record moves a sink's cursor to seq and, in the same transaction, prunes what every
// configured sink has delivered, which keeps the outbox as small as the slowest sink's backlog.
// (A sink no longer configured does not hold it back; if it comes back it resumes from its
// cursor, missing what was pruned meanwhile.) False when ctx ended first.
func (d *Deliverer) record(ctx context.Context, sink string, seq int64) bool {
	for attempt := 0; ; attempt++ {
		err := d.cfg.Store.Write(ctx, func(tx store.Tx) error {
			if err := tx.PutOutboxCursor(sink, seq); err != nil {
				return err
			}
			low := seq
			for _, s := range d.cfg.Sinks {
				cur, _, err := tx.OutboxCursor(s.Name())
				if err != nil {
					return err
				}
				low = min(low, cur)
			}
			_, err := tx.PruneOutbox(low)
			return err
		})
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d.log.Error("events: record a delivery", "sink", sink, "seq", seq, "error", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d.backoff(attempt)):
		}
	}
}

// backoff is the wait after the attempt-th failure (from 0): MinBackoff doubled per failure,
// capped at MaxBackoff, its upper half random.
func (d *Deliverer) backoff(attempt int) time.Duration {
	w := d.cfg.MaxBackoff
	if attempt < 32 {
		w = min(d.cfg.MaxBackoff, d.cfg.MinBackoff<<attempt)
	}
	return w/2 + rand.N(w/2+1)
}
