package auth

import (
	"context"

	"github.com/haleproject/hale/internal/store"
)

// ctxKey is unexported so no other package can set or read the key except through WithKey and
// KeyFrom.
type ctxKey struct{}

// WithKey returns a copy of ctx carrying k, the access key a request was verified with, so
// handlers further down can authorize against it.
func WithKey(ctx context.Context, k *store.AccessKey) context.Context {
	return context.WithValue(ctx, ctxKey{}, k)
}

// KeyFrom returns the access key WithKey stored in ctx, or nil when there is none (an
// unauthenticated context).
func KeyFrom(ctx context.Context) *store.AccessKey {
	k, _ := ctx.Value(ctxKey{}).(*store.AccessKey)
	return k
}
