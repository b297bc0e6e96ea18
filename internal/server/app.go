package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haleproject/hale/internal/alarms"

	"github.com/haleproject/hale/internal/console"
	"github.com/haleproject/hale/internal/kubeplane"
	"github.com/haleproject/hale/internal/leader"
	"github.com/haleproject/hale/internal/metrics"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/orchestrator/slurm"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/google/uuid"
	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/eventbridge"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/lifecycle"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/service"
	"github.com/haleproject/hale/internal/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// Defaults for Options.
const (
	DefaultListen  = "127.0.0.1:7070"
	DefaultDataDir = "/var/lib/hale"
	// Profile is the AWS profile name under which the server writes its admin key.
	Profile = "hale"
)

// Options configure a running server (hale server's flags).
type Options struct {
	Listen  string // host:port; port 0 picks a free one
	DataDir string // holds hale.db and the admin credentials
	// Store is the database: "" or StoreSQLite for DataDir/hale.db (embedded, one server), or
	// a postgres:// URL (OpenStore).
	Store                  string
	Region                 string
	AccountID              string
	MaxClusters            int
	MaxInstancesPerCluster int
	Rate                   float64
	Burst                  int
	CheckResponses         bool
	Logger                 *slog.Logger

	// Provider is "" (none: clusters wait in Creating) or "local" (namespaces on this machine;
	// needs root).
	Provider string
	// AgentPort is where agents connect, on the provider's agent address (the local bridge),
	// when AgentListen is not set.
	AgentPort int
	// AgentListen, when set, is the host:port to serve agents on, whatever the provider: where
	// agents on other machines connect. Its address is what agents are given (hale agent
	// --server) and what the server's certificate names; an unspecified host (0.0.0.0) gives
	// them the provider's agent address, or this machine's first address.
	AgentListen string
	// AgentEndpoints, when set, is what nodes' agents are given to connect to: every server's
	// agent endpoint (host:port, comma-separated) when several servers share a PostgreSQL
	// store, so an agent finds whichever leads (docs/reliability.md). Default: this server's.
	AgentEndpoints string
	// ProviderDir is where the provider keeps its records of the instances (default
	// DATA_DIR/<provider>). Servers on one store name the same directory: whichever leads
	// knows every instance. The local provider needs it on a PostgreSQL store.
	ProviderDir string
	// MetricsToken, when set, is the bearer token /metrics requires; MetricsListen, when set,
	// serves /metrics on that host:port too (for a Prometheus that should not reach the API).
	MetricsToken  string
	MetricsListen string
	// EventsWebhook, when set, is a URL every event for other systems is POSTed to (one
	// EventBridge-shaped JSON event per request, its id in the Idempotency-Key header), retried
	// until it answers 2xx; EventsFile, when set, is a file they are appended to as JSON lines.
	// Both may be set (internal/eventbridge, docs/observability.md).
	EventsWebhook string
	EventsFile    string
	// EventsMinBackoff and EventsMaxBackoff bound the wait between a failed delivery and its
	// retry (zero: eventbridge's defaults).
	EventsMinBackoff time.Duration
	EventsMaxBackoff time.Duration
	// Hosts is the static provider's hosts file; KnownHosts the known_hosts file it checks host
	// keys against (default ~/.ssh/known_hosts), AcceptNewHostKeys adds unknown hosts' keys.
	Hosts             string
	KnownHosts        string
	AcceptNewHostKeys bool
	// AgentCertLifetime is how long agents' client certificates are valid (0:
	// agentca.DefaultClientLifetime); agents renew theirs when a third is left.
	AgentCertLifetime time.Duration
	// LocalSubnet and LocalBridge configure the local provider's network.
	LocalSubnet string
	LocalBridge string
	// AgentBinary is the hale executable nodes run as their agent (default: this one).
	AgentBinary string
	// ObjectStore maps s3://BUCKET/PREFIX to ObjectStore/BUCKET/PREFIX for lifecycle scripts
	// (default DATA_DIR/s3).
	ObjectStore string
	// ObjectStoreEndpoint, when set, fetches lifecycle scripts from that S3-compatible endpoint
	// instead (credentials from the AWS SDK's usual chain; "aws" means AWS S3 itself).
	ObjectStoreEndpoint string
	// Timeouts and heartbeats; zero takes the defaults of internal/controller and agentserver.
	BootTimeout      time.Duration
	LifecycleTimeout time.Duration
	// RebootTimeout: see controller.Config (0: by instance type).
	RebootTimeout time.Duration
	// DeepHealthCheckDuration and ConnectivityMBps: see controller.Config.
	DeepHealthCheckDuration time.Duration
	ConnectivityMBps        float64
	// EksEvictTimeout is how long an Eks drain honours PodDisruptionBudgets before it forces
	// its pods out (eks.Config.EvictTimeout: 60 s when zero; tests shorten it).
	EksEvictTimeout time.Duration
	// EksDrainPolicy is what a software update does with a node whose pods' budgets allow no
	// eviction within EksEvictTimeout: eks.DrainForce (the default) or eks.DrainSkip.
	EksDrainPolicy    string
	HeartbeatInterval time.Duration
	MissedHeartbeats  int
	ReconnectGrace    time.Duration

	// AlarmsPrometheus, when set, is the base address of the Prometheus server whose firing
	// alerts are the alarms UpdateClusterSoftware's AutoRollbackConfiguration names
	// (internal/alarms); AlarmInterval how often they are read (controller.DefaultAlarmInterval
	// when zero).
	AlarmsPrometheus string
	AlarmInterval    time.Duration

	// RepairMaxShare and RepairBurstNodes: see controller.Config (RepairMaxShare, BurstNodes:
	// -1 turns the burst pause off, for benchmarks that inject one fault on many nodes).
	RepairMaxShare   float64
	RepairBurstNodes int

	// Kubernetes is "" or "local": a Kubernetes control plane started with the server
	// (internal/kubeplane), its state under DataDir/kubernetes, registered as KubernetesName
	// (DefaultKubernetesName when empty) for Eks clusters. KubernetesBin holds its binaries
	// (default: the k8s directory beside this executable, where scripts/k8s-tools.sh links them).
	Kubernetes     string
	KubernetesName string
	KubernetesBin  string
	// Kubelets is how the local provider's Eks nodes run their kubelets: "simulated" (or "":
	// kwok plays them, no pod runs) or "real" (a kubelet and containerd on each node, from
	// KubernetesBin; the control plane then listens on the provider's bridge, issue 28).
	Kubelets string

	// ImageMirror is the Debian archive node images are built from (image.DefaultMirror when
	// empty); images live in DataDir/images (docs/images.md).
	ImageMirror string
	// ImageCache is the image build cache (image.Cache: downloaded packages and finished roots;
	// DataDir/images/cache when empty). Servers on one machine that name the same directory
	// build each image spec once between them, for each state of the archive.
	ImageCache string

	// DefaultImage is the directory of hale's default image, which the local provider's nodes
	// of groups with no ImageId (or "default") boot from: image.DefaultDir when empty, the
	// machine's, built by scripts/setup.sh. "host" runs them on the host's root instead, as
	// before images; so does a directory with no built image, with a warning event per node
	// (docs/images.md). Other providers' nodes run on their hosts' own root.
	DefaultImage string

	// PyTorchImage is the directory of the PyTorch container image's root (image.PyTorchDir
	// when empty, the machine's, built by scripts/setup.sh: hale image build-pytorch), which a
	// server whose Eks nodes run real kubelets pushes into its registry as
	// containerimage.PyTorchImage at start; "none" pushes nothing.
	PyTorchImage string
}

