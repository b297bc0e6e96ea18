package server

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/store"
)

// storeKeeper keeps the agent CA's documents in the store (its secrets, named
// "agent-ca/<file>"), so that every server on a shared store presents the same CA to the
// agents and knows every revocation, whichever server made it.
type storeKeeper struct{ st store.Store }

var _ agentca.Keeper = storeKeeper{}

func secretName(name string) string { return "agent-ca/" + name }

func (k storeKeeper) Get(name string) ([]byte, error) {
	var v []byte
	err := k.st.Read(context.Background(), func(tx store.Tx) error {
		var err error
		v, err = tx.Secret(secretName(name))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("the store has no %s: %w", secretName(name), os.ErrNotExist)
	}
	return v, err
}

func (k storeKeeper) Create(name string, data []byte) error {
	err := k.st.Write(context.Background(), func(tx store.Tx) error { return tx.InsertSecret(secretName(name), data) })
	if errors.Is(err, store.ErrExists) {
		return fmt.Errorf("the store has %s: %w", secretName(name), os.ErrExist)
	}
	return err
}

func (k storeKeeper) Update(name string, fn func([]byte) ([]byte, error)) error {
	return k.st.Write(context.Background(), func(tx store.Tx) error {
		cur, err := tx.Secret(secretName(name))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		return tx.PutSecret(secretName(name), next)
	})
}
