package eks

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
)

// A registration's pods' network must be an IPv4 CIDR: anything else is refused naming it and
// the rule, before hale applies anything to the cluster (no API server answers this address).
func TestRegisterRefusesABadPodCIDR(t *testing.T) {
	admin := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, cidr := range []string{"10.244.0.0", "fd00::/64", "ten/8"} {
		_, err := Register(context.Background(), admin, "training", "us-west-2", "123456789012", cidr)
		if err == nil || !strings.Contains(err.Error(), "pod CIDR \""+cidr+"\"") || !strings.Contains(err.Error(), "IPv4 CIDR") {
			t.Errorf("pod CIDR %q: %v", cidr, err)
		}
	}
}

// Registering a cluster makes hale's ServiceAccount, ClusterRole and binding and kube-proxy's,
// waits for the token controller to fill both tokens in, and returns a kubeconfig with hale's
// token, the cluster DNS address and the pods' network; registering again updates the role and
// keeps the rest.
func TestRegisterAppliesHalesAccount(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: Namespace}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10"}})
	// The token controller: a token Secret is filled in when it is made.
	cs.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sec := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret)
		sec.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte("token-of-" + sec.Annotations[corev1.ServiceAccountNameKey])}
		return false, nil, nil
	})
	admin := &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("the CA")}}
	for i := 0; i < 2; i++ {
		k, err := register(ctx, cs, admin, "training", "us-west-2", "123456789012", DefaultPodCIDR)
		if err != nil {
			t.Fatal(err)
		}
		if k.ARN != "arn:aws:eks:us-west-2:123456789012:cluster/training" || k.Server != admin.Host {
			t.Errorf("registration %+v", k)
		}
		if k.NodeJoin == nil || k.NodeJoin.ProxyToken != "token-of-"+ProxyServiceAccount || k.NodeJoin.ClusterDNS != "10.96.0.10" || k.NodeJoin.PodCIDR != DefaultPodCIDR {
			t.Errorf("node join %+v", k.NodeJoin)
		}
		kc, err := clientcmd.Load(k.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if ai := kc.AuthInfos[ServiceAccount]; ai == nil || ai.Token != "token-of-"+ServiceAccount || string(kc.Clusters["training"].CertificateAuthorityData) != "the CA" {
			t.Errorf("kubeconfig %+v", kc)
		}
	}
	role, err := cs.RbacV1().ClusterRoles().Get(ctx, ClusterRole, metav1.GetOptions{})
	if err != nil || len(role.Rules) != len(Rules) {
		t.Errorf("hale's ClusterRole: %v, %+v", err, role)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, ProxyServiceAccount, metav1.GetOptions{}); err != nil {
		t.Errorf("kube-proxy's binding: %v", err)
	}
}

// A cluster whose token controller does not run is refused, saying so, once the wait ends.
func TestRegisterWithoutATokenControllerFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the wait for the token ends at once
	_, err := register(ctx, fake.NewClientset(), &rest.Config{Host: "https://10.0.0.1:6443"}, "training", "us-west-2", "123456789012", "")
	if err == nil || !strings.Contains(err.Error(), "registering training") {
		t.Errorf("register without a token controller: %v", err)
	}
}
