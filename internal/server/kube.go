package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/kubeplane"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/store"
)

// KubePath is hale's endpoint for the Kubernetes clusters Eks clusters attach to. It is outside
// the SageMaker API (EKS clusters are EKS's), behind the same SigV4 authentication. POST with a
// KubeRegistration registers a cluster and answers a KubeClusterInfo (a key needs
// sagemaker:CreateCluster: registering is the first step of creating Eks clusters); GET lists
// them (sagemaker:ListClusters).
const KubePath = "/hale/kube/clusters"

// DefaultKubernetesName is the name the control plane of `hale server --kubernetes local` is
// registered under.
const DefaultKubernetesName = "hale-local"

// KubeRegistration is a registration request: the cluster's name (its EKS name, in the ARN)
// and a kubeconfig with the rights to create hale's ServiceAccounts, ClusterRole and bindings,
// and optionally the pods' network the cluster's controller manager gives Nodes ranges of (its
// --cluster-cidr; eks.DefaultPodCIDR when empty), which real kubelets' nodes route. hale keeps
// only the ServiceAccounts' credentials.
type KubeRegistration struct {
	Name       string
	Kubeconfig string
	PodCIDR    string `json:",omitempty"`
}

// KubeClusterInfo is a registered cluster as the endpoint shows it.
type KubeClusterInfo struct {
	Name       string
	ClusterArn string
	Server     string
	Local      bool `json:",omitempty"`
}

// KubeClusters is the listing's answer.
type KubeClusters struct {
	Clusters []KubeClusterInfo
}

func (h *Handler) serveKube(w http.ResponseWriter, r *http.Request, st store.Store, region, account string) {
	fail := func(err error) {
		e := api.AsError(err)
		h.writeError(w, e.HTTPStatus(), e)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		fail(err)
		return
	}
	key, err := h.cfg.Verifier.Verify(r, body)
	if err != nil {
		fail(err)
		return
	}
	var ans any
	switch r.Method {
	case http.MethodGet:
		if !auth.Allows(key, "sagemaker:ListClusters") {
			fail(auth.AccessDenied(key, "sagemaker:ListClusters", "*"))
			return
		}
		var list KubeClusters
		err = st.Read(r.Context(), func(tx store.Tx) error {
			ks, err := tx.ListKubeClusters()
			for _, k := range ks {
				list.Clusters = append(list.Clusters, KubeClusterInfo{Name: k.Name, ClusterArn: k.ARN, Server: k.Server, Local: k.Local})
			}
			return err
		})
		ans = list
	case http.MethodPost:
		if !auth.Allows(key, "sagemaker:CreateCluster") {
			fail(auth.AccessDenied(key, "sagemaker:CreateCluster", "*"))
			return
		}
		var in KubeRegistration
		if err := json.Unmarshal(body, &in); err != nil {
			fail(api.Errorf(api.CodeSerializationException, "The request is not a registration: %v", err))
			return
		}
		var k *store.KubeCluster
		k, err = registerKube(r.Context(), st, []byte(in.Kubeconfig), in.Name, region, account, in.PodCIDR, false)
		if err == nil {
			ans = KubeClusterInfo{Name: k.Name, ClusterArn: k.ARN, Server: k.Server}
		}
	}
	writeJSON(w, h, ans, err)
}