// DefaultImageHost is the value of Options.DefaultImage (hale server --default-image) that runs
// the nodes of default groups on the host's root.
const DefaultImageHost = "host"

// DefaultAgentPort is the port agents connect to.
const DefaultAgentPort = 7071

// App is a running server: store, service, reconcilers and HTTP listener.
type App struct {
	// URL is the endpoint to give clients, e.g. http://127.0.0.1:7070.
	URL string
	// CredentialsFile and ConfigFile are the AWS shared files holding the [hale] profile.
	CredentialsFile string
	ConfigFile      string
	Store           store.Store
	Service         *service.Service
	// Provider is the provider in use (nil without one); Agents the agent server.
	Provider provider.Provider
	// Metrics is the server's Prometheus metrics, served at /metrics (docs/observability.md);
	// MetricsURL is where --metrics-listen serves them too ("" without it).
	Metrics    *metrics.Server
	MetricsURL string
	Agents     *agentserver.Server
	// Events delivers the events for other systems (nil without --events-webhook or
	// --events-file).
	Events *eventbridge.Deliverer
	// Console is the web console at /console (docs/console.md).
	Console *console.Console
	// AgentEndpoint is where agents connect ("" without a provider).
	AgentEndpoint string
	// AgentCA is the agent channel's CA (DATA_DIR/agent-ca; on PostgreSQL, in the store, one CA
	// for every server: agentcakeeper.go): it issues the agents' client certificates, and
	// Revoke shuts an instance out (a provider's quarantine).
	AgentCA *agentca.CA
	// ObjectStore is the directory lifecycle script buckets are read from.
	ObjectStore string
	// Images is the node image registry (DATA_DIR/images), behind `hale image` and the
	// instance groups' ImageId.
	Images *image.Registry
	// Lost receives leader.ErrLost when this server led the reconcilers and lost their lease
	// (internal/leader): the reconcilers stopped for good, and the server should start over
	// (`hale server` re-executes itself) to stand as a candidate again. Servers on one store
	// run the reconcilers one at a time; the others stand by and answer the API.
	Lost    chan error
	leading atomic.Bool

	srv        *http.Server
	metricsSrv *http.Server // --metrics-listen
	grpc       *grpc.Server
	cancel     context.CancelFunc
	// stopReconcilers ends the reconcilers' rounds and waits for the one in progress: Close
	// calls it before it stops the agents' streams, so that no round judges the nodes whose
	// connections the server's own stop ended.
	stopReconcilers func()
	closeOnce       sync.Once
	closeErr        error
	lock            *dataDirLock
	dataDir         string
	kube            *kubeplane.ControlPlane // the local control plane (--kubernetes local)
	kubeReset       bool                    // Close resets it (ResetKubernetesWhenUnused)
	eventsFile      *eventbridge.File       // --events-file, closed last
	wg              sync.WaitGroup
	log             *slog.Logger
}

