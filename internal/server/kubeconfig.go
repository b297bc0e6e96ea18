package server

import (
	"errors"
	"net/http"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/store"
)

// KubeconfigPath is hale's endpoint behind `hale update-kubeconfig`, as `aws eks
// update-kubeconfig` reads an EKS cluster's endpoint and certificate authority: GET with the
// query cluster-name=NAME (an Eks cluster's name, or a registered Kubernetes cluster's)
// answers a KubeAccess. It hands out an administrator's credentials, so a key needs
// sagemaker:CreateCluster, as for registering.
const KubeconfigPath = "/hale/kube/kubeconfig"

// KubeAccess is the answer: the Kubernetes cluster's ARN and a kubeconfig that reaches it as
// its administrator.
type KubeAccess struct {
	ClusterArn string
	Kubeconfig string
}

// serveKubeconfig answers KubeconfigPath. Only the control plane hale runs itself has
// credentials hale may hand out (its administrator's client certificate, from hale's own
// PKI); of a cluster registered with `hale kube register` hale keeps only its narrow
// ServiceAccount, so asking for one is a ValidationException that says to use the kubeconfig
// it was registered with.
func (h *Handler) serveKubeconfig(w http.ResponseWriter, r *http.Request, st store.Store, adminKubeconfig string) {
	var ans KubeAccess
	err := func() error {
		key, err := h.cfg.Verifier.Verify(r, nil)
		if err != nil {
			return err
		}
		if !auth.Allows(key, "sagemaker:CreateCluster") {
			return auth.AccessDenied(key, "sagemaker:CreateCluster", "*")
		}
		name := r.URL.Query().Get("cluster-name")
		if name == "" {
			return api.Errorf(api.CodeValidationException, "cluster-name: required (an Eks cluster's name, or a registered Kubernetes cluster's)")
		}
		var k *store.KubeCluster
		err = st.Read(r.Context(), func(tx store.Tx) error {
			ref := name
			if cl, err := tx.Cluster(name); err == nil {
				if cl.Spec.Orchestrator == nil || cl.Spec.Orchestrator.Eks == nil {
					return api.Errorf(api.CodeValidationException, "Cluster %s is not orchestrated by Kubernetes (Orchestrator.Eks); it has no kubeconfig", name)
				}
				ref = cl.Spec.Orchestrator.Eks.GetClusterArn()
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			var err error
			if k, err = tx.KubeCluster(ref); errors.Is(err, store.ErrNotFound) {
				return api.Errorf(api.CodeResourceNotFound, "No cluster or registered Kubernetes cluster named %s", ref)
			}
			return err
		})
		if err != nil {
			return err
		}
		ans.ClusterArn = k.ARN
		if !k.Local || adminKubeconfig == "" {
			return api.Errorf(api.CodeValidationException, "The Kubernetes cluster %s was registered with a kubeconfig of your own, and hale keeps only its narrow ServiceAccount (hale-controller): use the kubeconfig you registered it with", k.Name)
		}
		// The certificate and key are files under the data directory: embed them, so the
		// answer works wherever it is written.
		cfg, err := clientcmd.LoadFromFile(adminKubeconfig)
		if err == nil {
			err = clientcmdapi.FlattenConfig(cfg)
		}
		if err != nil {
			return err
		}
		b, err := clientcmd.Write(*cfg)
		ans.Kubeconfig = string(b)
		return err
	}()
	writeJSON(w, h, ans, err)
}
