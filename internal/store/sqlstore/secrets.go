package sqlstore

import "time"

// Secrets (store.Tx.Secret) are small documents by name: the agent CA's files on a shared store.

func (t *tx) Secret(name string) ([]byte, error) {
	var v []byte
	if err := t.row(`SELECT value FROM secrets WHERE name = ?`, name).Scan(&v); err != nil {
		return nil, mapErr(err)
	}
	return v, nil
}

func (t *tx) InsertSecret(name string, value []byte) error {
	return t.insertOnce(`INSERT INTO secrets (name, value, updated_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		name, value, ms(time.Now()))
}

func (t *tx) PutSecret(name string, value []byte) error {
	_, err := t.exec(`INSERT INTO secrets (name, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		name, value, ms(time.Now()))
	return err
}
