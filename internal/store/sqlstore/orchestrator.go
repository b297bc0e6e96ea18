package sqlstore

import (
	"encoding/json"
	"fmt"

	"github.com/haleproject/hale/internal/store"
)

func (t *tx) OrchestratorRecords(clusterID string) (map[string]*store.OrchestratorRecord, error) {
	rows, err := t.query(`SELECT scope, kind, body FROM orchestrator_records WHERE cluster_id = ?`, clusterID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]*store.OrchestratorRecord{}
	for rows.Next() {
		r := &store.OrchestratorRecord{ClusterID: clusterID}
		if err := rows.Scan(&r.Scope, &r.Kind, &r.Body); err != nil {
			return nil, mapErr(err)
		}
		out[r.Scope] = r
	}
	return out, mapErr(rows.Err())
}

func (t *tx) OrchestratorRecord(clusterID, scope string) (*store.OrchestratorRecord, error) {
	r := &store.OrchestratorRecord{ClusterID: clusterID, Scope: scope}
	if err := t.row(`SELECT kind, body FROM orchestrator_records WHERE cluster_id = ? AND scope = ?`,
		clusterID, scope).Scan(&r.Kind, &r.Body); err != nil {
		return nil, mapErr(err)
	}
	return r, nil
}

func (t *tx) PutOrchestratorRecord(r *store.OrchestratorRecord) error {
	// The store never reads the body, but migrations may (with SQLite's JSON functions, as
	// 0005 wrote it): keep the column JSON.
	if !json.Valid(r.Body) {
		return fmt.Errorf("store: orchestrator record %s/%q: body is not JSON", r.ClusterID, r.Scope)
	}
	_, err := t.exec(`INSERT INTO orchestrator_records (cluster_id, scope, kind, body) VALUES (?, ?, ?, ?)
		ON CONFLICT (cluster_id, scope) DO UPDATE SET kind = excluded.kind, body = excluded.body`,
		r.ClusterID, r.Scope, r.Kind, string(r.Body))
	return err
}
