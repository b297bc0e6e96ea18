package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/containerimage"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/store"
	"github.com/spf13/cobra"
)

func newUpCommand() *cobra.Command {
	o := server.Options{Provider: string(local.Kind)}
	var nodesFrom string
	cmd := &cobra.Command{
		Use:   "up FILE",
		Short: "Start a server and bring a cluster up from a CreateCluster JSON file, in one command",
		Long: `Start a hale server with its embedded store and the local provider (every node a set of
Linux namespaces on this machine; needs root) or, with --provider static --hosts FILE
--agent-listen HOST:PORT, your own hosts over SSH (docs/own-machines.md), create the cluster described by FILE (the
document 'aws sagemaker create-cluster --cli-input-json' takes), show each node's progress,
and at InService say how to reach the cluster, then print its events as they happen
(scaling, replacements, faults, repairs, resumed jobs), one line each. Ctrl-C, or 'hale down'
from another terminal, tears it all down. Lifecycle scripts are read from --object-store,
which defaults to an s3/ directory beside FILE when there is one (s3://BUCKET/PREFIX is
DIR/BUCKET/PREFIX).

When FILE's orchestrator is Eks, hale up also runs a Kubernetes control plane (API server,
etcd, scheduler, controller manager, CoreDNS, an image registry, the Kubeflow training
operator; built by scripts/k8s-tools.sh), registered under the name, region and account of
FILE's Orchestrator.Eks.ClusterArn, and stops it at the end; every node runs a kubelet,
containerd and kube-proxy (--kubelets simulated: kwok plays them). 'hale update-kubeconfig'
gives kubectl a context for it.`,
		Example: `  sudo hale up examples/cluster.json
  sudo hale up examples/eks-cluster.json
  sudo hale up examples/static-cluster.json --provider static --hosts hosts.yaml --known-hosts known_hosts --agent-listen 10.0.0.10:7071`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("hale up runs the local provider, which needs root (it creates network namespaces, veths and bind mounts); run it as root")
			}
			if nodesFrom != string(local.Kind) {
				return fmt.Errorf("--nodes-from %q: this release of hale has the local provider only", nodesFrom)
			}
			path := strings.TrimPrefix(args[0], "file://")
			doc, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			in, err := api.DecodeInput(api.LookupOperation("CreateCluster"), doc)
			if err == nil {
				err = api.CheckCreateCluster(in.(*api.CreateClusterRequest))
			}
			if err != nil {
				return &exitError{Code: 252, Err: fmt.Errorf("%s: %w", path, err)}
			}
			req := in.(*api.CreateClusterRequest)
			eks := req.Orchestrator != nil && req.Orchestrator.Eks != nil
			if eks {
				if err := kubernetesFor(cmd, &o, req.Orchestrator.Eks.GetClusterArn()); err != nil {
					return &exitError{Code: 252, Err: fmt.Errorf("%s: %w", path, err)}
				}
			}
			if o.ObjectStore == "" {
				if d := filepath.Join(filepath.Dir(path), "s3"); isDir(d) {
					o.ObjectStore = d
				}
			}
			out := cmd.OutOrStdout()
			if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
				return err
			}
			logPath := filepath.Join(o.DataDir, "server.log")
			logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return err
			}
			defer logf.Close()
			o.Logger = slog.New(slog.NewTextHandler(logf, nil))
			app, err := server.Start(o)
			if err != nil {
				return err
			}
			defer app.Close()
			rememberSettings(o, app.ObjectStore)
			fmt.Fprintf(out, "hale server at %s (data %s, log %s); lifecycle scripts from %s\n", app.URL, o.DataDir, logPath, app.ObjectStore)
			if url, exp, err := app.ConsoleSignInURL(); err == nil {
				fmt.Fprintf(out, "Web console: %s\n  (this link signs in once, until %s; '%s console' prints another)\n", url, exp.Local().Format("15:04:05"), haleCommand())
			}
			switch {
			case eks && app.KubernetesRegistry() != "":
				fmt.Fprintf(out, "Kubernetes control plane %s at %s (API server, etcd, scheduler, controller manager, training operator, CoreDNS; a kubelet, containerd and kube-proxy on every node)\n",
					req.Orchestrator.Eks.GetClusterArn(), app.KubernetesServer())
				fmt.Fprintf(out, "Image registry at %s: push images there, name them %s/<repository>:<tag> in pods (%s is there; the server's log says when it is pushed)\n",
					app.KubernetesRegistry(), nodestack.RegistryName, containerimage.PyTorchImage)
			case eks:
				fmt.Fprintf(out, "Kubernetes control plane %s at %s (API server, etcd, scheduler, controller manager, training operator; kwok plays the nodes' kubelets)\n",
					req.Orchestrator.Eks.GetClusterArn(), app.KubernetesServer())
			}

			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			name := req.GetClusterName()
			start := time.Now()
			if _, err := app.Service.CreateCluster(ctx, req); err != nil {
				if !api.IsCode(err, api.CodeResourceInUse) {
					return &exitError{Code: 254, Err: err}
				}
				fmt.Fprintf(out, "cluster %s exists already; following it\n", name)
			} else {
				fmt.Fprintf(out, "CreateCluster %s: %d instance group(s)\n", name, len(req.InstanceGroups))
			}
			status, err := watch(ctx, out, app.Store, name, start)
			failed := status == api.ClusterStatusFailed
			switch {
			case err != nil && ctx.Err() == nil:
				return err
			case status == api.ClusterStatusInService:
				after := lastEventSeq(ctx, app.Store, name)
				printReach(out, app, name, o.DataDir, eks)
				fmt.Fprintf(out, "\nEvents of %s as they happen (all of them: hale list-cluster-events --cluster-name %s):\n", name, name)
				follow(ctx, out, app.Store, name, after)
			case failed:
				printFailure(out, app.Store, name)
			}
			fmt.Fprintf(out, "\ntearing down %s ...\n", name)
			if err := teardown(app, name); err != nil {
				return err
			}
			fmt.Fprintf(out, "down: cluster %s and its nodes are gone\n", name)
			if reset, err := app.ResetKubernetesWhenUnused(context.Background()); err != nil {
				return err
			} else if reset {
				fmt.Fprintln(out, "down: the Kubernetes control plane's objects go with it (its address, credentials and registry images stay for the next hale up)")
			}
			// A 'hale down' polling DescribeCluster (every 200 ms) gets to see the cluster gone
			// before this server stops, rather than a refused connection.
			time.Sleep(time.Second)
			if failed {
				return &exitError{Code: 1, Err: fmt.Errorf("cluster %s failed", name)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", server.DefaultListen, "address to serve the API on")
	f.StringVar(&o.DataDir, "data-dir", envOr("HALE_DATA_DIR", server.DefaultDataDir), "directory for the database, credentials and nodes (env HALE_DATA_DIR)")
	f.StringVar(&o.Region, "region", "us-west-2", "region written into cluster ARNs")
	f.StringVar(&o.AccountID, "account-id", "123456789012", "account id written into cluster ARNs")
	f.StringVar(&nodesFrom, "nodes-from", string(local.Kind), "where nodes come from: local (namespaces on this machine); for your own hosts give --provider static")
	addProviderFlags(f, &o)
	// hale up's own default: the s3/ beside FILE first (the server's is DATA_DIR/s3).
	f.Lookup("object-store").Usage = "directory serving s3://BUCKET/PREFIX lifecycle scripts as DIR/BUCKET/PREFIX (default: an s3/ directory beside FILE, else DATA_DIR/s3)"
	return cmd
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// watch prints each node's progress until the cluster is InService or Failed.
func watch(ctx context.Context, out io.Writer, st store.Store, name string, start time.Time) (api.ClusterStatus, error) {
	seen := map[string]string{}
	var last api.ClusterStatus
	for {
		var cl *store.Cluster
		var nodes []*store.Node
		err := st.Read(ctx, func(tx store.Tx) error {
			var err error
			if cl, err = tx.Cluster(name); err != nil {
				return err
			}
			nodes, err = tx.NodesOf(cl.ID)
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("cluster %s disappeared", name)
		}
		if err != nil {
			return "", err
		}
		stamp := fmt.Sprintf("[%5.1fs]", time.Since(start).Seconds())
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].LogicalID < nodes[j].LogicalID })
		for _, n := range nodes {
			line := fmt.Sprintf("%-14s %-20s %-15s %-9s %s", n.LogicalID, n.InstanceID, n.Details.PrivateIP, n.Status, n.StatusMessage)
			if seen[n.LogicalID] != line {
				seen[n.LogicalID] = line
				fmt.Fprintf(out, "%s %s\n", stamp, line)
			}
		}
		if cl.Status != last {
			fmt.Fprintf(out, "%s cluster %s is %s\n", stamp, name, cl.Status)
			last = cl.Status
		}
		if cl.Status == api.ClusterStatusInService || cl.Status == api.ClusterStatusFailed {
			return cl.Status, nil
		}
		select {
		case <-ctx.Done():
			return cl.Status, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printReach(out io.Writer, app *server.App, name, dataDir string, eks bool) {
	var nodes []*store.Node
	app.Store.Read(context.Background(), func(tx store.Tx) error {
		cl, err := tx.Cluster(name)
		if err == nil {
			nodes, err = tx.NodesOf(cl.ID)
		}
		return err
	})
	fmt.Fprintf(out, "\nCluster %s is InService with %s:\n", name, plural.Count(len(nodes), "node", "nodes"))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  GROUP\tINSTANCE ID\tHOSTNAME\tADDRESS\tTYPE")
	for _, n := range nodes {
		host, _, _ := strings.Cut(n.Details.PrivateDNSHostname, ".")
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", n.GroupName, n.InstanceID, host, n.Details.PrivateIP, n.InstanceType)
	}
	tw.Flush()
	host := ""
	if len(nodes) > 0 {
		host, _, _ = strings.Cut(nodes[len(nodes)-1].Details.PrivateDNSHostname, ".")
	}
	hale := haleCommand()
	execLine := fmt.Sprintf("%s exec --cluster-name %s --node-id %s", hale, name, host)
	logsLine := fmt.Sprintf("%s logs --cluster-name %s", hale, name)
	fmt.Fprintf(out, `
Reach it from another terminal:
  export HALE_DATA_DIR=%[1]s
  %[6]s list-cluster-nodes --cluster-name %[2]s --output table
  %-[7]*[8]s  # a shell on a node
  %-[7]*[9]s  # lifecycle and creation logs
  %-[7]*[10]s  # a new sign-in link of the web console
  AWS_SHARED_CREDENTIALS_FILE=%[4]s AWS_CONFIG_FILE=%[5]s aws --profile hale sagemaker describe-cluster --cluster-name %[2]s   # with the AWS CLI, if installed
`, dataDir, name, host, app.CredentialsFile, app.ConfigFile, hale, max(len(execLine), len(logsLine)), execLine, logsLine, hale+" console")
	if eks {
		fmt.Fprintf(out, `  %[1]s update-kubeconfig --cluster-name %[2]s   # a kubectl context for the cluster's control plane
  %[3]s get nodes -L %[4]s,%[5]s
`, hale, name, kubectl(), "sagemaker.amazonaws.com/node-health-status", "sagemaker.amazonaws.com/instance-group-name")
	}
	if url, exp, err := app.ConsoleSignInURL(); err == nil {
		fmt.Fprintf(out, "Web console (signs in once, until %s): %s\n", exp.Local().Format("15:04:05"), url)
	}
	fmt.Fprintf(out, "Ctrl-C here, or '%[1]s down --cluster-name %[2]s', tears the cluster down.\n", hale, name)
}

// kubernetesFor makes hale up run the local Kubernetes control plane for an Eks file,
// registered under the name in its ClusterArn, in the ARN's region and account unless the
// flags say otherwise (the cluster's own ARN is in the same region and account, as on AWS).
func kubernetesFor(cmd *cobra.Command, o *server.Options, arn string) error {
	// arn:aws:eks:<region>:<account>:cluster/<name>
	parts := strings.SplitN(arn, ":", 6)
	name, ok := "", len(parts) == 6 && parts[2] == "eks"
	if ok {
		name, ok = strings.CutPrefix(parts[5], "cluster/")
	}
	if !ok || name == "" {
		return fmt.Errorf("Orchestrator.Eks.ClusterArn %q: not an EKS cluster ARN (arn:aws:eks:REGION:ACCOUNT:cluster/NAME)", arn)
	}
	o.Kubernetes, o.KubernetesName = "local", name
	if !cmd.Flags().Changed("region") {
		o.Region = parts[3]
	}
	if !cmd.Flags().Changed("account-id") {
		o.AccountID = parts[4]
	}
	return nil
}

// kubectl is the kubectl to use: the one scripts/k8s-tools.sh built beside hale (the control
// plane's own version; one on PATH may be too old for it), else whatever is on PATH.
func kubectl() string {
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "kubectl"); isFile(p) {
			return p
		}
	}
	return "kubectl"
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func printFailure(out io.Writer, st store.Store, name string) {
	st.Read(context.Background(), func(tx store.Tx) error {
		cl, err := tx.Cluster(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\nCluster %s failed: %s\n", name, cl.FailureMessage)
		if s := cl.State.CreateLogStream; s != "" {
			events, _ := tx.LogEvents(agentserver.LogGroup(cl.Name, cl.ID), s, 0, 200)
			fmt.Fprintf(out, "\nLog stream %s:\n", s)
			for _, e := range events {
				fmt.Fprintf(out, "  %s\n", strings.ReplaceAll(e.Message, "\n", "\n  "))
			}
		}
		return nil
	})
}

// teardown deletes the cluster and waits until the reconcilers removed every node.
func teardown(app *server.App, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := app.Service.DeleteCluster(ctx, &api.DeleteClusterRequest{ClusterName: &name}); err != nil && !api.IsCode(err, api.CodeResourceNotFound) {
		return err
	}
	for {
		err := app.Store.Read(ctx, func(tx store.Tx) error { _, err := tx.Cluster(name); return err })
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s still not deleted after 2 minutes", name)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// haleCommand is how a printed hint should call hale so that it runs as printed: "hale" when
// that name on PATH is this very binary (scripts/setup.sh links it into /usr/local/bin), and
// this binary's absolute path otherwise.
func haleCommand() string {
	self, err := os.Executable()
	if err != nil {
		return "hale"
	}
	self, _ = filepath.EvalSymlinks(self)
	if onPath, err := exec.LookPath("hale"); err == nil {
		if p, err := filepath.EvalSymlinks(onPath); err == nil && p == self {
			return "hale"
		}
	}
	return self
}
