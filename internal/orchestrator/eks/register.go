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
	"net"
	"os"
	"regexp"
	"time"

	certv1 "k8s.io/api/certificates/v1"
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
	// ProxyServiceAccount is the identity of the kube-proxy on each of hale's nodes, bound to
	// Kubernetes' bootstrap role for it (system:node-proxier), as kubeadm's kube-proxy is.
	ProxyServiceAccount = "hale-kube-proxy"
	proxyTokenSecret    = "hale-kube-proxy-token"
	proxyRole           = "system:node-proxier"
)

// DefaultPodCIDR is a registered cluster's pods' network when its registration names none:
// kubeadm's customary one (flannel's), and the control plane hale runs.
const DefaultPodCIDR = "10.244.0.0/16"

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
//   - certificatesigningrequests, their approval, and the two signers of node certificates: a
//     real kubelet on a registered cluster gets its client certificate (user system:node:<name>,
//     which the signer kubernetes.io/kube-apiserver-client-kubelet signs for no other user) and
//     its serving certificate (kubernetes.io/kubelet-serving) from the cluster's own CA, as a
//     kubelet's TLS bootstrap would, with hale approving the requests it made itself.
var Rules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"get", "update", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs/status"}, Verbs: []string{"get"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, Verbs: []string{"approve"},
		ResourceNames: []string{certv1.KubeAPIServerClientKubeletSignerName, certv1.KubeletServingSignerName}},
	// Task governance (governance.go): the teams' namespaces (made, never deleted) and Kueue's
	// objects.
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "patch"}},
	{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
}

// namePattern is EKS's rule for a cluster name (CreateCluster's name: 1-100 characters).
var namePattern = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)

// ARN is a registered cluster's ARN, as EKS names a cluster.
func ARN(region, account, name string) string {
	return fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", region, account, name)
}

// Register applies hale's ServiceAccount, ClusterRole and binding to the cluster admin reaches
// (a kubeconfig with the rights to create them), and kube-proxy's ServiceAccount and binding,
// waits for their tokens, and returns the registration: a kubeconfig with hale's token for its
// controller, and what real kubelets need to join (store.KubeNodeJoin: kube-proxy's token,
// the kube-dns Service's address, and podCIDR, DefaultPodCIDR when empty).
func Register(ctx context.Context, admin *rest.Config, name, region, account, podCIDR string) (*store.KubeCluster, error) {
	if !namePattern.MatchString(name) {
		return nil, fmt.Errorf("name %q: a Kubernetes cluster's name is 1-100 letters, digits, - and _, starting with a letter or digit", name)
	}
	if podCIDR == "" {
		podCIDR = DefaultPodCIDR
	}
	if _, n, err := net.ParseCIDR(podCIDR); err != nil || n.IP.To4() == nil {
		return nil, fmt.Errorf("pod CIDR %q: the pods' network is an IPv4 CIDR (the controller manager's --cluster-cidr), such as %s", podCIDR, DefaultPodCIDR)
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	return register(ctx, cs, admin, name, region, account, podCIDR)
}

// register is Register on the cluster's clientset cs (admin is its configuration, for the
// kubeconfig's server and CA).
func register(ctx context.Context, cs kubernetes.Interface, admin *rest.Config, name, region, account, podCIDR string) (*store.KubeCluster, error) {
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
		func() error { return tokenFor(ctx, cs, tokenSecret, ServiceAccount) },
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ProxyServiceAccount}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ProxyServiceAccount},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: proxyRole},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: ProxyServiceAccount, Namespace: Namespace}}}, metav1.CreateOptions{})
			return err
		},
		func() error { return tokenFor(ctx, cs, proxyTokenSecret, ProxyServiceAccount) },
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("registering %s: %w", name, err)
		}
	}
	token, err := waitToken(ctx, cs, tokenSecret)
	if err != nil {
		return nil, fmt.Errorf("registering %s: %w", name, err)
	}
	join := &store.KubeNodeJoin{PodCIDR: podCIDR}
	if join.ProxyToken, err = waitToken(ctx, cs, proxyTokenSecret); err != nil {
		return nil, fmt.Errorf("registering %s: %w", name, err)
	}
	// Cluster DNS, where the cluster runs it (kubeadm and EKS name its Service kube-dns).
	if svc, err := cs.CoreV1().Services(Namespace).Get(ctx, "kube-dns", metav1.GetOptions{}); err == nil && net.ParseIP(svc.Spec.ClusterIP) != nil {
		join.ClusterDNS = svc.Spec.ClusterIP
	} else if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("registering %s: reading its cluster DNS Service: %w", name, err)
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
	return &store.KubeCluster{Name: name, ARN: ARN(region, account, name), Kubeconfig: b, Server: admin.Host, CreatedAt: time.Now().UTC(), NodeJoin: join}, nil
}

// tokenFor makes the Secret that holds a long-lived token of ServiceAccount sa (the token
// controller fills it in).
func tokenFor(ctx context.Context, cs kubernetes.Interface, secret, sa string) error {
	_, err := cs.CoreV1().Secrets(Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret,
		Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}}, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
	return err
}

// waitToken waits (up to 30 s) for the token controller to fill in a token Secret.
func waitToken(ctx context.Context, cs kubernetes.Interface, tokenSecret string) (string, error) {
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