// Start opens the store in o.DataDir, makes sure an admin access key exists (creating one on
// first start and writing it as the [hale] profile of DataDir/credentials), starts the
// reconcilers and serves the API on o.Listen. Close stops it.
func Start(o Options) (*App, error) {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	// A server waits for its database as long as it takes (PostgreSQL restarting, or out of
	// reach): without it there is nothing to serve.
	st, err := OpenStore(context.Background(), o.DataDir, o.Store)
	if err != nil {
		lock.release()
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		st.Close()
		lock.release()
		return nil, fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	a := &App{
		URL:             "http://" + ln.Addr().String(),
		CredentialsFile: filepath.Join(o.DataDir, "credentials"),
		ConfigFile:      filepath.Join(o.DataDir, "config"),
		Store:           st,
		log:             log,
		lock:            lock,
		dataDir:         o.DataDir,
	}
	fail := func(err error) (*App, error) {
		if a.eventsFile != nil {
			a.eventsFile.Close()
		}
		if c, ok := a.Provider.(interface{ Close() error }); ok {
			c.Close()
		}
		if a.kube != nil {
			a.kube.Stop()
		}
		if a.Images != nil {
			a.Images.Close()
		}
		ln.Close()
		st.Close()
		lock.release()
		return nil, err
	}
	if err := a.startEvents(o, st); err != nil {
		return fail(err)
	}
	defaultDir := ""
	if providerCaps(o).Images && o.DefaultImage != DefaultImageHost {
		defaultDir = cmp.Or(o.DefaultImage, image.DefaultDir)
		if _, err := image.ReadDefault(defaultDir); err != nil {
			log.Warn("the nodes of default groups will run on the host's root file system, not on their own", "error", err)
		}
	}
	if a.Images, err = image.Open(image.Options{Dir: filepath.Join(o.DataDir, "images"), Mirror: o.ImageMirror, Cache: o.ImageCache, DefaultDir: defaultDir, Logger: log}); err != nil {
		return fail(err)
	}
	if o.ObjectStore == "" {
		o.ObjectStore = filepath.Join(o.DataDir, "s3")
	}
	a.ObjectStore = o.ObjectStore
	if err := os.MkdirAll(o.ObjectStore, 0o755); err != nil {
		return fail(err)
	}
	var ctl *controller.Controller
	notify := func(id string) { ctl.Enqueue(id) }
	onFinding := func(ctx context.Context, clusterID, instanceID string, f *agentproto.Finding) {
		a.Metrics.ObserveFinding(f.GetFault(), f.GetAction())
		ctl.HandleFinding(ctx, clusterID, instanceID, f)
	}
	onAutoResume := func(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
		return ctl.AutoResume(ctx, clusterID, req)
	}
	caOpts := agentca.Options{ClientLifetime: o.AgentCertLifetime}
	if IsPostgres(o.Store) {
		// Every server on the store is one agent CA: the agents trust whichever leads.
		caOpts.Keeper = storeKeeper{st}
	}
	if a.AgentCA, err = agentca.Open(filepath.Join(o.DataDir, "agent-ca"), caOpts); err != nil {
		return fail(err)
	}
	agentCfg := agentserver.Config{Store: st, CA: a.AgentCA, HeartbeatInterval: o.HeartbeatInterval,
		MissedHeartbeats: o.MissedHeartbeats, ReconnectGrace: o.ReconnectGrace, Notify: notify, OnFinding: onFinding,
		OnAutoResume: onAutoResume, Logger: log}
	if IsPostgres(o.Store) {
		agentCfg.Leading = a.Leading // the agents are the leader's; a standby sends them on
	}
	a.Agents = agentserver.New(agentCfg)
	a.Metrics = metrics.New(st, a.Agents)
	var agentLn net.Listener
	if a.Provider, err = a.openProvider(&o); err != nil {
		return fail(err)
	}
	agentListen := o.AgentListen
	if agentListen == "" && a.Provider != nil {
		agentListen = net.JoinHostPort(a.Provider.AgentAddress(), fmt.Sprint(o.AgentPort))
	}
	var agentTLS *tls.Config
	if agentListen != "" {
		if agentLn, err = net.Listen("tcp", agentListen); err != nil {
			return fail(fmt.Errorf("listen for agents on %s: %w", agentListen, err))
		}
		var hosts []string
		a.AgentEndpoint, hosts = agentEndpoint(agentLn.Addr(), a.Provider)
		if agentTLS, err = a.AgentCA.ServerTLS(hosts); err != nil {
			agentLn.Close()
			return fail(err)
		}
	}
	var source lifecycle.Source = lifecycle.DirSource{Root: o.ObjectStore}
	if o.ObjectStoreEndpoint != "" {
		awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
		if err != nil {
			return fail(fmt.Errorf("object store %s: %w", o.ObjectStoreEndpoint, err))
		}
		endpoint := o.ObjectStoreEndpoint
		if endpoint == "aws" {
			endpoint = ""
		}
		source = lifecycle.NewS3Source(awsCfg, endpoint)
		a.ObjectStore = o.ObjectStoreEndpoint
	}
	var alarmSource alarms.Source
	if o.AlarmsPrometheus != "" {
		p, err := alarms.NewPrometheus(o.AlarmsPrometheus)
		if err != nil {
			return fail(err)
		}
		alarmSource = p
	}
	revoke := func(instanceID, reason string) {
		if err := a.AgentCA.Revoke(instanceID, reason); err != nil {
			log.Error("revoke the agent certificates of an instance", "instance_id", instanceID, "error", err)
		}
		a.Agents.Disconnect(instanceID)
	}
	var imageRoot func(string) (string, error)
	var releases slurm.ImageReleases
	if a.Images != nil {
		imageRoot, releases = a.Images.Root, a.Images
	}
	// The orchestrators, in the order a cluster's is chosen: the controller binds them, and the
	// API asks the same ones to check their part of each request.
	orchestrators := []orchestrator.Orchestrator{
		eks.New(a.eksConfig(o)),                   // Eks clusters (local nodes' kubelets: kwok plays them, or real ones)
		slurm.New(slurm.Config{Images: releases}), // every other cluster
	}
	ctl = controller.New(controller.Config{Store: st, Provider: a.Provider, Agents: a.Agents,
		AgentServer: cmp.Or(o.AgentEndpoints, a.AgentEndpoint), AgentCA: a.AgentCA.CertPEM(), Revoke: revoke, Observer: a.Metrics, ImageRoot: imageRoot,
		Lifecycle: source, Logger: log, Orchestrators: orchestrators,
		BootTimeout: o.BootTimeout, LifecycleTimeout: o.LifecycleTimeout, RebootTimeout: o.RebootTimeout,
		DeepHealthCheckDuration: o.DeepHealthCheckDuration, ConnectivityMBps: o.ConnectivityMBps,
		RepairMaxShare: o.RepairMaxShare, BurstNodes: o.RepairBurstNodes, Alarms: alarmSource, AlarmInterval: o.AlarmInterval})
	a.Service = service.New(st, service.Config{
		Region: o.Region, AccountID: o.AccountID, MaxClusters: o.MaxClusters,
		MaxInstancesPerCluster: o.MaxInstancesPerCluster, Provider: provider.Kind(o.Provider), Capabilities: providerCaps(o), RealKubelets: realKubelets(o), Notify: ctl.Enqueue,
		Orchestrators: orchestrators, Images: a.Images,
	})
	cfg := a.Service.Config()
	if err := a.ensureAdminKey(cfg.Region); err != nil {
		return fail(err)
	}
	if err := a.startKubernetes(o, cfg.Region, cfg.AccountID); err != nil {
		return fail(err)
	}
	verifier := &auth.Verifier{Service: "sagemaker", Keys: func(ctx context.Context, id string) (*store.AccessKey, error) {
		var k *store.AccessKey
		err := st.Read(ctx, func(tx store.Tx) error {
			var err error
			k, err = tx.AccessKey(id)
			return err
		})
		return k, err
	}}
	handler := New(Config{Service: a.Service, Verifier: verifier, Logger: log, Rate: o.Rate, Burst: o.Burst, CheckResponses: o.CheckResponses,
		Observe: a.Metrics.ObserveRequest})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET "+LogsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		handler.serveLogs(w, r, st)
	})
	mux.HandleFunc(KubePath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		handler.serveKube(w, r, st, cfg.Region, cfg.AccountID)
	})
	mux.HandleFunc("GET "+KubeconfigPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		admin := ""
		if a.kube != nil {
			admin = a.kube.AdminKubeconfig()
		}
		handler.serveKubeconfig(w, r, st, admin)
	})
	mux.HandleFunc(HostsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		handler.serveHosts(w, r, a.Provider)
	})
	mux.HandleFunc("POST "+HostsReturnPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		handler.serveHosts(w, r, a.Provider)
	})
	serveImages := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		handler.serveImages(w, r, a.Images, a.Service.ImageUsers)
	}
	mux.HandleFunc("GET "+ImagesPath, serveImages)
	mux.HandleFunc("POST "+ImagesPath, serveImages)
	mux.HandleFunc("GET "+ImagePath+"{id}", serveImages)
	mux.HandleFunc("POST "+ImagesDeletePath, serveImages)
	mux.HandleFunc("POST "+KernelLogPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		handler.serveKernelLog(w, r, a.Provider)
	})
	mux.HandleFunc("GET "+RepairHistoryPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		handler.serveRepairHistory(w, r, ctl)
	})
	mux.HandleFunc(RepairsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amzn-RequestId", uuid.NewString())
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		handler.serveRepairs(w, r, ctl)
	})
	a.Console = console.New(console.Config{Store: st, Service: a.Service, Verifier: verifier, Repairs: ctl, Logger: log})
	mux.Handle(console.Path, a.Console)
	mux.Handle(console.Path+"/", a.Console)
	mux.Handle("POST "+console.TokenPath, a.Console)
	mux.HandleFunc("GET "+console.FaviconPath, console.Favicon) // browsers ask unprompted: not an API request
	// Prometheus cannot sign requests with SigV4: /metrics takes a bearer token, or nothing.
	mux.Handle("GET /metrics", a.Metrics.Handler(o.MetricsToken))
	mux.Handle("/", handler)
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	if agentLn != nil {
		a.grpc = grpc.NewServer(grpc.Creds(credentials.NewTLS(agentTLS)),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}))
		agentproto.RegisterAgentServer(a.grpc, a.Agents)
		a.wg.Add(2)
		a.Agents.Serving()
		go func() {
			defer a.wg.Done()
			if err := a.grpc.Serve(agentLn); err != nil {
				log.Error("agent listener", "error", err)
			}
		}()
		go func() {
			defer a.wg.Done()
			a.Agents.Watch(ctx)
		}()
	}
	// The lease holder's name, on a shared store only: a server on SQLite elects nobody.
	var holder string
	if IsPostgres(o.Store) {
		if a.Provider != nil && o.AgentEndpoints == "" {
			log.Warn("new nodes' agents are given only this server's address: give every server --agent-endpoints with each one's, or the nodes cannot follow a new leader", "agents", a.AgentEndpoint)
		}
		if holder, err = serverID(o.DataDir); err != nil {
			a.Close()
			return nil, err
		}
	}
	ctlCtx, ctlCancel := context.WithCancel(ctx)
	ctlDone := make(chan struct{})
	a.stopReconcilers = func() { ctlCancel(); <-ctlDone }
	a.Lost = make(chan error, 1)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		defer close(ctlDone)
		lead := func(ctx context.Context) {
			// A new tenure gives every node the reconnect grace before any heartbeat verdict:
			// its agent was the old leader's and is on its way here.
			a.Agents.Serving()
			a.leading.Store(true)
			a.Metrics.Leading(true)
			defer func() {
				a.leading.Store(false)
				a.Metrics.Leading(false)
				a.Agents.StandBy()
			}()
			var wg sync.WaitGroup
			if a.Events != nil {
				wg.Go(func() { a.Events.Run(ctx) })
			}
			if err := ctl.Run(ctx); err != nil {
				log.Error("reconcilers stopped", "error", err)
			}
			wg.Wait()
		}
		if !IsPostgres(o.Store) {
			// The SQLite file is this server's alone (its data directory is locked): there is
			// nobody to elect, and no lease to lose on a busy machine.
			lead(ctlCtx)
			return
		}
		// On a shared store, the reconcilers and the events' deliverer run on the one server
		// that holds the lease, with its fence on every write they make.
		err := leader.Run(ctlCtx, leader.Config{Store: st, Holder: holder, Logger: log}, lead)
		if errors.Is(err, leader.ErrLost) {
			a.Lost <- err
		}
	}()
	go func() {
		defer a.wg.Done()
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "error", err)
		}
	}()
	if o.MetricsListen != "" {
		ml, err := net.Listen("tcp", o.MetricsListen)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("listen for metrics on %s: %w", o.MetricsListen, err)
		}
		mm := http.NewServeMux()
		mm.Handle("GET /metrics", a.Metrics.Handler(o.MetricsToken))
		a.metricsSrv = &http.Server{Handler: mm, ReadHeaderTimeout: 10 * time.Second}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := a.metricsSrv.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("serve metrics", "error", err)
			}
		}()
		a.MetricsURL = "http://" + ml.Addr().String() + "/metrics"
		log.Info("metrics", "endpoint", a.MetricsURL)
	}
	log.Info("hale server listening", "endpoint", a.URL, "console", a.URL+console.Path+"/ (hale console prints a sign-in link)", "region", cfg.Region, "account_id", cfg.AccountID,
		"data_dir", o.DataDir, "store", StoreName(o.DataDir, o.Store), "provider", providerName(o.Provider), "agents", a.AgentEndpoint, "object_store", a.ObjectStore)
	return a, nil
}

