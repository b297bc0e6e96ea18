// Package kubeplane runs a real Kubernetes control plane on this machine for hale's Eks
// clusters (issue 14; research k8s-local-apiserver.md): etcd, kube-apiserver (TLS and RBAC),
// kube-controller-manager, kube-scheduler and kwok (simulated kubelets for the local provider's
// nodes), all on loopback, built from upstream by scripts/k8s-tools.sh, with their state under a
// directory of hale's data directory. It is started by `hale server --kubernetes local` and
// stopped with it.
package kubeplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is the Kubernetes version scripts/k8s-tools.sh builds.
const Version = "v1.37.2"

// Config says where the control plane's binaries are and where it keeps its state.
type Config struct {
	// Bin holds kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and
	// kwok-stages.yaml, the training operator, and with Address the registry
	// (scripts/k8s-tools.sh links them into bin/k8s).
	Bin string
	// Dir holds its state: the PKI, etcd's data, kubeconfigs and the processes' logs.
	Dir string
	// ReadyTimeout is how long the API server has to answer /readyz (60 s when zero).
	ReadyTimeout time.Duration
	// Address, when set, is where real kubelets reach the API server (the local provider's
	// bridge address, issue 28): the API server listens and advertises there instead of on
	// loopback, reaches kubelets by their InternalIP with a client certificate of its own, and
	// the controller manager gives each Node a pod CIDR from ClusterCIDR, and an OCI registry
	// runs there (RegistryPort) for the nodes' images.
	Address string
	// Kwok: kwok runs too, playing the kubelets of the Nodes annotated kwok.x-k8s.io/node=fake
	// (simulated kubelets: the scale benchmark's 1,000 Nodes, --kubelets simulated); a plane
	// whose kubelets are real has no use for it.
	Kwok bool
	// NoRegistry: no registry runs with Address (another control plane's serves the nodes, on
	// the same address and port).
	NoRegistry bool
	Logger     *slog.Logger
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	cfg        Config
	server     string // https://127.0.0.1:<port>, or https://<Config.Address>:<port>
	kubeconfig string // the admin's (group system:masters)
	procs      []*exec.Cmd
	pki        *pki
	registry   string // host:port, when Config.Address is set
}

// ClusterCIDR is the pods' network, a /24 of it per Node; ServiceCIDR the Services'.
const (
	ClusterCIDR = "10.244.0.0/16"
	ServiceCIDR = "10.0.0.0/24"
)

// Server is the API server's URL.
func (cp *ControlPlane) Server() string { return cp.server }

// AdminKubeconfig is the path of a kubeconfig for the control plane's administrator (group
// system:masters): hale applies its ClusterRole with it and gives its controller a narrower one.
func (cp *ControlPlane) AdminKubeconfig() string { return cp.kubeconfig }

