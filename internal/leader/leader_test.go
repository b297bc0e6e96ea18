package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/postgres"
	"github.com/haleproject/hale/internal/store/postgres/pgtest"
	"github.com/haleproject/hale/internal/store/sqlite"
)

var pg *pgtest.Server

func TestMain(m *testing.M) {
	var err error
	if pg, err = pgtest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// stores opens n stores on one database, as n servers do: SQLite (one file) or PostgreSQL.
func stores(t testing.TB, backend string, n int) []store.Store {
	t.Helper()
	var out []store.Store
	var url string
	if backend == "postgres" {
		var err error
		if url, err = pg.NewDatabase(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "hale.db")
	for i := 0; i < n; i++ {
		var s store.Store
		var err error
		if backend == "postgres" {
			s, err = postgres.Open(context.Background(), url)
		} else {
			s, err = sqlite.Open(path)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not after 30 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOneLeaderAtATime: of three candidates exactly one leads; when it steps down (its server
// stops) another takes over, never two at once.
func TestOneLeaderAtATime(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			ss := stores(t, backend, 3)
			var leading, most atomic.Int32
			var led sync.Map // holder -> true
			cancels := make([]context.CancelFunc, 3)
			results := make([]chan error, 3)
			for i := range ss {
				ctx, cancel := context.WithCancel(context.Background())
				cancels[i], results[i] = cancel, make(chan error, 1)
				holder := fmt.Sprintf("server-%d", i)
				go func() {
					results[i] <- Run(ctx, Config{Store: ss[i], Holder: holder, TTL: 2 * time.Second, RetryPeriod: 100 * time.Millisecond},
						func(ctx context.Context) {
							n := leading.Add(1)
							for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
							}
							led.Store(holder, true)
							<-ctx.Done()
							leading.Add(-1)
						})
				}()
			}
			count := func() int {
				n := 0
				led.Range(func(any, any) bool { n++; return true })
				return n
			}
			for want := 1; want <= 3; want++ {
				until(t, fmt.Sprintf("%d servers led one after another", want), func() bool { return count() == want && leading.Load() == 1 })
				// The leader's server stops: its lease is released at once.
				for i := range ss {
					if _, ok := led.Load(fmt.Sprintf("server-%d", i)); ok && cancels[i] != nil {
						cancels[i]()
						if err := <-results[i]; !errors.Is(err, context.Canceled) {
							t.Fatalf("a stopped server's election ended with %v", err)
						}
						cancels[i] = nil
					}
				}
			}
			if most.Load() != 1 {
				t.Fatalf("%d servers led at once", most.Load())
			}
		})
	}
}

// cuttable is a store whose writes can be cut off, as a network fault between one server and
// the database does: they fail after a while instead of reaching it.
type cuttable struct {
	store.Store
	cut atomic.Bool
}

func (c *cuttable) Write(ctx context.Context, fn func(store.Tx) error) error {
	if c.cut.Load() {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		return errors.New("cut off from the database")
	}
	return c.Store.Write(ctx, fn)
}

// TestDeposedLeaderIsFenced: a leader cut off from the database stops leading before its lease
// can expire; another takes the lease; and a write the old leader makes after that, even one
// that ignores the end of its tenure (a goroutine that was paused), is refused by the store.
func TestDeposedLeaderIsFenced(t *testing.T) {
	ss := stores(t, "postgres", 2)
	a := &cuttable{Store: ss[0]}
	cfg := func(s store.Store, holder string) Config {
		return Config{Store: s, Holder: holder, TTL: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}
	}
	var aCtx atomic.Value
	aEnded := make(chan error, 1)
	go func() {
		aEnded <- Run(context.Background(), cfg(a, "server-a"), func(ctx context.Context) {
			aCtx.Store(ctx)
			<-ctx.Done()
		})
	}()
	until(t, "server-a leads", func() bool { return aCtx.Load() != nil })
	bCtx := make(chan context.Context, 1)
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	go Run(bctx, cfg(ss[1], "server-b"), func(ctx context.Context) { bCtx <- ctx; <-ctx.Done() })

	a.cut.Store(true)
	if err := <-aEnded; !errors.Is(err, ErrLost) {
		t.Fatalf("server-a's election after the cut: %v, want ErrLost", err)
	}
	var b context.Context
	select {
	case b = <-bCtx:
	case <-time.After(30 * time.Second):
		t.Fatal("server-b did not take the lease of a leader cut off")
	}
	// server-a's late write, through a healthy connection, with its old fence.
	late := context.WithoutCancel(aCtx.Load().(context.Context))
	err := ss[0].Write(late, func(tx store.Tx) error {
		_, _, err := tx.AcquireLease("marker", "server-a", time.Minute)
		return err
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the deposed leader's write: %v, want ErrFenced", err)
	}
	if err := ss[1].Write(b, func(tx store.Tx) error { return nil }); err != nil {
		t.Fatalf("the new leader's fenced write: %v", err)
	}
}

// TestDatabaseStoppedEndsTheTenure: when the database stops answering (SIGSTOP: connections
// open, nothing answers), the leader stops leading before its lease can expire, and its
// election ends with ErrLost, whatever its store calls are waiting on.
func TestDatabaseStoppedEndsTheTenure(t *testing.T) {
	ss := stores(t, "postgres", 1)
	leading := make(chan context.Context, 1)
	ended := make(chan error, 1)
	go func() {
		ended <- Run(context.Background(), Config{Store: ss[0], Holder: "server-a", TTL: 2 * time.Second, RetryPeriod: 100 * time.Millisecond},
			func(ctx context.Context) {
				leading <- ctx
				// A leader's work: writes, each waiting on the database.
				for ctx.Err() == nil {
					ss[0].Write(ctx, func(tx store.Tx) error { _, err := tx.CountClusters(); return err })
				}
			})
	}()
	ctx := <-leading
	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	defer pg.Resume()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the tenure did not end while the database was stopped")
	}
	select {
	case err := <-ended:
		if !errors.Is(err, ErrLost) {
			t.Fatalf("the election ended with %v, want ErrLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the election did not end while the database was stopped")
	}
}

// TestRenewalsDoNotWaitForWriters: a leader whose store is busy with a long write transaction
// (its own reconcilers', or another server's) keeps its lease: renewals are made apart from
// the writers (store.Leaser). Before, a renewal queued behind the write lock, and a busy
// leader deposed itself.
func TestRenewalsDoNotWaitForWriters(t *testing.T) {
	ss := stores(t, "postgres", 1)
	leading := make(chan context.Context, 1)
	go Run(t.Context(), Config{Store: ss[0], Holder: "server-a", TTL: 2 * time.Second, RetryPeriod: 100 * time.Millisecond},
		func(ctx context.Context) {
			leading <- ctx
			<-ctx.Done()
		})
	ctx := <-leading
	// A write that holds the store's write lock for two and a half lease lengths (the leases
	// are long enough that a busy machine's slow renewals do not end a tenure by themselves).
	err := ss[0].Write(context.Background(), func(tx store.Tx) error {
		time.Sleep(5 * time.Second)
		_, err := tx.CountClusters()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the leader lost its lease while another transaction wrote: %v", context.Cause(ctx))
	}
}
