package sqlstore

import "github.com/haleproject/hale/internal/store"

func scanKey(s scanner) (*store.AccessKey, error) {
	var k store.AccessKey
	var actions, clusters string
	var created int64
	if err := s.Scan(&k.ID, &k.Secret, &k.Principal, &actions, &clusters, &created); err != nil {
		return nil, mapErr(err)
	}
	k.CreatedAt = fromMs(created)
	if err := decode(actions, &k.Actions); err != nil {
		return nil, err
	}
	if err := decode(clusters, &k.Clusters); err != nil {
		return nil, err
	}
	return &k, nil
}

func (t *tx) InsertAccessKey(k *store.AccessKey) error {
	actions, err := encode(k.Actions)
	if err != nil {
		return err
	}
	clusters, err := encode(k.Clusters)
	if err != nil {
		return err
	}
	err = t.insertOnce(`INSERT INTO access_keys (id, secret, principal, actions, clusters, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		k.ID, k.Secret, k.Principal, actions, clusters, ms(k.CreatedAt))
	return err
}

func (t *tx) AccessKey(id string) (*store.AccessKey, error) {
	return scanKey(t.row(`SELECT id, secret, principal, actions, clusters, created_at FROM access_keys WHERE id = ?`, id))
}

func (t *tx) ListAccessKeys() ([]*store.AccessKey, error) {
	rows, err := t.query(`SELECT id, secret, principal, actions, clusters, created_at FROM access_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.AccessKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) DeleteAccessKey(id string) error {
	return mustAffect(t.exec(`DELETE FROM access_keys WHERE id = ?`, id))
}
