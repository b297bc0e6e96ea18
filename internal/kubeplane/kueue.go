package kubeplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"crypto/tls"
	"crypto/x509"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// Kueue (v0.19, HyperPod task governance: internal/governance) runs as a program of the control
// plane, as in a cluster but for its Pod and Service: its CRDs are applied, with the conversion
// webhook upstream patches into five of them; the API server calls its webhooks at a loopback
// URL, with a certificate from this control plane's CA; it admits batch Jobs and PyTorchJobs.
// Its Configuration turns off what needs a cluster (leader election, its own certificates, the
// visibility API server, metrics) and turns on fair sharing.

// kueueWebhooks are the webhooks hale registers (upstream's, by name): Kueue's own kinds', and
// those of the two job kinds it manages. The job webhooks are narrowed to the team namespaces
// task governance makes, so that a Kueue that is down blocks no other namespace's Jobs
// (failurePolicy Fail).
var kueueWebhooks = map[string]bool{
	"mclusterqueue.kb.io": true, "mresourceflavor.kb.io": true, "mworkload.kb.io": true, "mjob.kb.io": true, "mpytorchjob.kb.io": true,
	"vclusterqueue.kb.io": true, "vcohort.kb.io": true, "vresourceflavor.kb.io": true, "vworkload.kb.io": true, "vjob.kb.io": true, "vpytorchjob.kb.io": true,
}

// kueueConverted are the CRDs upstream gives a conversion webhook (their v1beta1 and v1beta2
// differ).
var kueueConverted = map[string]bool{"localqueues": true, "clusterqueues": true, "cohorts": true, "workloads": true, "multikueueclusters": true}

// crdWait is how long Kueue's CRDs have to be established.
const crdWait = 3 * time.Minute

// ManagedQueueLabel marks the team namespaces (governance.LabelManaged); the job webhooks
// select them.
const ManagedQueueLabel = "sagemaker.amazonaws.com/sagemaker-managed-queue"

const kueueConfig = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
leaderElection:
  leaderElect: false
health:
  healthProbeBindAddress: "127.0.0.1:%d"
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
internalCertManagement:
  enable: false
featureGates:
  VisibilityOnDemand: false
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - batch/job
  - kubeflow.org/pytorchjob
fairSharing:
  preemptionStrategies:
  - LessThanOrEqualToFinalShare
  - LessThanInitialShare
`

func (cp *ControlPlane) startKueue(ctx context.Context, webhookPort, probePort int) error {
	dyn, err := cp.dynamicClient()
	if err != nil {
		return err
	}
	cert, key, err := cp.pki.issue("kueue-webhook", "kueue-webhook", nil, []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return err
	}
	certDir := filepath.Join(cp.cfg.Dir, "kueue", "certs")
	metricsDir := filepath.Join(cp.cfg.Dir, "kueue-etc", "kueue", "metrics", "certs")
	for _, d := range []string{certDir, metricsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		for src, dst := range map[string]string{cert: "tls.crt", key: "tls.key"} {
			b, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, dst), b, 0o600); err != nil {
				return err
			}
		}
	}
	bundle := base64.StdEncoding.EncodeToString(cp.pki.caPEM)
	base := "https://127.0.0.1:" + strconv.Itoa(webhookPort)

	// The CRDs, server-side applied (the Workload CRD is too big for a last-applied annotation).
	docs, err := readYAMLDocs(filepath.Join(cp.cfg.Bin, "kueue-crds.yaml"))
	if err != nil {
		return fmt.Errorf("kubeplane: Kueue's CRDs: %w", err)
	}
	var names []string
	for _, crd := range docs {
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		if kueueConverted[plural] {
			unstructured.SetNestedField(crd.Object, map[string]any{"strategy": "Webhook", "webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig":             map[string]any{"url": base + "/convert", "caBundle": bundle}}}, "spec", "conversion")
		}
		if err := serverApply(ctx, dyn, crds, crd); err != nil {
			return fmt.Errorf("kubeplane: applying Kueue's CRD %s: %w", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	// The webhook configurations, at this start's port.
	hooks, err := readYAMLDocs(filepath.Join(cp.cfg.Bin, "kueue-webhooks.yaml"))
	if err != nil {
		return fmt.Errorf("kubeplane: Kueue's webhooks: %w", err)
	}
	for _, cfg := range hooks {
		cfg.SetName("kueue-" + cfg.GetName())
		list, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		var keep []any
		for _, h := range list {
			m := h.(map[string]any)
			if !kueueWebhooks[fmt.Sprint(m["name"])] {
				continue
			}
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			m["clientConfig"] = map[string]any{"url": base + path, "caBundle": bundle}
			if groups, _, _ := unstructured.NestedSlice(m, "rules"); len(groups) > 0 {
				if g, _ := groups[0].(map[string]any)["apiGroups"].([]any); len(g) > 0 && !strings.HasPrefix(fmt.Sprint(g[0]), "kueue.x-k8s.io") {
					m["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{ManagedQueueLabel: "true"}}
				}
			}
			keep = append(keep, m)
		}
		cfg.Object["webhooks"] = keep
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: strings.ToLower(cfg.GetKind()) + "s"}
		if err := serverApply(ctx, dyn, gvr, cfg); err != nil {
			return fmt.Errorf("kubeplane: Kueue's %s: %w", cfg.GetKind(), err)
		}
	}
	// The Workload CRD is 1.4 MB: a busy machine's API server took more than a minute to
	// establish it (full118).
	deadline := time.Now().Add(crdWait)
	for _, name := range names {
		for {
			got, err := dyn.Resource(crds).Get(ctx, name, metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("kubeplane: Kueue's CRD %s was not established within %s", name, crdWait)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	config := filepath.Join(cp.cfg.Dir, "kueue", "config.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, kueueConfig, probePort, webhookPort, certDir), 0o600); err != nil {
		return err
	}
	if err := cp.run("kueue", "--config", config, "--kubeconfig", cp.kubeconfig, "--zap-log-level=2"); err != nil {
		return err
	}
	return cp.waitKueue(ctx, webhookPort, probePort)
}

// waitKueue waits until Kueue answers its readiness probe and serves its webhooks with the
// certificate the API server trusts.
func (cp *ControlPlane) waitKueue(ctx context.Context, webhookPort, probePort int) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ready := func(url string) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode < 500
	}
	deadline := time.Now().Add(cp.cfg.ReadyTimeout)
	for {
		if ready("http://127.0.0.1:"+strconv.Itoa(probePort)+"/readyz") && ready("https://127.0.0.1:"+strconv.Itoa(webhookPort)+"/convert") {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubeplane: Kueue did not get ready within %s (its log: %s)", cp.cfg.ReadyTimeout, filepath.Join(cp.cfg.Dir, "logs", "kueue.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readYAMLDocs reads a multi-document YAML file as objects.
func readYAMLDocs(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(string(doc)) == "---" {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			return nil, err
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

// serverApply applies obj with server-side apply, as field manager hale.
func serverApply(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = dyn.Resource(gvr).Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "hale", Force: &force})
	return err
}
