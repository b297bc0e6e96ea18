// Package storetest is the store contract's conformance suite: one set of tests that every back
// end of store.Store passes (internal/store/sqlite and internal/store/postgres run it, on a real
// database each). It checks what the rest of hale relies on: transactions that commit whole or
// not at all, writers that never lose each other's updates, row versions, keyset pages in both
// orders, the event outbox, the log store, leases and their fencing, and a restart that loses
// nothing.
package storetest

import (
	"testing"

	"github.com/haleproject/hale/internal/store"
)

// Backend is a store under test: store.Store, and the outbox's publisher hook every SQL back end
// has.
type Backend interface {
	store.Store
	SetPublisher(p store.Publisher)
}

// Opener makes the databases of the suite's tests.
type Opener struct {
	// New makes an empty database and returns what Open opens it by (a path, a URL).
	New func(t *testing.T) string
	// Open opens the database named by New; the suite closes what it opens. Opening one twice
	// (a restart) must find what was committed before.
	Open func(t *testing.T, name string) (Backend, error)
}

func (o Opener) fresh(t *testing.T) Backend {
	t.Helper()
	return o.open(t, o.New(t))
}

func (o Opener) open(t *testing.T, name string) Backend {
	t.Helper()
	s, err := o.Open(t, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Run runs the whole suite against the back end o opens, each test on a database of its own.
func Run(t *testing.T, o Opener) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Opener)
	}{
		{"UniqueKeysAndCascade", testUniqueAndCascade},
		{"TransactionsAllOrNothing", testAllOrNothing},
		{"ReadIsOneSnapshot", testReadSnapshot},
		{"ConcurrentWritersLoseNothing", testConcurrentWriters},
		{"StaleUpdatesConflict", testStaleUpdates},
		{"ClusterPages", testClusterPages},
		{"NodePages", testNodePages},
		{"EventPages", testEventPages},
		{"Outbox", testOutbox},
		{"LogStore", testLogStore},
		{"Repairs", testRepairs},
		{"Records", testRecords},
		{"Leases", testLeases},
		{"FencedWrites", testFencing},
		{"Secrets", testSecrets},
		{"RestartLosesNothing", testRestart},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, o) })
	}
}