// ErrNotBuilt: the binaries are not in Config.Bin.
var ErrNotBuilt = errors.New("the Kubernetes binaries are not built: run scripts/k8s-tools.sh (once per machine, 10-20 minutes)")

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the training
// operator, Kueue, kwok (Config.Kwok), and with Config.Address CoreDNS and the registry, and returns once
// the API server is ready. On an error nothing it started is left running.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml",
		"training-operator", "pytorchjobs-crd.yaml", "kueue", "kueue-crds.yaml", "kueue-webhooks.yaml"} {
		if _, err := os.Stat(filepath.Join(cfg.Bin, b)); err != nil {
			return nil, fmt.Errorf("kubeplane: %s: %w", filepath.Join(cfg.Bin, b), ErrNotBuilt)
		}
	}
	for _, d := range []string{cfg.Dir, filepath.Join(cfg.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	p, err := loadOrMakePKI(cfg.Dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kwokPort, webhookPort, probePort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	kueueHook, kueueProbe := ports[6], ports[7]
	host := cmp.Or(cfg.Address, "127.0.0.1")
	apiPort = stablePort(cfg.Dir, host, apiPort, ports)
	cp := &ControlPlane{cfg: cfg, server: "https://" + net.JoinHostPort(host, strconv.Itoa(apiPort)), pki: p}

	srvIPs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
	srvName := "apiserver"
	if cfg.Address != "" {
		// A certificate of another name: the one for loopback alone stays for a later start
		// without real kubelets.
		srvIPs, srvName = append(srvIPs, net.ParseIP(cfg.Address)), "apiserver-"+cfg.Address
	}
	srvCert, srvKey, err := p.issue(srvName, "kube-apiserver", nil, srvIPs,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return nil, err
	}
	saKey, saPub, err := p.serviceAccountKey()
	if err != nil {
		return nil, err
	}
	users := map[string]struct {
		cn  string
		org []string
	}{
		"admin":                   {"hale-admin", []string{"system:masters"}},
		"kube-controller-manager": {"system:kube-controller-manager", nil},
		"kube-scheduler":          {"system:kube-scheduler", nil},
		"kwok":                    {"hale-kwok", []string{"system:masters"}},
	}
	kubeconfigs := map[string]string{}
	for name, u := range users {
		cert, key, err := p.issue(name, u.cn, u.org, nil, nil)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(cfg.Dir, name+".kubeconfig")
		if err := writeKubeconfig(path, cp.server, p.caPEM, cert, key); err != nil {
			return nil, err
		}
		kubeconfigs[name] = path
	}
	cp.kubeconfig = kubeconfigs["admin"]
	caFile := filepath.Join(p.dir, "ca.crt")
	caKey := filepath.Join(p.dir, "ca.key")

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := cp.run("etcd", "--data-dir", filepath.Join(cfg.Dir, "etcd"), "--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL, "--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--listen-metrics-urls", "", "--quota-backend-bytes", "2147483648"); err != nil {
		return nil, err
	}
	// The endpoint reconciler cannot advertise a loopback address (Kubernetes 1.37 refuses it),
	// and with simulated kubelets nothing dials the kubernetes Service: it is off then.
	apiArgs := []string{"--etcd-servers", etcdURL, "--bind-address", host, "--advertise-address", host,
		"--secure-port", strconv.Itoa(apiPort),
		"--tls-cert-file", srvCert, "--tls-private-key-file", srvKey, "--client-ca-file", caFile,
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", saPub,
		"--service-account-signing-key-file", saKey, "--service-cluster-ip-range", ServiceCIDR,
		"--authorization-mode", "Node,RBAC", "--allow-privileged=true", "--profiling=false"}
	if cfg.Address == "" {
		apiArgs = append(apiArgs, "--endpoint-reconciler-type", "none")
	} else {
		// kubectl logs, exec and port-forward: the API server dials each kubelet at its Node's
		// InternalIP, never a hostname (which would be looked up in the host's DNS), as a
		// client the kubelets' webhook authorizes (system:masters).
		kcCert, kcKey, err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil)
		if err != nil {
			return nil, err
		}
		apiArgs = append(apiArgs, "--kubelet-client-certificate", kcCert, "--kubelet-client-key", kcKey,
			"--kubelet-certificate-authority", caFile, "--kubelet-preferred-address-types", "InternalIP")
	}
	if err := cp.run("kube-apiserver", apiArgs...); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.waitReady(ctx); err != nil {
		cp.Stop()
		return nil, err
	}
	// Every controller, but node IPAM with simulated kubelets (no pod network to allocate
	// from). The node
	// lifecycle controller stays: it takes the not-ready taint off a Node whose kubelet reports
	// it Ready, as on any cluster. Each controller acts as its own ServiceAccount with the
	// bootstrap roles (system:controller:*), as kubeadm sets it up: the controller manager's own
	// user may do little more than mint their tokens.
	controllers := "*,-nodeipam"
	if cfg.Address != "" {
		controllers = "*" // real kubelets' pods need addresses: each Node gets a /24 of ClusterCIDR
	}
	cmArgs := []string{"--kubeconfig", kubeconfigs["kube-controller-manager"],
		"--authentication-kubeconfig", kubeconfigs["kube-controller-manager"], "--authorization-kubeconfig", kubeconfigs["kube-controller-manager"],
		"--controllers", controllers, "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0",
		"--use-service-account-credentials=true", "--service-account-private-key-file", saKey, "--root-ca-file", caFile,
		"--cluster-signing-cert-file", caFile, "--cluster-signing-key-file", caKey}
	if cfg.Address != "" {
		cmArgs = append(cmArgs, "--allocate-node-cidrs", "--cluster-cidr", ClusterCIDR, "--service-cluster-ip-range", ServiceCIDR)
	}
	if err := cp.run("kube-controller-manager", cmArgs...); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.run("kube-scheduler", "--kubeconfig", kubeconfigs["kube-scheduler"],
		"--authentication-kubeconfig", kubeconfigs["kube-scheduler"], "--authorization-kubeconfig", kubeconfigs["kube-scheduler"],
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0"); err != nil {
		cp.Stop()
		return nil, err
	}
	// kwok plays the kubelet of the Nodes annotated kwok.x-k8s.io/node=fake, which the local
	// provider's nodes are with simulated kubelets: they report Ready with a lease heartbeat, and
	// their pods run no process.
	if cfg.Kwok {
		if err := cp.run("kwok", "-c", filepath.Join(cfg.Bin, "kwok-stages.yaml"), "--kubeconfig", kubeconfigs["kwok"],
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
			"--node-lease-duration-seconds", "40", "--server-address", "127.0.0.1:"+strconv.Itoa(kwokPort),
			"--node-ip", "127.0.0.1", "--cidr", "10.244.0.0/16"); err != nil {
			cp.Stop()
			return nil, err
		}
	}
	if err := cp.startTrainingOperator(ctx, webhookPort, probePort); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.startKueue(ctx, kueueHook, kueueProbe); err != nil {
		cp.Stop()
		return nil, err
	}
	if cfg.Address != "" {
		if err := cp.applyDNS(ctx); err != nil {
			cp.Stop()
			return nil, err
		}
		if !cfg.NoRegistry {
			if err := cp.startRegistry(ctx); err != nil {
				cp.Stop()
				return nil, err
			}
		}
	}
	cfg.Logger.Info("Kubernetes control plane ready", "server", cp.server, "version", Version, "dir", cfg.Dir, "registry", cp.registry)
	return cp, nil
}

// run starts one of the control plane's programs in a process group of its own, its output in
// logs/<name>.log.
func (cp *ControlPlane) run(name string, args ...string) error {
	return cp.runEnv(name, nil, args...)
}

func (cp *ControlPlane) runEnv(name string, env []string, args ...string) error {
	log, err := os.OpenFile(filepath.Join(cp.cfg.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(cp.cfg.Bin, name), args...)
	if mount, dir := mountFor(name, cp.cfg.Dir); mount != "" {
		// unshare(1): a private mount namespace where mount makes dir what the program reads
		// at a path it does not let one change. The program is passed open, as fd 3: its path
		// may itself be under a directory the mount hides (a checkout in /tmp).
		bin, err := os.Open(filepath.Join(cp.cfg.Bin, name))
		if err != nil {
			return err
		}
		defer bin.Close()
		cmd = exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
			mount + ` && exec /proc/self/fd/3 "$@"`, dir}, args...)...)
		cmd.ExtraFiles = []*os.File{bin}
	}
	cmd.Stdout, cmd.Stderr = log, log
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kubeplane: starting %s: %w", name, err)
	}
	cp.procs = append(cp.procs, cmd)
	return nil
}

