//go:build kube

package server_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	authzv1 "k8s.io/api/authorization/v1"
	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/kubeplane"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

func k8sBin() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "bin", "k8s")
}

// hale server --kubernetes local runs a real control plane and registers it; another control
// plane registers through the endpoint (hale kube register). Either way hale keeps a
// ServiceAccount's kubeconfig whose ClusterRole allows what it needs and refuses the rest, and
// Eks clusters name the registered ARNs.
func TestKubernetesControlPlanes(t *testing.T) {
	e := servertest.Start(t, server.Options{Kubernetes: "local", KubernetesBin: k8sBin()})
	ctx := servertest.Ctx(t)
	t.Setenv("HALE_DATA_DIR", e.Options.DataDir)
	c, err := client.New(ctx, client.Options{Profile: "hale"})
	if err != nil {
		t.Fatal(err)
	}
	var list server.KubeClusters
	body, err := c.Get(ctx, server.KubePath, nil)
	if err != nil || json.Unmarshal(body, &list) != nil || len(list.Clusters) != 1 || !list.Clusters[0].Local ||
		list.Clusters[0].ClusterArn != "arn:aws:eks:us-west-2:123456789012:cluster/hale-local" {
		t.Fatalf("registered clusters: %s %v", body, err)
	}
	narrow(t, e, "hale-local")

	// A second control plane, registered as an outside one.
	other, err := kubeplane.Start(ctx, kubeplane.Config{Bin: k8sBin(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	admin, _ := os.ReadFile(other.AdminKubeconfig())
	req, _ := json.Marshal(server.KubeRegistration{Name: "outside", Kubeconfig: string(admin)})
	body, err = c.Post(ctx, server.KubePath, req)
	var info server.KubeClusterInfo
	if err != nil || json.Unmarshal(body, &info) != nil || info.ClusterArn != "arn:aws:eks:us-west-2:123456789012:cluster/outside" || info.Server != other.Server() {
		t.Fatalf("registering an outside cluster: %s %v", body, err)
	}
	narrow(t, e, "outside")
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("eks"),
		Orchestrator: &types.ClusterOrchestrator{Eks: &types.ClusterOrchestratorEksConfig{ClusterArn: aws.String(info.ClusterArn)}},
		InstanceGroups: []types.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("workers"), InstanceCount: aws.Int32(1),
			InstanceType: types.ClusterInstanceTypeMlC5Xlarge, ExecutionRole: aws.String("arn:aws:iam::123456789012:role/HyperPodRole"),
			LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://bucket/scripts"), OnCreate: aws.String("on_create.sh")}}}}); err != nil {
		t.Errorf("an Eks cluster on the registered ARN: %v", err)
	}
	// hale update-kubeconfig's endpoint: the local plane's administrator, by the plane's name;
	// nothing for an outside cluster (by its name or an Eks cluster's) or an unknown name.
	body, err = c.Get(ctx, server.KubeconfigPath, url.Values{"cluster-name": {"hale-local"}})
	var access server.KubeAccess
	if err != nil || json.Unmarshal(body, &access) != nil || access.ClusterArn != "arn:aws:eks:us-west-2:123456789012:cluster/hale-local" {
		t.Fatalf("the local plane's kubeconfig: %s %v", body, err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(access.Kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(rc).CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the administrator's kubeconfig cannot list secrets: %v", err)
	}
	for ref, code := range map[string]string{"outside": "ValidationException", "eks": "ValidationException", "nope": "ResourceNotFound"} {
		if _, err := c.Get(ctx, server.KubeconfigPath, url.Values{"cluster-name": {ref}}); !api.IsCode(err, code) {
			t.Errorf("kubeconfig of %s: %v, want %s", ref, err, code)
		}
	}
	req, _ = json.Marshal(server.KubeRegistration{Name: "bad name!", Kubeconfig: string(admin)})
	if _, err := c.Post(ctx, server.KubePath, req); err == nil {
		t.Error("a name EKS refuses was registered")
	}
}

// narrow checks the kubeconfig hale keeps for a registered cluster: hale's ServiceAccount, which
// may list and label nodes and may not read secrets or delete namespaces.
func narrow(t *testing.T, e *servertest.Env, name string) {
	t.Helper()
	ctx := context.Background()
	var k *store.KubeCluster
	e.App.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		k, err = tx.KubeCluster(name)
		return err
	})
	if k == nil {
		t.Fatalf("%s is not registered", name)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken == "" || cfg.CertFile != "" || len(cfg.CertData) != 0 {
		t.Errorf("%s: hale keeps an administrator's credentials, not a ServiceAccount token", name)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("%s: hale's ServiceAccount cannot list nodes: %v", name, err)
	}
	if _, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s: listing secrets: %v, want Forbidden", name, err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s: deleting a namespace: %v, want Forbidden", name, err)
	}
	// It may approve certificate requests for the two node signers (system:node:<name> only),
	// never for the signer of any other user's client certificate.
	for signer, want := range map[string]bool{certv1.KubeAPIServerClientKubeletSignerName: true, certv1.KubeletServingSignerName: true,
		certv1.KubeAPIServerClientSignerName: false} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authzv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "signers", Verb: "approve", Name: signer}}}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("%s: asking whether hale may approve for %s: %v", name, signer, err)
		} else if r.Status.Allowed != want {
			t.Errorf("%s: hale may approve for %s: %v, want %v", name, signer, r.Status.Allowed, want)
		}
	}
	if k.NodeJoin == nil || k.NodeJoin.ProxyToken == "" || k.NodeJoin.PodCIDR == "" {
		t.Errorf("%s: the registration has no node join settings: %+v", name, k.NodeJoin)
	}
}
