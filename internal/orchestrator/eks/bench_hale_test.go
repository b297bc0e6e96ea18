//go:build kube

package eks_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentca"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/lifecycle"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/orchestrator/slurm"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// The benchmark's hale process, its provider and its agents.

// startHale starts the hale process; stop (also called when b ends) stops it.
func startHale(b *testing.B, cfg benchConfig) (cmd *exec.Cmd, stop func()) {
	path := filepath.Join(cfg.Dir, "hale.json")
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	out, err := os.Create(filepath.Join(cfg.Dir, "hale.out"))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=hale", configEnv+"="+path)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { haltHale(b, cmd, cfg.Dir) }) }
	b.Cleanup(stop)
	return cmd, stop
}

// haltHale stops the hale process (SIGTERM, then SIGKILL after 15 s), and any replacement's
// agent it left.
func haltHale(b *testing.B, cmd *exec.Cmd, dir string) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	pids, _ := filepath.Glob(filepath.Join(dir, "launched", "*", "pid"))
	for _, p := range pids {
		// Only a process still running as this benchmark's agent (a pid may be reused).
		pid, err := readPid(p)
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && strings.Contains(string(env), configEnv+"="+filepath.Dir(p)) {
			b.Logf("killing a replacement's agent hale left running (pid %d)", pid)
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// runHale is `hale server` without its HTTP API: the store, the agent server, the
// controller with both orchestrators, and the benchmark's provider.
func runHale(cfg benchConfig) int {
	logf, err := os.OpenFile(filepath.Join(cfg.Dir, "hale.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, nil))
	st, err := sqlite.Open(filepath.Join(cfg.Dir, "hale.db"))
	if err != nil {
		log.Error("store", "error", err)
		return 1
	}
	defer st.Close()
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.AdminKubeconfig)
	if err != nil {
		log.Error("kubeconfig", "error", err)
		return 1
	}
	exe, _ := os.Executable()
	prov := &benchProvider{cfg: cfg, exe: exe, kube: kubernetes.NewForConfigOrDie(rc), log: log,
		insts: map[string]*benchInstance{}, gone: map[string]bool{}}
	defer prov.close()
	ca, err := agentca.Open(filepath.Join(cfg.Dir, "agent-ca"), agentca.Options{})
	if err != nil {
		log.Error("agent CA", "error", err)
		return 1
	}
	host, _, _ := net.SplitHostPort(cfg.AgentListen)
	tlsCfg, err := ca.ServerTLS([]string{host})
	if err != nil {
		log.Error("agent CA", "error", err)
		return 1
	}
	var ctl *controller.Controller
	agents := agentserver.New(agentserver.Config{Store: st, CA: ca, Logger: log,
		Notify: func(id string) { ctl.Enqueue(id) },
		OnFinding: func(ctx context.Context, clusterID, instanceID string, f *agentproto.Finding) {
			ctl.HandleFinding(ctx, clusterID, instanceID, f)
		},
		OnAutoResume: func(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
			return ctl.AutoResume(ctx, clusterID, req)
		}})
	ctl = controller.New(controller.Config{Store: st, Provider: prov, Agents: agents, Logger: log,
		Lifecycle:     lifecycle.DirSource{Root: filepath.Join(cfg.Dir, "s3")},
		Orchestrators: []orchestrator.Orchestrator{eks.New(eks.Config{}), slurm.New(slurm.Config{})}, JoinTimeout: cfg.JoinTimeout})
	ln, err := net.Listen("tcp", cfg.AgentListen)
	if err != nil {
		log.Error("agent listener", "error", err)
		return 1
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)), grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}))
	agentproto.RegisterAgentServer(srv, agents)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); srv.Serve(ln) }()
	go func() { defer wg.Done(); agents.Watch(ctx) }()
	go func() {
		defer wg.Done()
		if err := ctl.Run(ctx); err != nil {
			log.Error("reconcilers stopped", "error", err)
		}
	}()
	log.Info("hale (benchmark) running", "agents", cfg.AgentListen)
	<-ctx.Done()
	srv.Stop()
	wg.Wait()
	return 0
}