// mountFor is the mount (a shell command on "$0") a program runs behind, and its "$0": the
// training operator's /tmp is this control plane's tmp (its webhook certificate is read under
// /tmp); Kueue's /etc has this control plane's kueue-etc over it (it reads a certificate under
// /etc/kueue whatever its configuration says).
func mountFor(name, dir string) (mount, arg string) {
	switch name {
	case "training-operator":
		return `mount --bind "$0" /tmp`, filepath.Join(dir, "tmp")
	case "kueue":
		return `mount -t overlay overlay -o lowerdir="$0":/etc /etc`, filepath.Join(dir, "kueue-etc")
	}
	return "", ""
}

// waitReady waits for the API server's /readyz, or for it to exit.
func (cp *ControlPlane) waitReady(ctx context.Context) error {
	cs, err := cp.Clientset()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(cp.cfg.ReadyTimeout)
	apiserver := cp.procs[len(cp.procs)-1]
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		cancel()
		if err == nil {
			return nil
		}
		if apiserver.ProcessState != nil || syscall.Kill(apiserver.Process.Pid, 0) != nil {
			return fmt.Errorf("kubeplane: kube-apiserver exited; see %s", filepath.Join(cp.cfg.Dir, "logs", "kube-apiserver.log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubeplane: kube-apiserver not ready within %s (%v); see %s", cp.cfg.ReadyTimeout, err,
				filepath.Join(cp.cfg.Dir, "logs", "kube-apiserver.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Clientset is a client of the control plane as its administrator.
func (cp *ControlPlane) Clientset() (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// Stop ends the control plane's processes (the last started first), each with SIGTERM and, after
// 5 s, SIGKILL to its process group. Its state stays in Config.Dir for the next Start.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cmd := cp.procs[i]
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	cp.procs = nil
}

// writeKubeconfig writes a kubeconfig for a user with a client certificate.
func writeKubeconfig(path, server string, caPEM []byte, certFile, keyFile string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hale"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts["hale"] = &clientcmdapi.Context{Cluster: "hale", AuthInfo: "user"}
	cfg.CurrentContext = "hale"
	return clientcmd.WriteToFile(*cfg, path)
}

// freePorts finds n free TCP ports on loopback.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
