package main

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/containerimage"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/service"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newServerCommand() *cobra.Command {
	var o server.Options
	var debug bool
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the SageMaker cluster API (AWS JSON 1.1, SigV4) from an embedded store or PostgreSQL",
		Long: `Serve the SageMaker cluster API over the AWS JSON 1.1 protocol.

State lives in DATA_DIR/hale.db (SQLite), or in a PostgreSQL database (--store postgres://...).
On first start the server creates an admin access key
and writes it as the AWS profile "hale" to DATA_DIR/credentials, with DATA_DIR/config holding
the profile's region and endpoint_url, so that

  AWS_SHARED_CREDENTIALS_FILE=DATA_DIR/credentials AWS_CONFIG_FILE=DATA_DIR/config \
    aws --profile hale sagemaker list-clusters

works with no other step. The hale CLI reads those files by itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			// What logs through the default logger (the store waiting for its database)
			// logs as the server does.
			slog.SetDefault(o.Logger)
			recallSettings(cmd.Flags(), &o)
			app, err := server.Start(o)
			if err != nil {
				return err
			}
			rememberSettings(o, app.ObjectStore)
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			select {
			case <-sig:
				o.Logger.Info("shutting down")
				return app.Close()
			case err := <-app.Lost:
				// Another server leads now, or the store was out of reach for longer than the
				// lease. The reconcilers' state was the tenure's: the server starts over, as
				// the same process (same pid, arguments and environment), and stands as a
				// candidate again; it waits for its database if it has to.
				o.Logger.Error("no longer leading; starting over as a candidate", "error", err)
				if cerr := app.Close(); cerr != nil {
					o.Logger.Warn("stopping", "error", cerr)
				}
				exe, xerr := os.Executable()
				if xerr != nil {
					return errors.Join(err, xerr)
				}
				return errors.Join(err, syscall.Exec(exe, os.Args, os.Environ()))
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", server.DefaultListen, "address to serve the API on (host:port)")
	f.StringVar(&o.DataDir, "data-dir", envOr("HALE_DATA_DIR", server.DefaultDataDir), "directory for the database and the admin credentials (env HALE_DATA_DIR)")
	f.StringVar(&o.Store, "store", envOr("HALE_STORE", ""), "the database: empty for DATA_DIR/hale.db (SQLite, embedded), or a PostgreSQL database's postgres://user:password@host:port/db?sslmode=... URL (docs/architecture.md, Store) (env HALE_STORE)")
	f.StringVar(&o.Region, "region", service.DefaultRegion, "region written into cluster ARNs")
	f.StringVar(&o.AccountID, "account-id", service.DefaultAccountID, "12-digit account id written into cluster ARNs")
	f.IntVar(&o.MaxClusters, "max-clusters", service.DefaultMaxClusters, "clusters allowed before CreateCluster answers ResourceLimitExceeded")
	f.IntVar(&o.MaxInstancesPerCluster, "max-instances-per-cluster", service.DefaultMaxInstancesPerCluster, "instances one cluster may ask for")
	f.Float64Var(&o.Rate, "rate-limit", server.DefaultRate, "requests per second per access key before ThrottlingException (negative: no limit)")
	f.IntVar(&o.Burst, "rate-burst", server.DefaultBurst, "request burst per access key")
	f.BoolVar(&debug, "debug", false, "log every request")
	f.StringVar(&o.Kubernetes, "kubernetes", "", "local: run a Kubernetes control plane (API server, controller manager, scheduler, etcd, kwok) for Eks clusters; its binaries come from scripts/k8s-tools.sh")
	f.StringVar(&o.KubernetesName, "kubernetes-name", server.DefaultKubernetesName, "the name the local control plane is registered under (its ARN's last part)")
	addProviderFlags(f, &o)
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// addProviderFlags are the flags of the provider and the reconcilers, shared by hale server and
// hale up.
func addProviderFlags(f *pflag.FlagSet, o *server.Options) {
	f.StringVar(&o.Provider, "provider", o.Provider, "provider that launches instances: local (Linux namespaces on this machine; needs root), static (your hosts over SSH: --hosts), or empty for none")
	f.StringVar(&o.Kubelets, "kubelets", server.KubeletsReal, "how the local provider's Eks nodes run their kubelets: real (a kubelet, containerd and kube-proxy on each node, from scripts/k8s-tools.sh; docs/kubernetes.md) or simulated (kwok: Nodes whose pods run nothing, for the 1,000-Node scale benchmark)")
	f.StringVar(&o.MetricsToken, "metrics-token", "", "require Authorization: Bearer TOKEN on /metrics (Prometheus cannot sign with SigV4; default: /metrics is open)")
	f.StringVar(&o.MetricsListen, "metrics-listen", "", "serve /metrics on this host:port too (it is always on the API listener)")
	f.StringVar(&o.EventsWebhook, "events-webhook", "", "POST every event (EventBridge-shaped: cluster state changes, node health, cluster events) to this URL, one JSON event per request with its id in the Idempotency-Key header; retried until it answers 2xx, kept across restarts")
	f.StringVar(&o.EventsFile, "events-file", "", "append every event (as --events-webhook sends it) to this file as JSON lines, synced to disk")
	f.StringVar(&o.Hosts, "hosts", "", "static provider: the hosts file (docs/own-machines.md; check it with hale hosts validate)")
	f.StringVar(&o.KnownHosts, "known-hosts", "", "static provider: the known_hosts file hosts' keys are checked against (default ~/.ssh/known_hosts)")
	f.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "static provider: add the key of a host known_hosts does not name (first contact); a changed key is always refused")
	f.IntVar(&o.AgentPort, "agent-port", server.DefaultAgentPort, "port agents connect to, on the provider's network")
	f.StringVar(&o.AgentListen, "agent-listen", "", "serve agents (over mutual TLS) on this host:port, which is what agents are given and the server certificate names (default: the provider's agent address and --agent-port; the static provider needs it: an address the hosts reach)")
	f.StringVar(&o.AgentEndpoints, "agent-endpoints", "", "servers on one PostgreSQL store: every server's agent endpoint, host:port comma-separated, which new nodes' agents are given so they find whichever server leads (default: this server's own; docs/reliability.md)")
	f.StringVar(&o.ProviderDir, "provider-dir", "", "the provider's records of its instances (default DATA_DIR/PROVIDER); servers on one PostgreSQL store name the same directory (the local provider needs it there)")
	f.DurationVar(&o.AgentCertLifetime, "agent-cert-lifetime", agentca.DefaultClientLifetime, "how long agents' client certificates are valid (renewed when a third is left)")
	f.MarkHidden("agent-cert-lifetime")
	f.StringVar(&o.LocalSubnet, "local-subnet", local.DefaultSubnet, "local provider: the private subnet nodes get addresses from")
	f.StringVar(&o.LocalBridge, "local-bridge", local.DefaultBridge, "local provider: the bridge the nodes are attached to")
	f.StringVar(&o.ObjectStore, "object-store", "", "directory serving s3://BUCKET/PREFIX lifecycle scripts as DIR/BUCKET/PREFIX (default DATA_DIR/s3)")
	f.StringVar(&o.ObjectStoreEndpoint, "object-store-endpoint", "", "fetch lifecycle scripts from this S3-compatible endpoint instead (\"aws\" for AWS S3; credentials from the AWS environment)")
	f.StringVar(&o.KubernetesBin, "kubernetes-bin", "", "directory of the Kubernetes control plane's binaries for Eks clusters (default: k8s/ beside the hale binary, where scripts/k8s-tools.sh links them)")
	f.StringVar(&o.PyTorchImage, "pytorch-image", image.PyTorchDir, "with --kubelets real: the directory of the PyTorch container image's root (hale image build-pytorch), pushed into the registry as "+containerimage.PyTorchImage+"; \"none\": push nothing")
	f.StringVar(&o.DefaultImage, "default-image", image.DefaultDir, "local provider: the directory of the default image the nodes of groups with no ImageId boot from (hale image build-default); \"host\": run them on this machine's root instead")
	f.StringVar(&o.ImageCache, "image-cache", "", "the image build cache: downloaded packages and one built root per image spec; servers on one machine that name the same directory build each spec once between them; safe to delete while no build runs (default DATA_DIR/images/cache)")
	f.StringVar(&o.ImageMirror, "image-mirror", "", "the Debian archive node images are built from (default "+image.DefaultMirror+"; hale image build)")
	f.DurationVar(&o.BootTimeout, "boot-timeout", controller.DefaultBootTimeout, "how long a new instance's agent has to register")
	f.DurationVar(&o.RebootTimeout, "reboot-timeout", 0, "how long a rebooted instance has to come back (default by instance type: 20m for GPU, Trainium and Inferentia types, 10m for others; never less than twice the node's own last reboot)")
	f.DurationVar(&o.LifecycleTimeout, "lifecycle-timeout", controller.DefaultLifecycleTimeout, "how long lifecycle scripts may run")
	f.DurationVar(&o.DeepHealthCheckDuration, "deep-health-check-duration", controller.DefaultDeepHealthCheckDuration, "how long the InstanceStress deep health check loads a node")
	f.DurationVar(&o.EksEvictTimeout, "eks-drain-timeout", time.Minute, "how long a drain of an Eks node honours its pods' PodDisruptionBudgets")
	f.StringVar(&o.EksDrainPolicy, "eks-drain-policy", eks.DrainForce, "what a software update does with an Eks node whose pods' budgets allow no eviction within --eks-drain-timeout: force (delete them) or skip (leave the node on its image)")
	f.Float64Var(&o.ConnectivityMBps, "connectivity-threshold", controller.DefaultConnectivityMBps, "bandwidth in MB/s the InstanceConnectivity deep health check must reach")
	f.StringVar(&o.AlarmsPrometheus, "alarms-prometheus", "", "Prometheus server (base URL, e.g. http://127.0.0.1:9090) whose firing alerts are the alarms UpdateClusterSoftware's AutoRollbackConfiguration names: an update rolls back when an alert named by an AlarmName fires (default: such alarms are not watched)")
	f.DurationVar(&o.AlarmInterval, "alarm-interval", controller.DefaultAlarmInterval, "how often a software update's rollback alarms are read")
	f.Float64Var(&o.RepairMaxShare, "repair-max-share", controller.DefaultRepairMaxShare, "share of a cluster's nodes (0-1, one node at least) in automatic repair at once; more wait, drained")
	f.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", agentserver.DefaultHeartbeatInterval, "agents' heartbeat interval")
	f.IntVar(&o.MissedHeartbeats, "missed-heartbeats", agentserver.DefaultMissedHeartbeats, "missed heartbeats before a node is unreachable")
}