// writeJSON answers one of hale's own resources: err as SageMaker's error document, else ans.
func writeJSON(w http.ResponseWriter, h *Handler, ans any, err error) {
	if err != nil {
		e := api.AsError(err)
		h.writeError(w, e.HTTPStatus(), e)
		return
	}
	b, _ := json.Marshal(ans)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// registerKube registers the cluster an administrator's kubeconfig reaches (eks.Register) and
// stores the registration; a bad kubeconfig or name is a ValidationException.
func registerKube(ctx context.Context, st store.Store, adminKubeconfig []byte, name, region, account, podCIDR string, local bool) (*store.KubeCluster, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(adminKubeconfig)
	if err != nil {
		return nil, api.Errorf(api.CodeValidationException, "Kubeconfig: not a kubeconfig hale can use: %v", err)
	}
	k, err := eks.Register(ctx, cfg, name, region, account, podCIDR)
	if err != nil {
		return nil, api.Errorf(api.CodeValidationException, "Registering the Kubernetes cluster %s failed: %v", name, err)
	}
	k.Local = local
	err = st.Write(ctx, func(tx store.Tx) error {
		if old, err := tx.KubeCluster(name); err == nil {
			k.CreatedAt = old.CreatedAt
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.PutKubeCluster(k)
	})
	return k, err
}

// startKubernetes starts the local control plane (o.Kubernetes "local") under the data
// directory and registers it.
func (a *App) startKubernetes(o Options, region, account string) error {
	switch o.EksDrainPolicy {
	case "", eks.DrainForce, eks.DrainSkip:
	default:
		return fmt.Errorf("--eks-drain-policy %q: want %s or %s", o.EksDrainPolicy, eks.DrainForce, eks.DrainSkip)
	}
	if o.Kubernetes == "" {
		return nil
	}
	if o.Kubernetes != "local" {
		return fmt.Errorf("--kubernetes %q: hale runs one kind of control plane itself, local (register others with hale kube register)", o.Kubernetes)
	}
	if IsPostgres(o.Store) {
		// Its etcd and certificates are this server's data directory: the other servers, and a
		// new leader, could not reach or take it over.
		return errors.New("--kubernetes local runs on the embedded store only, one server: servers on a PostgreSQL store share a Kubernetes control plane you run, registered with hale kube register (docs/kubernetes.md)")
	}
	bin, err := kubeBin(o)
	if err != nil {
		return err
	}
	name := o.KubernetesName
	if name == "" {
		name = DefaultKubernetesName
	}
	// kwok plays the nodes' kubelets only where they are simulated: never for a server without
	// a provider (no node to play) or one whose nodes run real kubelets.
	kc := kubeplane.Config{Bin: bin, Dir: filepath.Join(o.DataDir, "kubernetes"), Logger: a.log, Kwok: !realKubelets(o) && providerCaps(o).SimulatedKubelets}
	if realKubelets(o) {
		gw, ok := a.Provider.(interface{ Gateway() string })
		if !ok {
			return fmt.Errorf("--kubelets real: the %s provider's nodes cannot run real kubelets yet (the local provider's can)", o.Provider)
		}
		kc.Address = gw.Gateway()
	}
	cp, err := kubeplane.Start(context.Background(), kc)
	if err != nil {
		return err
	}
	a.kube = cp
	a.pushImages(o)
	admin, err := os.ReadFile(cp.AdminKubeconfig())
	if err != nil {
		return err
	}
	k, err := registerKube(context.Background(), a.Store, admin, name, region, account, kubeplane.ClusterCIDR, true)
	if err != nil {
		return err
	}
	a.log.Info("Kubernetes control plane registered", "name", k.Name, "cluster_arn", k.ARN, "admin_kubeconfig", cp.AdminKubeconfig())
	return nil
}

// KubernetesServer is the URL of the local control plane's API server ("" when the server runs
// none).
func (a *App) KubernetesServer() string {
	if a.kube == nil {
		return ""
	}
	return a.kube.Server()
}

// kubeBin is the directory of the Kubernetes binaries: --kubernetes-bin, or bin/k8s beside this
// executable (bin/hale), where scripts/k8s-tools.sh links them.
func kubeBin(o Options) (string, error) {
	if o.KubernetesBin != "" {
		return o.KubernetesBin, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(exe), "k8s"), nil
}

// KubernetesRegistry is the host:port of the OCI registry the local control plane runs for
// Eks nodes with real kubelets ("" when there is none): users push images there, and pods name
// them as nodestack.RegistryName/<repository>:<tag>.
func (a *App) KubernetesRegistry() string {
	if a.kube == nil {
		return ""
	}
	return a.kube.Registry()
}

// ResetKubernetesWhenUnused has Close empty the local control plane (kubeplane.ControlPlane.Reset:
// its objects go, its credentials, address and registry stay) when this server has no cluster
// left, and reports whether it will. hale up calls it after deleting the cluster it brought
// up: what that cluster's users ran on it (PyTorchJobs, Deployments) must not outlive it.
func (a *App) ResetKubernetesWhenUnused(ctx context.Context) (bool, error) {
	if a.kube == nil {
		return false, nil
	}
	var n int
	err := a.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		n, err = tx.CountClusters()
		return err
	})
	if err != nil || n > 0 {
		return false, err
	}
	a.kubeReset = true
	return true, nil
}
