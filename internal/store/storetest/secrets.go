package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/haleproject/hale/internal/store"
)

// testSecrets: the first InsertSecret of a name wins and a second is ErrExists, leaving the
// first value; PutSecret replaces; bytes come back as written (binary too); a name never
// written is ErrNotFound; and a store opened again finds them.
func testSecrets(t *testing.T, o Opener) {
	name := o.New(t)
	s := o.open(t, name)
	key := []byte{0, 1, 2, 0xff, '\n', 'k'}
	write(t, s, func(tx store.Tx) error {
		if _, err := tx.Secret("agent-ca/ca.key"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("a secret never written: %v, want ErrNotFound", err)
		}
		if err := tx.InsertSecret("agent-ca/ca.key", key); err != nil {
			return err
		}
		if err := tx.InsertSecret("agent-ca/ca.key", []byte("another")); !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("a second InsertSecret: %v, want ErrExists", err)
		}
		if err := tx.PutSecret("agent-ca/revoked.json", []byte(`{"a":1}`)); err != nil {
			return err
		}
		return tx.PutSecret("agent-ca/revoked.json", []byte(`{"b":2}`))
	})
	s.Close()
	s = o.open(t, name)
	read(t, s, func(tx store.Tx) error {
		if v, err := tx.Secret("agent-ca/ca.key"); err != nil || !bytes.Equal(v, key) {
			return fmt.Errorf("ca.key: %q, %v; want %q (the first insert's)", v, err, key)
		}
		if v, err := tx.Secret("agent-ca/revoked.json"); err != nil || string(v) != `{"b":2}` {
			return fmt.Errorf("revoked.json: %q, %v; want the last put's", v, err)
		}
		return nil
	})
}