// Leading reports whether this server runs the reconcilers now (it holds their lease).
func (a *App) Leading() bool { return a.leading.Load() }

// startEvents sets up the events for other systems when a sink is configured: the store
// publishes every change's event to its outbox in the change's transaction, and a Deliverer
// (run with the reconcilers) hands them to the sinks. Without a sink nothing is published.
func (a *App) startEvents(o Options, st Backend) error {
	var sinks []eventbridge.Sink
	if o.EventsWebhook != "" {
		u, err := url.Parse(o.EventsWebhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--events-webhook %q: want an http:// or https:// URL", o.EventsWebhook)
		}
		sinks = append(sinks, &eventbridge.Webhook{URL: o.EventsWebhook})
	}
	if o.EventsFile != "" {
		a.eventsFile = &eventbridge.File{Path: o.EventsFile}
		sinks = append(sinks, a.eventsFile)
	}
	if len(sinks) == 0 {
		return nil
	}
	pub := &eventbridge.Publisher{}
	st.SetPublisher(pub)
	a.Events = eventbridge.New(eventbridge.Config{Store: st, Publisher: pub, Sinks: sinks,
		MinBackoff: o.EventsMinBackoff, MaxBackoff: o.EventsMaxBackoff, Logger: a.log})
	if err := a.Events.Prepare(context.Background()); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for _, s := range sinks {
		a.log.Info("events for other systems", "sink", s.Name())
	}
	return nil
}

