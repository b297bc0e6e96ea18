package eks

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// Real kubelets (issue 28). With Config.NodeStack, an Eks node runs containerd, a kubelet and
// kube-proxy of its own, as an EKS worker does: after its lifecycle scripts ran, hale writes
// their configuration and credentials onto the node, has its agent supervise containerd, imports
// the images every node has (pause, CoreDNS: nothing can be pulled), and starts the kubelet,
// which registers the node's Node (Join then labels it as for a simulated one), and kube-proxy.
// The poll routes the Nodes' pod CIDRs between them (routePods); pods' traffic to anything else
// leaves with the node's address (nodestack's pod egress table), so hale's machine needs no
// route to a pod.

// NodeStack gives an Eks node with a real kubelet on the control plane hale runs its files
// (nodestack.Files: configuration and the credentials hale's PKI issues for it), and names
// hale's OCI registry, which nodes of registered clusters pull from too (their credentials come
// from their cluster: registeredCredentials).
type NodeStack interface {
	NodeFiles(node nodestack.Node, hostname string) (map[string]nodestack.File, error)
	// Registry is the registry's host:port ("" when none runs).
	Registry() string
}

// ContainerNodes implements orchestrator.ContainerNodes: a node whose kubelet is real needs
// what a container runtime does from its provider.
func (r *round) ContainerNodes() bool { return r.o.cfg.NodeStack != nil }

// importWait is how long containerd has to start answering an image's import after it starts;
// importTakes is how long one import may take: CoreDNS's took more than 20 s on a machine busy
// with a whole end-to-end suite, and the node failed to provision.
const (
	importWait  = 30 * time.Second
	importTakes = 2 * time.Minute
)

// startKubelet writes the node's files, starts containerd, imports the images, and starts the
// kubelet and kube-proxy.
func (o *EKS) startKubelet(ctx context.Context, n *store.Node) error {
	node := nodestack.Node{Name: NodeName(n.InstanceID), IP: n.Details.PrivateIP, ProviderID: "hale://" + n.InstanceID}
	files, err := o.nodeFiles(ctx, n, node)
	if err != nil {
		return fmt.Errorf("the kubelet's files: %w", err)
	}
	var wf []*agentproto.File
	for path, f := range files {
		wf = append(wf, &agentproto.File{Path: path, Content: f.Content, Mode: f.Mode})
	}
	sort.Slice(wf, func(i, j int) bool { return wf[i].Path < wf[j].Path })
	r, err := o.h.Do(ctx, n.InstanceID, &agentproto.Command{Id: n.Details.CommandID + "-kubelet-files", Ephemeral: true,
		Kind: &agentproto.Command_WriteFiles{WriteFiles: &agentproto.WriteFiles{Files: wf}}}, 30*time.Second)
	if err != nil {
		return fmt.Errorf("writing the kubelet's files: %w", err)
	}
	if r.Error != "" {
		return fmt.Errorf("writing the kubelet's files: %s", r.Error)
	}
	if _, err := o.h.Run(ctx, n.InstanceID, nodestack.PodEgressCommand(), 20*time.Second); err != nil {
		return fmt.Errorf("loading the pods' egress rules (%s): %w", nodestack.PodEgress, err)
	}
	if err := orchestrator.StartDaemon(ctx, o.h, n, nodestack.Containerd()); err != nil {
		return err
	}
	for _, archive := range []string{nodestack.PauseArchivePath, nodestack.CoreDNSArchivePath} {
		deadline := time.Now().Add(importWait)
		for {
			_, err := o.h.Run(ctx, n.InstanceID, nodestack.Import(archive), importTakes)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("importing %s into containerd (its log: /var/log/containerd.log): %w", archive, err)
			}
			o.h.Sleep(ctx, 500*time.Millisecond)
		}
	}
	if err := orchestrator.StartDaemon(ctx, o.h, n, nodestack.Kubelet(node)); err != nil {
		return err
	}
	return orchestrator.StartDaemon(ctx, o.h, n, nodestack.KubeProxy())
}

// nodeFiles are node's files for the Kubernetes cluster n's cluster is attached to: from hale's
// PKI for the control plane hale runs, from the cluster's own signers for a registered one.
func (o *EKS) nodeFiles(ctx context.Context, n *store.Node, node nodestack.Node) (map[string]nodestack.File, error) {
	var k *store.KubeCluster
	var cs kubernetes.Interface
	err := o.h.Store().Read(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(n.ClusterID)
		if err != nil {
			return err
		}
		if k, err = tx.KubeCluster(cl.Spec.Orchestrator.Eks.GetClusterArn()); err != nil || k.Local {
			return err
		}
		cs, err = o.client(tx, cl)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case k.Local:
		return o.cfg.NodeStack.NodeFiles(node, n.Details.PrivateDNSHostname)
	}
	c, err := registeredCredentials(ctx, cs, k, node, n.Details.PrivateDNSHostname, o.cfg.NodeStack.Registry())
	if err != nil {
		return nil, err
	}
	return nodestack.Files(node, *c), nil
}

// routePods has the provider route each Node's pod CIDR (given by the controller manager) to its
// InternalIP on every other node of the cluster, when they changed: pods on different nodes
// then reach each other. It runs in a job of its own, beside each poll.
func (o *EKS) routePods(ctx context.Context, clusterID string, nodes []corev1.Node) {
	pr := o.h.PodRoutes()
	if pr == nil {
		return
	}
	var routes []provider.PodRoute
	for _, kn := range nodes {
		id, ok := strings.CutPrefix(kn.Spec.ProviderID, "hale://")
		if ip := nodeIP(&kn); ok && kn.Spec.PodCIDR != "" && ip != "" {
			routes = append(routes, provider.PodRoute{InstanceID: id, CIDR: kn.Spec.PodCIDR, Via: ip})
		}
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].CIDR < routes[j].CIDR })
	key := fmt.Sprint(routes)
	o.mu.Lock()
	same := o.routed[clusterID] == key
	o.mu.Unlock()
	if same {
		return
	}
	if err := pr.RoutePods(ctx, clusterID, routes); err != nil {
		o.log.Warn("routing the pod networks", "cluster_id", clusterID, "error", err)
		return
	}
	o.mu.Lock()
	o.routed[clusterID] = key
	o.mu.Unlock()
}

// nodeIP is a Node's InternalIP ("" when it reports none).
func nodeIP(kn *corev1.Node) string {
	for _, a := range kn.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
