package kubeplane

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/haleproject/hale/internal/nodestack"
)

// Cluster DNS for real kubelets' pods (issue 28): CoreDNS, as kubeadm deploys it (a Deployment
// in kube-system behind the kube-dns Service at a fixed ClusterIP, its kubernetes plugin reading
// Services and EndpointSlices with the system:coredns role), from the image every node imports
// (nodestack.CoreDNSImage; nothing is pulled). It answers for cluster.local and forwards nothing:
// the nodes have no resolver to forward to. A PyTorchJob's workers find their master by its
// Service's name through it.

// corefile is CoreDNS's configuration: kubeadm's, but for the cluster's own names' TTL, 0 (not
// cached) instead of 30 s. A PyTorchJob restarted by auto-resume gets a new master pod, with a
// new address, under the same Service name: a cached answer sent the new workers to the old
// master's address, which nobody has any more, and they waited out their rendezvous timeout
// before trying again (60 s measured, TestEksTrainsAndResumes). The kubelet does no DNS caching
// of its own; the cache still keeps answers for everything else.
const corefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 0
    }
    cache 30
    loop
    reload
    loadbalance
}
`

// applyDNS creates CoreDNS's objects where they are missing (a restart finds them).
func (cp *ControlPlane) applyDNS(ctx context.Context) error {
	cs, err := cp.Clientset()
	if err != nil {
		return err
	}
	labels := map[string]string{"k8s-app": "kube-dns"}
	two := int32(2)
	objs := []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: "kube-system"}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns"}, Data: map[string]string{"Corefile": corefile}}
			_, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// An earlier hale's Corefile is replaced (CoreDNS's reload plugin reads it again).
				_, err = cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
			}
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services("kube-system").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: labels},
				Spec: corev1.ServiceSpec{Selector: labels, ClusterIP: nodestack.DNSServiceIP, Ports: []corev1.ServicePort{
					{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
					{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			want := corednsDeployment(labels, two)
			_, err := cs.AppsV1().Deployments("kube-system").Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// An earlier version's (one replica): brought to this one's.
				if old, gerr := cs.AppsV1().Deployments("kube-system").Get(ctx, want.Name, metav1.GetOptions{}); gerr == nil && *old.Spec.Replicas < two {
					old.Spec.Replicas, old.Spec.Template.Spec.Affinity = want.Spec.Replicas, want.Spec.Template.Spec.Affinity
					_, err = cs.AppsV1().Deployments("kube-system").Update(ctx, old, metav1.UpdateOptions{})
					return err
				}
			}
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubeplane: cluster DNS: %w", err)
		}
	}
	return nil
}

// corednsDeployment is CoreDNS's Deployment: on any node (it tolerates every taint: HyperPod's
// groups may taint all of theirs), its image never pulled, its replicas on different nodes
// when there are (as EKS runs two): with a single replica, the repair of the node it ran on
// took the cluster's DNS away until it ran again elsewhere (a Service's clients failed for 45 s
// in TestEksTrainsAndResumes, full118).
func corednsDeployment(labels map[string]string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: "coredns", PriorityClassName: "system-cluster-critical", DNSPolicy: corev1.DNSDefault,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}}}},
				Containers: []corev1.Container{{Name: "coredns", Image: nodestack.CoreDNSImage, ImagePullPolicy: corev1.PullNever,
					Args:         []string{"-conf", "/etc/coredns/Corefile"},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
					Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
						{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}}},
				}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}}}}},
			}}}}
}