// runAgent is a replacement instance's agent.
func runAgent(cfg benchConfig) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := agent.Run(ctx, agent.Config{Server: cfg.Server, InstanceID: cfg.InstanceID, StateDir: cfg.StateDir, CAFile: cfg.CAFile,
		BootstrapTokenFile: cfg.TokenFile, DHCPort: cfg.DHCPort, KernelLogs: []string{filepath.Join(cfg.StateDir, "kern.log")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// benchProvider launches a replacement as an agent process in a private mount namespace whose
// /opt is a tmpfs (the lifecycle files go to /opt/ml), and registers its Node as the machine's
// kubelet would. The seeded instances' agents run in the benchmark's process: terminating one
// writes terminated/<id>, and the benchmark stops that agent.
type benchProvider struct {
	cfg  benchConfig
	exe  string
	kube kubernetes.Interface
	log  *slog.Logger

	mu    sync.Mutex
	insts map[string]*benchInstance
	gone  map[string]bool // seeded instances terminated
}

type benchInstance struct {
	inst provider.Instance
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *benchProvider) Name() provider.Kind { return "bench" }
func (p *benchProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{Reboot: true, ReplaceKeepsAddress: true, SimulatedKubelets: true}
}
func (p *benchProvider) AgentAddress() string { return "127.0.0.1" }

func (p *benchProvider) Launch(ctx context.Context, spec provider.LaunchSpec) (*provider.Instance, error) {
	p.mu.Lock()
	if in := p.insts[spec.InstanceID]; in != nil {
		p.mu.Unlock()
		c := in.inst
		return &c, nil
	}
	p.mu.Unlock()
	dir := filepath.Join(p.cfg.Dir, "launched", spec.InstanceID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(spec.AgentToken), 0o600); err != nil {
		return nil, err
	}
	data, _ := json.Marshal(benchConfig{Server: p.cfg.AgentListen, InstanceID: spec.InstanceID, StateDir: filepath.Join(dir, "state"),
		TokenFile: token, CAFile: filepath.Join(p.cfg.Dir, "agent-ca", "ca.crt"), DHCPort: p.cfg.DHCPort})
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", `mount -t tmpfs tmpfs /opt && exec "$0" -test.run='^$'`, p.exe)
	cmd.Env = append(os.Environ(), roleEnv+"=agent", configEnv+"="+cfgPath)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	in := &benchInstance{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(in.done) }()
	_, err = p.kube.CoreV1().Nodes().Create(ctx, kubeletNode(eks.NodeName(spec.InstanceID), spec.InstanceID), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		kill(in)
		return nil, fmt.Errorf("registering the Node: %w", err)
	}
	ip := cmp.Or(spec.IP, "10.255.0.1")
	in.inst = provider.Instance{ID: spec.InstanceID, ClusterID: spec.ClusterID, GroupName: spec.GroupName, LogicalID: spec.LogicalID,
		InstanceType: spec.InstanceType, IP: ip, Hostname: provider.Hostname(ip), State: provider.Running, LaunchTime: time.Now().UTC()}
	p.mu.Lock()
	p.insts[spec.InstanceID] = in
	p.mu.Unlock()
	c := in.inst
	return &c, nil
}

func kill(in *benchInstance) {
	syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
	<-in.done
}

func (p *benchProvider) Terminate(ctx context.Context, id string) error {
	p.mu.Lock()
	in := p.insts[id]
	delete(p.insts, id)
	seededGone := in == nil && !p.gone[id]
	p.gone[id] = true
	p.mu.Unlock()
	if in != nil {
		kill(in)
		return nil
	}
	if seededGone {
		dir := filepath.Join(p.cfg.Dir, "terminated")
		os.MkdirAll(dir, 0o700)
		return os.WriteFile(filepath.Join(dir, id), nil, 0o600)
	}
	return nil
}

func (p *benchProvider) Reboot(context.Context, string) error {
	return errors.New("the benchmark's provider does not reboot instances")
}

func (p *benchProvider) Describe(_ context.Context, id string) (*provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.insts[id]; in != nil {
		c := in.inst
		return &c, nil
	}
	return nil, provider.ErrNotFound
}

// AgentRunning: a replacement's agent process runs; a seeded instance's agent runs in the
// benchmark's process until it is terminated.
func (p *benchProvider) AgentRunning(_ context.Context, id string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.insts[id]; in != nil {
		select {
		case <-in.done:
			return false, nil
		default:
			return true, nil
		}
	}
	return !p.gone[id], nil
}

func (p *benchProvider) List(context.Context) ([]*provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*provider.Instance
	for _, in := range p.insts {
		c := in.inst
		out = append(out, &c)
	}
	return out, nil
}

func (p *benchProvider) ReleaseCluster(context.Context, string) error { return nil }

func (p *benchProvider) close() {
	p.mu.Lock()
	insts := p.insts
	p.insts = map[string]*benchInstance{}
	p.mu.Unlock()
	for _, in := range insts {
		kill(in)
	}
}

// ---- the seeded nodes' agents ----

type agentPool struct {
	root, server string
	caFile       string
	dhcPort      int
	mu           sync.Mutex
	stops        map[string]context.CancelFunc
	wg           sync.WaitGroup
}

func (p *agentPool) kernelLog(id string) string { return filepath.Join(p.root, id, "kern.log") }

func (p *agentPool) start(ctx context.Context, id, token string) {
	dir := filepath.Join(p.root, id)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)
	actx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	p.stops[id] = cancel
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		agent.Run(actx, agent.Config{Server: p.server, InstanceID: id, StateDir: filepath.Join(dir, "state"), CAFile: p.caFile,
			BootstrapTokenFile: filepath.Join(dir, "token"), KernelLogs: []string{p.kernelLog(id)}, DHCPort: p.dhcPort,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
}

// reapTerminated stops the agents of the instances hale's provider terminated (their machines
// are gone).
func (p *agentPool) reapTerminated(ctx context.Context, dir string) {
	for ctx.Err() == nil {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			p.mu.Lock()
			if stop := p.stops[e.Name()]; stop != nil {
				stop()
				delete(p.stops, e.Name())
			}
			p.mu.Unlock()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ---- one fault ----
