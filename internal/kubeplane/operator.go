package kubeplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/haleproject/hale/internal/containerimage"
)

// The Kubeflow training operator (PyTorchJob, kubeflow.org/v1, v1.8.1) runs as it runs in a
// cluster: in the kubeflow namespace, with its CRD applied. Its validating webhook's certificate
// is made by the operator itself into a Secret; its files go to a temporary directory of this
// control plane's (TMPDIR), so two control planes on one machine do not share them.

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// dynamicClient is an administrator's dynamic client of the control plane.
func (cp *ControlPlane) dynamicClient() (dynamic.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(rc)
}

func (cp *ControlPlane) startTrainingOperator(ctx context.Context, webhookPort, probePort int) error {
	dyn, err := cp.dynamicClient()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(cp.cfg.Bin, "pytorchjobs-crd.yaml"))
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &crd.Object); err != nil {
		return fmt.Errorf("kubeplane: the PyTorchJob CRD: %w", err)
	}
	if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubeplane: applying the PyTorchJob CRD: %w", err)
	}
	cs, err := cp.Clientset()
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "training-operator-webhook-cert", Namespace: "kubeflow"}}
	if _, err := cs.CoreV1().Secrets("kubeflow").Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The operator makes its webhook's certificate only once its ValidatingWebhookConfiguration
	// exists (it puts its CA there). The API server can reach the webhook only by loopback URL,
	// while the certificate names the operator's in-cluster Service, so the webhook is registered
	// with failurePolicy Ignore: PyTorchJobs are accepted without the operator's validation.
	hook := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "validator.training-operator.kubeflow.org"},
		"webhooks": []any{map[string]any{
			"name": "validator.pytorchjob.training-operator.kubeflow.org", "admissionReviewVersions": []any{"v1"}, "sideEffects": "None",
			"failurePolicy": "Ignore", "timeoutSeconds": int64(2),
			"clientConfig": map[string]any{"url": "https://127.0.0.1:" + strconv.Itoa(webhookPort) + "/validate-kubeflow-org-v1-pytorchjob"},
			"rules": []any{map[string]any{"apiGroups": []any{"kubeflow.org"}, "apiVersions": []any{"v1"},
				"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"pytorchjobs"}}},
		}},
	}}
	webhooks := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	if old, err := dyn.Resource(webhooks).Get(ctx, hook.GetName(), metav1.GetOptions{}); err == nil {
		hook.SetResourceVersion(old.GetResourceVersion())
		_, err = dyn.Resource(webhooks).Update(ctx, hook, metav1.UpdateOptions{}) // this start's port
		if err != nil {
			return err
		}
	} else if _, err := dyn.Resource(webhooks).Create(ctx, hook, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubeplane: the training operator's webhook: %w", err)
	}
	// The CRD is served before the operator starts watching it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := dyn.Resource(crds).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil && established(got) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubeplane: the PyTorchJob CRD was not established within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	tmp := filepath.Join(cp.cfg.Dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	// The operator reads its webhook certificate under /tmp (a path it does not let one
	// change): it runs in a mount namespace of its own, where this control plane's tmp is /tmp,
	// so no file of it lands in the machine's /tmp and two control planes never share one.
	// Its kubeconfig carries its credentials itself: inside, the control plane's files are under
	// the hidden /tmp when the data directory is.
	kc, err := clientcmd.LoadFromFile(cp.kubeconfig)
	if err != nil {
		return err
	}
	if err := clientcmdapi.FlattenConfig(kc); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*kc, filepath.Join(tmp, "operator.kubeconfig")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "pytorch-init-container.yaml"), []byte(initContainerTemplate), 0o600); err != nil {
		return err
	}
	if err := cp.runEnv("training-operator", []string{"KUBECONFIG=/tmp/operator.kubeconfig", "KUBEFLOW_NAMESPACE=kubeflow", "TMPDIR=/tmp"},
		"--enable-scheme=pytorchjob", "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--webhook-server-port="+strconv.Itoa(webhookPort), "--namespace=",
		// Its init container waits for the master's name in DNS with busybox: upstream's
		// alpine cannot be pulled here, hale's registry has Debian's busybox.
		"--pytorch-init-container-image="+containerimage.BusyboxImage,
		"--pytorch-init-container-template-file=/tmp/pytorch-init-container.yaml"); err != nil {
		return err
	}
	// In a cluster, the kubelet mounts the certificate Secret the operator writes where its
	// webhook server reads it, and the operator starts its controllers once it is there. Here
	// hale plays that part of the kubelet.
	certDir := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	deadline = time.Now().Add(60 * time.Second)
	for {
		s, err := cs.CoreV1().Secrets("kubeflow").Get(ctx, secret.Name, metav1.GetOptions{})
		if err == nil && len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0 {
			if err := os.MkdirAll(certDir, 0o700); err != nil {
				return err
			}
			for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
				if err := os.WriteFile(filepath.Join(certDir, f), s.Data[f], 0o600); err != nil {
					return err
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubeplane: the training operator made no webhook certificate within 60 s; see %s", filepath.Join(cp.cfg.Dir, "logs", "training-operator.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// initContainerTemplate is the init container the operator puts in a PyTorchJob's workers: the
// operator's own (v1.8.1, pkg/controller.v1/pytorch/initcontainer.go), waiting for the master's
// Service name in cluster DNS, but judging nslookup by its answer, not its exit status: Debian's
// busybox nslookup asks every search domain and exits 1 when any of them has no such name, even
// after printing the answer (alpine's, upstream's default image, exits 0). It retries every
// second, not 2: a resumed job waits for this.
const initContainerTemplate = `
- name: init-pytorch
  image: {{.InitContainerImage}}
  imagePullPolicy: IfNotPresent
  resources:
    limits:
      cpu: 100m
      memory: 20Mi
    requests:
      cpu: 50m
      memory: 10Mi
  command: ['sh', '-c', 'err=1;for i in $(seq {{.MaxTries}}); do if nslookup {{.MasterAddr}} 2>/dev/null | grep -q "^Name:"; then err=0 && break; fi;echo waiting for master; sleep 1; done; exit $err']`
