package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/haleproject/hale/internal/server"
)

func newUpdateKubeconfigCommand() *cobra.Command {
	var cf clientFlags
	var name, file, alias string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "update-kubeconfig --cluster-name NAME [--kubeconfig FILE]",
		Short: "Write a kubeconfig entry for an Eks cluster's Kubernetes control plane, as aws eks update-kubeconfig does",
		Long: `Add (or update) a cluster, user and context in FILE for the Kubernetes control plane the Eks
cluster NAME is attached to (NAME may also be a registered Kubernetes cluster's name), and make
it the current context, as 'aws eks update-kubeconfig' does for EKS: entries are named by the
cluster's ARN (the context by --alias when given). FILE is --kubeconfig, else the first path
in $KUBECONFIG, else ~/.kube/config; other entries in it are kept.

hale hands out credentials only for the control plane it runs itself (hale server --kubernetes
local, hale up of an Eks file): its administrator's client certificate. Of a cluster registered
with 'hale kube register' hale keeps only its own narrow ServiceAccount: use the kubeconfig you
registered it with.`,
		Example: `  hale update-kubeconfig --cluster-name eks-demo
  kubectl get nodes -L sagemaker.amazonaws.com/node-health-status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return &exitError{Code: 2, Err: fmt.Errorf("--cluster-name is required")}
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			body, err := c.Get(cmd.Context(), server.KubeconfigPath, url.Values{"cluster-name": {name}})
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			var access server.KubeAccess
			if err := json.Unmarshal(body, &access); err != nil {
				return err
			}
			ctxName := cmp.Or(alias, access.ClusterArn)
			given, err := clientcmd.Load([]byte(access.Kubeconfig))
			if err != nil {
				return err
			}
			if dryRun {
				b, err := clientcmd.Write(*renamed(given, access.ClusterArn, ctxName))
				if err == nil {
					_, err = cmd.OutOrStdout().Write(b)
				}
				return err
			}
			path := kubeconfigPath(file)
			verb, err := mergeKubeconfig(path, given, access.ClusterArn, ctxName)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s context %s in %s\n", verb, ctxName, path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "cluster-name", "", "the Eks cluster (or registered Kubernetes cluster) to reach")
	f.StringVar(&file, "kubeconfig", "", "the kubeconfig file to write (default: the first path in $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&alias, "alias", "", "the context's name (default: the Kubernetes cluster's ARN)")
	f.BoolVar(&dryRun, "dry-run", false, "print the entries instead of writing them")
	cf.add(cmd)
	return cmd
}

// kubeconfigPath is the file update-kubeconfig writes: the flag, else the first path in
// $KUBECONFIG, else ~/.kube/config (kubectl's own order for writing).
func kubeconfigPath(flag string) string {
	if flag != "" {
		return flag
	}
	if env := filepath.SplitList(os.Getenv("KUBECONFIG")); len(env) > 0 && env[0] != "" {
		return env[0]
	}
	return clientcmd.RecommendedHomeFile
}

// renamed is the current context of given, as one cluster and one user named arn and a
// context named ctxName.
func renamed(given *clientcmdapi.Config, arn, ctxName string) *clientcmdapi.Config {
	out := clientcmdapi.NewConfig()
	cur := given.Contexts[given.CurrentContext]
	if cur == nil {
		return out
	}
	out.Clusters[arn] = given.Clusters[cur.Cluster]
	out.AuthInfos[arn] = given.AuthInfos[cur.AuthInfo]
	out.Contexts[ctxName] = &clientcmdapi.Context{Cluster: arn, AuthInfo: arn}
	out.CurrentContext = ctxName
	return out
}

// mergeKubeconfig writes given's current context into the kubeconfig at path (made when
// missing), keeping its other entries, and makes it current; verb says whether the context is
// new ("Added new") or was there ("Updated").
func mergeKubeconfig(path string, given *clientcmdapi.Config, arn, ctxName string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cfg = clientcmdapi.NewConfig()
	case err != nil:
		return "", err
	}
	verb := "Added new"
	if _, ok := cfg.Contexts[ctxName]; ok {
		verb = "Updated"
	}
	add := renamed(given, arn, ctxName)
	if add.CurrentContext == "" {
		return "", fmt.Errorf("the kubeconfig hale answered has no current context")
	}
	cfg.Clusters[arn], cfg.AuthInfos[arn], cfg.Contexts[ctxName] = add.Clusters[arn], add.AuthInfos[arn], add.Contexts[ctxName]
	cfg.CurrentContext = ctxName
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return verb, clientcmd.WriteToFile(*cfg, path)
}
