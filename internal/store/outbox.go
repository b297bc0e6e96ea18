package store

import "time"

// OutboxEntry is one event for other systems (an EventBridge-shaped event, internal/eventbridge)
// waiting in the store's outbox to be delivered.
type OutboxEntry struct {
	// Seq is the store's number for the entry: increasing in commit order, never reused. Sinks
	// deliver entries in Seq order.
	Seq int64
	// ID is the event's id (a UUID): the same at every delivery attempt and across restarts, so
	// a receiver that deduplicates by it sees each event once.
	ID string
	// Time is when the change happened.
	Time time.Time
	// Body is the event exactly as delivered (one JSON document).
	Body []byte
}

// Publisher turns the changes a transaction makes into outbox entries. A store with a Publisher
// (sqlite.Store.SetPublisher) calls it inside the transaction that makes each change and writes
// what it returns to the outbox in that transaction, so an entry exists exactly when its change
// committed: a rolled-back transaction publishes nothing, and a crash after the commit loses
// nothing. Its methods may read through tx and must not write.
type Publisher interface {
	// ClusterChanged is told once per transaction that inserted or updated a cluster, just
	// before the commit, with the cluster as it was before the transaction (nil: inserted by
	// it) and as the transaction leaves it.
	ClusterChanged(tx Tx, before, after *Cluster) ([]OutboxEntry, error)
	// RepairChanged is told when a repair is inserted (before nil) or rewritten.
	RepairChanged(tx Tx, before, after *Repair) ([]OutboxEntry, error)
	// EventAppended is told when a cluster event (ListClusterEvents) is appended.
	EventAppended(tx Tx, e *Event) ([]OutboxEntry, error)
	// Committed is called after a transaction that wrote outbox entries committed: deliverers
	// may look now.
	Committed()
}
