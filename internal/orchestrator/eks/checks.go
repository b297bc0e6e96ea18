package eks

import (
	"context"
	"errors"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// The Eks orchestrator's part of the API's checks (orchestrator.Orchestrator's Check* and
// NodeRefusal).

// CheckCreate implements orchestrator.Orchestrator: Orchestrator.Eks.ClusterArn must name a
// Kubernetes cluster registered with hale (hale attaches a cluster to a control plane it can
// reach, as HyperPod attaches one to an existing EKS cluster), and, when the nodes' kubelets are
// real, a registration that made what they need to join it (store.KubeNodeJoin: a ServiceAccount
// for their kube-proxy, the pods' network), which one from before hale joined real kubelets to
// registered clusters lacks.
func (o *EKS) CheckCreate(tx store.Tx, in *api.CreateClusterRequest) error {
	arn := in.Orchestrator.Eks.GetClusterArn()
	k, err := tx.KubeCluster(arn)
	if errors.Is(err, store.ErrNotFound) {
		return api.Errorf(api.CodeValidationException, "1 validation error detected: Value '%s' at 'orchestrator.eks.clusterArn' failed to satisfy constraint: "+
			"the ARN of a Kubernetes cluster registered with this hale server (hale kube register --name NAME --kubeconfig FILE, or hale server --kubernetes local)", arn)
	} else if err != nil {
		return err
	}
	if o.cfg.NodeStack != nil && !k.Local && k.NodeJoin == nil {
		return api.Errorf(api.CodeValidationException, "1 validation error detected: Value '%s' at 'orchestrator.eks.clusterArn' failed to satisfy constraint: "+
			"a Kubernetes cluster registered for real kubelets: %s was registered before hale joined real kubelets to registered clusters "+
			"(register it again: hale kube register --name %s --kubeconfig FILE)", arn, k.Name, k.Name)
	}
	return nil
}

// CheckImages implements orchestrator.Orchestrator: an Eks cluster's groups may run different
// images (their kubelets need not match one another within Kubernetes' version skew).
func (o *EKS) CheckImages(map[string]string) error { return nil }

// CheckUpdate implements orchestrator.Orchestrator: an Eks cluster's configuration on its nodes
// is the kubelet's, which hale rewrites at each bring-up, so there is no drift to refuse over.
func (o *EKS) CheckUpdate(context.Context, *store.Cluster, *api.UpdateClusterRequest) error {
	return nil
}

// NodeRefusal implements orchestrator.Orchestrator: every node of an Eks cluster is a worker
// (the control plane is not one of its instances), so every node operation may act on it.
func (o *EKS) NodeRefusal(*store.Group, string) string { return "" }
