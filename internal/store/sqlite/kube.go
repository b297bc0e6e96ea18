package sqlite

import (
	"github.com/haleproject/hale/internal/store"
)

const kubeCols = `name, arn, kubeconfig, local, server, created_at`

func scanKube(s interface{ Scan(...any) error }) (*store.KubeCluster, error) {
	k := &store.KubeCluster{}
	var created int64
	if err := s.Scan(&k.Name, &k.ARN, &k.Kubeconfig, &k.Local, &k.Server, &created); err != nil {
		return nil, mapErr(err)
	}
	k.CreatedAt = fromMs(created)
	return k, nil
}

func (t *tx) PutKubeCluster(k *store.KubeCluster) error {
	_, err := t.exec(`INSERT INTO kube_clusters (`+kubeCols+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET arn = excluded.arn, kubeconfig = excluded.kubeconfig, local = excluded.local, server = excluded.server`,
		k.Name, k.ARN, k.Kubeconfig, k.Local, k.Server, ms(k.CreatedAt))
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
