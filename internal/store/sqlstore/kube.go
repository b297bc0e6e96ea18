package sqlstore

import (
	"encoding/json"

	"github.com/haleproject/hale/internal/store"
)

const kubeCols = `name, arn, kubeconfig, local, server, created_at, node_join`

func scanKube(s interface{ Scan(...any) error }) (*store.KubeCluster, error) {
	k := &store.KubeCluster{}
	var created int64
	var join []byte
	if err := s.Scan(&k.Name, &k.ARN, &k.Kubeconfig, &k.Local, &k.Server, &created, &join); err != nil {
		return nil, mapErr(err)
	}
	k.CreatedAt = fromMs(created)
	if len(join) > 0 {
		k.NodeJoin = &store.KubeNodeJoin{}
		if err := json.Unmarshal(join, k.NodeJoin); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func (t *tx) PutKubeCluster(k *store.KubeCluster) error {
	var join []byte
	if k.NodeJoin != nil {
		var err error
		if join, err = json.Marshal(k.NodeJoin); err != nil {
			return err
		}
	}
	_, err := t.exec(`INSERT INTO kube_clusters (`+kubeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET arn = excluded.arn, kubeconfig = excluded.kubeconfig, local = excluded.local, server = excluded.server,
		node_join = excluded.node_join`,
		k.Name, k.ARN, k.Kubeconfig, k.Local, k.Server, ms(k.CreatedAt), join)
	return mapErr(err)
}

func (t *tx) KubeCluster(ref string) (*store.KubeCluster, error) {
	return scanKube(t.row(`SELECT `+kubeCols+` FROM kube_clusters WHERE name = ? OR arn = ?`, ref, ref))
}

func (t *tx) ListKubeClusters() ([]*store.KubeCluster, error) {
	rows, err := t.query(`SELECT ` + kubeCols + ` FROM kube_clusters ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.KubeCluster
	for rows.Next() {
		k, err := scanKube(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, mapErr(rows.Err())
}

func (t *tx) DeleteKubeCluster(name string) error {
	return mustAffect(t.exec(`DELETE FROM kube_clusters WHERE name = ?`, name))
}
