package store

import (
	"context"
	"errors"
	"time"
)

// ErrFenced: a write carried the fencing token of a lease that has since passed to another
// holder (a deposed leader's late write). The store refused it; nothing was written.
var ErrFenced = errors.New("store: fenced: the lease has passed to another holder")

// ErrConflict: an update carried a record version other than the stored one: the record changed
// since it was read (another writer, or an earlier transaction), and writing the whole record
// back would silently undo that change. Nothing was written; read the record again.
var ErrConflict = errors.New("store: conflict: the record changed since it was read")

// Lease is a named lease held in the store: which holder has it, until when, and its fencing
// token. Times are the store's clock (the database's, not a server's), so servers with skewed
// clocks agree on when a lease expired.
type Lease struct {
	Name   string
	Holder string // "" when nobody ever held it
	// Token goes up by one at each new tenure (another holder, or the same one after the lease
	// expired), never down: a write fenced with an older token (WithFence) is refused.
	Token     int64
	Expires   time.Time
	RenewedAt time.Time
}

// Leaser takes, renews and releases leases outside the store's write lock, in transactions of
// their own that wait only for each other: a leader's renewal must not queue behind its own
// long writes (or another's), or a busy leader would lose its lease to the wait. The store's
// fence check in Write still orders every fenced write against the lease's changes.
type Leaser interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (l *Lease, held bool, err error)
	ReleaseLease(ctx context.Context, name, holder string) error
}

// Fence is what a write is fenced with: the lease it is made under and the token the writer
// holds it with.
type Fence struct {
	Lease string
	Token int64
}

type fenceKey struct{}

// WithFence returns a context whose write transactions (Store.Write) are refused with
// ErrFenced unless the lease's token is still f.Token: the store itself, under its write lock,
// makes the check, so a leader that was paused past its lease cannot write once another has
// taken it, whatever it believes.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the fence of a context (WithFence); ok is false when it has none.
func FenceOf(ctx context.Context) (f Fence, ok bool) {
	f, ok = ctx.Value(fenceKey{}).(Fence)
	return f, ok
}
