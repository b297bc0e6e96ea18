package console

import (
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/store"
)

// authorize applies the API's two checks for operation op (e.g. "DescribeCluster") on the
// cluster named cluster ("" for none): the key's actions (auth.Allows with
// "sagemaker:"+op), then its cluster name patterns (auth.AllowsCluster). The refusal is the
// API's AccessDeniedException, naming the cluster as the request did ("*" without one).
func authorize(k *store.AccessKey, op, cluster string) *api.Error {
	action := "sagemaker:" + op
	resource := cluster
	if resource == "" {
		resource = "*"
	}
	if !auth.Allows(k, action) {
		return auth.AccessDenied(k, action, resource)
	}
	if cluster != "" && !auth.AllowsCluster(k, cluster) {
		return auth.AccessDenied(k, action, resource)
	}
	return nil
}
