package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/haleproject/hale/internal/server"
	"github.com/spf13/cobra"
)

func newKubeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "The Kubernetes clusters Eks clusters attach to (register, list)",
		Long: `An Eks cluster (CreateCluster with Orchestrator.Eks.ClusterArn) is attached to a Kubernetes
cluster registered with hale, as a HyperPod cluster is attached to an EKS cluster. hale server
--kubernetes local registers the control plane it runs itself; hale kube register registers any
other (kubeadm, k3s, EKS itself). hale keeps only a ServiceAccount of its own, bound to a narrow
ClusterRole (docs/kubernetes.md lists every permission and why).`,
	}
	cmd.AddCommand(newKubeRegisterCommand(), newKubeListCommand())
	return cmd
}

func newKubeRegisterCommand() *cobra.Command {
	var cf clientFlags
	var name, kubeconfig, podCIDR string
	cmd := &cobra.Command{
		Use:   "register --name NAME --kubeconfig FILE [--pod-cidr CIDR]",
		Short: "Register a Kubernetes cluster and print its ARN",
		Long: `Register the Kubernetes cluster FILE reaches under NAME, and print its ARN,
arn:aws:eks:<region>:<account>:cluster/NAME, the Orchestrator.Eks.ClusterArn of Eks clusters on
it. FILE's user must be able to create a ServiceAccount in kube-system, a ClusterRole and a
ClusterRoleBinding: hale applies its own (hale-controller, and hale-kube-proxy for the kube-proxy
of its nodes) and keeps only those ServiceAccounts' tokens. Real kubelets on hale's nodes join the
cluster with certificates from its own signers; --pod-cidr is the pods' network its controller
manager gives Nodes ranges of (its --cluster-cidr, 10.244.0.0/16 when not given). Registering a
name again updates it.`,
		Example: `  hale kube register --name training --kubeconfig ~/.kube/config`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" || kubeconfig == "" {
				return &exitError{Code: 2, Err: fmt.Errorf("--name and --kubeconfig are required")}
			}
			kc, err := os.ReadFile(kubeconfig)
			if err != nil {
				return &exitError{Code: 2, Err: err}
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			body, _ := json.Marshal(server.KubeRegistration{Name: name, Kubeconfig: string(kc), PodCIDR: podCIDR})
			out, err := c.Post(cmd.Context(), server.KubePath, body)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			var info server.KubeClusterInfo
			if err := json.Unmarshal(out, &info); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), info.ClusterArn)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the cluster's name (its EKS name: letters, digits, - and _)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "a kubeconfig whose current context reaches the cluster as an administrator")
	cmd.Flags().StringVar(&podCIDR, "pod-cidr", "", "the pods' network, of which the cluster's controller manager gives each Node a range (its --cluster-cidr; default 10.244.0.0/16)")
	cf.add(cmd)
	return cmd
}

func newKubeListCommand() *cobra.Command {
	var cf clientFlags
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the registered Kubernetes clusters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			out, err := c.Get(cmd.Context(), server.KubePath, nil)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			if output == "json" {
				fmt.Fprintln(cmd.OutOrStdout(), string(out))
				return nil
			}
			var list server.KubeClusters
			if err := json.Unmarshal(out, &list); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCLUSTER ARN\tSERVER\tLOCAL")
			for _, k := range list.Clusters {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", k.Name, k.ClusterArn, k.Server, k.Local)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&output, "output", "table", "table or json")
	cf.add(cmd)
	return cmd
}