// agentEndpoint is the address agents are given for the agent listener at addr, and the names
// the server's certificate carries for it. A listener on every address (0.0.0.0, [::]) is
// reached at the provider's agent address (the local bridge), or at this machine's first
// address without a provider; its certificate names every address of the machine and its
// hostname.
func agentEndpoint(addr net.Addr, p provider.Provider) (string, []string) {
	host, port, _ := net.SplitHostPort(addr.String())
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsUnspecified() {
		return net.JoinHostPort(host, port), []string{host}
	}
	var hosts []string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, n.IP.String())
			}
		}
	}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	advertise := "127.0.0.1"
	if p != nil {
		advertise = p.AgentAddress()
	} else {
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil && ip.To4() != nil && !ip.IsLoopback() {
				advertise = h
				break
			}
		}
	}
	return net.JoinHostPort(advertise, port), append(hosts, advertise)
}

func providerName(p string) string {
	if p == "" {
		return "none (clusters stay Creating)"
	}
	return p
}

// ensureAdminKey creates the first access key when the store has none and writes it, with the
// server's endpoint and region, as the AWS profile "hale". The config file is rewritten on every
// start so its endpoint_url follows the listen address.
func (a *App) ensureAdminKey(region string) error {
	ctx := context.Background()
	var created *store.AccessKey
	err := a.Store.Write(ctx, func(tx store.Tx) error {
		keys, err := tx.ListAccessKeys()
		if err != nil || len(keys) > 0 {
			return err
		}
		k, err := auth.NewAccessKey("admin", []string{"sagemaker:*"}, nil)
		if err != nil {
			return err
		}
		created = k
		return tx.InsertAccessKey(k)
	})
	if err != nil {
		return err
	}
	if created != nil {
		if err := auth.WriteCredentialsProfile(a.CredentialsFile, Profile, created); err != nil {
			return err
		}
		a.log.Info("created the admin access key and wrote it as an AWS credentials profile",
			"profile", Profile, "file", a.CredentialsFile, "access_key_id", created.ID)
	}
	if err := auth.WriteConfigProfile(a.ConfigFile, Profile, region, a.URL); err != nil {
		return err
	}
	if _, err := os.Stat(a.CredentialsFile); err == nil {
		a.log.Info("clients: the hale CLI finds profile hale with HALE_DATA_DIR; AWS CLIs and SDKs with the AWS_* files",
			"HALE_DATA_DIR", a.dataDir, "AWS_SHARED_CREDENTIALS_FILE", a.CredentialsFile, "AWS_CONFIG_FILE", a.ConfigFile, "AWS_PROFILE", Profile)
	}
	return nil
}

