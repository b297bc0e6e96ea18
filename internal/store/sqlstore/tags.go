package sqlstore

import "github.com/haleproject/hale/api"

func (t *tx) Tags(arn string) ([]api.Tag, error) {
	rows, err := t.query(`SELECT key, value FROM tags WHERE resource_arn = ? ORDER BY key`, arn)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.Tag{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, api.Tag{Key: &k, Value: &v})
	}
	return out, mapErr(rows.Err())
}

func (t *tx) PutTags(arn string, tags []api.Tag) error {
	for _, tag := range tags {
		if _, err := t.exec(`INSERT INTO tags (resource_arn, key, value) VALUES (?, ?, ?)
			ON CONFLICT (resource_arn, key) DO UPDATE SET value = excluded.value`, arn, tag.GetKey(), tag.GetValue()); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) DeleteTags(arn string, keys []string) error {
	for _, k := range keys {
		if _, err := t.exec(`DELETE FROM tags WHERE resource_arn = ? AND key = ?`, arn, k); err != nil {
			return err
		}
	}
	return nil
}
