package store

import (
	"errors"

	"github.com/haleproject/hale/api"
)

// ClusterOrNotFound is the cluster with that name or ARN, or the API's ResourceNotFound
// ("Cluster X not found.", as SageMaker words it) when there is none: what every caller that
// answers the API about a named cluster returns.
func ClusterOrNotFound(tx Tx, ref string) (*Cluster, error) {
	c, err := tx.Cluster(ref)
	if errors.Is(err, ErrNotFound) {
		return nil, api.Errorf(api.CodeResourceNotFound, "Cluster %s not found.", ref)
	}
	return c, err
}