// Close stops serving, stops the reconcilers and closes the store. Later calls do nothing.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := a.srv.Shutdown(ctx)
		if a.metricsSrv != nil {
			err = errors.Join(err, a.metricsSrv.Shutdown(ctx))
		}
		// The reconcilers stop first: a round between the agents' streams ending and its
		// context would find every node's connection gone and judge it unreachable (seen in
		// the parallel e2e suite: a SIGTERM'd server replacing a node it had just disconnected).
		if a.stopReconcilers != nil {
			a.stopReconcilers()
		}
		if a.grpc != nil {
			a.grpc.Stop() // agent streams never end by themselves; agents reconnect to the next server
		}
		a.cancel()
		a.wg.Wait()
		a.Images.Close() // a build in progress ends Failed; build it again after the restart
		a.closeErr = errors.Join(err, a.Store.Close())
		if a.eventsFile != nil {
			a.closeErr = errors.Join(a.closeErr, a.eventsFile.Close())
		}
		if p, ok := a.Provider.(interface{ Close() error }); ok {
			a.closeErr = errors.Join(a.closeErr, p.Close())
		}
		if a.kube != nil && a.kubeReset {
			a.closeErr = errors.Join(a.closeErr, a.kube.Reset())
		} else if a.kube != nil {
			a.kube.Stop()
		}
		a.lock.release()
	})
	return a.closeErr
}
