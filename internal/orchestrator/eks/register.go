// Package eks is hale's Kubernetes orchestrator (issue 14), the second implementation of
// orchestrator.Orchestrator, after HyperPod on EKS: an Eks cluster is attached to a Kubernetes
// cluster registered with hale, its instances join as Nodes named hyperpod-i-<instance id>, and
// health, repairs and job auto-resume go through Node labels, taints and conditions
// (research hyperpod-eks-health.md). This file registers a Kubernetes cluster: hale's
// controller gets a ServiceAccount bound to a narrow ClusterRole, never an administrator's
// credentials.
package eks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/haleproject/hale/internal/store"
)

// The objects hale applies to a registered cluster, in kube-system and cluster-wide.
const (
	Namespace      = "kube-system"
	ServiceAccount = "hale-controller"
	ClusterRole    = "hale-controller"
	tokenSecret    = "hale-controller-token"
)

// Rules are hale's permissions on a registered cluster (docs/kubernetes.md explains each):
//   - nodes: a local node's Node is created and deleted by hale (on real machines the kubelet
//     registers it); labels, taints and cordon are patches.
//   - nodes/status: the health condition named for the repair action.
//   - pods: read to find the pods on a faulty node and the jobs they belong to; deleted when
//     an eviction cannot finish (after the PodDisruptionBudget timeout).
//   - pods/eviction: the drain of a faulty node, honouring PodDisruptionBudgets.
//   - events (core and events.k8s.io): events on Nodes and jobs, as kubectl describe shows.
//   - leases: whether a node's kubelet heartbeats.
//   - pytorchjobs: job auto-resume restarts annotated PyTorchJobs.
var Rules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"get", "update", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs/status"}, Verbs: []string{"get"}},
}

// namePattern is EKS's rule for a cluster name (CreateCluster's name: 1-100 characters).
var namePattern = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)

// ARN is a registered cluster's ARN, as EKS names a cluster.
func ARN(region, account, name string) string {
	return fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", region, account, name)
}

// Register applies hale's ServiceAccount, ClusterRole and binding to the cluster admin reaches
// (a kubeconfig with the rights to create them), waits for the ServiceAccount's token, and
// returns the registration: a kubeconfig with that token for hale's controller.
func Register(ctx context.Context, admin *rest.Config, name, region, account string) (*store.KubeCluster, error) {
	if !namePattern.MatchString(name) {
		return nil, fmt.Errorf("name %q: a Kubernetes cluster's name is 1-100 letters, digits, - and _, starting with a letter or digit", name)
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	objs := []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ClusterRole}, Rules: Rules}
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				_, err = cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}) // the rules of this hale
			}
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ClusterRole},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: ClusterRole},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: ServiceAccount, Namespace: Namespace}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			// A long-lived token: the token controller fills the Secret in.
			_, err := cs.CoreV1().Secrets(Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tokenSecret,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: ServiceAccount}}, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("registering %s: %w", name, err)
		}
	}
	token, err := waitToken(ctx, cs)
	if err != nil {
		return nil, fmt.Errorf("registering %s: %w", name, err)
	}
	ca := admin.TLSClientConfig.CAData
	if len(ca) == 0 && admin.TLSClientConfig.CAFile != "" {
		if ca, err = os.ReadFile(admin.TLSClientConfig.CAFile); err != nil {
			return nil, err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca, InsecureSkipTLSVerify: admin.TLSClientConfig.Insecure}
	kc.AuthInfos[ServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: ServiceAccount}
	kc.CurrentContext = name
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}
	return &store.KubeCluster{Name: name, ARN: ARN(region, account, name), Kubeconfig: b, Server: admin.Host, CreatedAt: time.Now().UTC()}, nil
}

// waitToken waits (up to 30 s) for the token controller to fill in hale's token Secret.
func waitToken(ctx context.Context, cs kubernetes.Interface) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := cs.CoreV1().Secrets(Namespace).Get(ctx, tokenSecret, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if t := s.Data[corev1.ServiceAccountTokenKey]; len(t) > 0 {
			return string(t), nil
		}
		if time.Now().After(deadline) {
			return "", errors.New("the ServiceAccount token Secret " + Namespace + "/" + tokenSecret + " was not filled in within 30 s: does the cluster run its token controller (kube-controller-manager)?")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
