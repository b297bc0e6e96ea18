package agentserver_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/postgres/pgtest"
)

// BenchmarkAgents1000 measures what 1,000 connected agents cost a hale server: the real server
// binary runs alone in its process; 1,000 real agents (internal/agent, over the real gRPC
// protocol, one heartbeat a second each) run in the benchmark's process. After all registered,
// the server's CPU time and resident memory are read from /proc over a 10 s window.
// Run: go test ./internal/agentserver -run '^$' -bench Agents1000 -benchtime 1x
// With HALE_BENCH_STORE=postgres the server's store is a real PostgreSQL (pgtest), whose own
// CPU is reported beside the server's.
func BenchmarkAgents1000(b *testing.B) {
	const agents = 1000
	dir := b.TempDir()
	storeURL, pg := benchStore(b)
	bin := filepath.Join(dir, "hale")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/haleproject/hale/cmd/hale").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	st, err := server.OpenStore(context.Background(), data, storeURL)
	if err != nil {
		b.Fatal(err)
	}
	tokens := map[string]string{}
	now := time.Now()
	st.Write(context.Background(), func(tx store.Tx) error {
		tx.InsertCluster(&store.Cluster{ID: "benchbenchbe", Name: "bench", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/benchbenchbe",
			Status: api.ClusterStatusInService, CreatedAt: now, UpdatedAt: now})
		for i := 0; i < agents; i++ {
			token, hash := agentserver.NewToken()
			id := fmt.Sprintf("i-%017d", i)
			tokens[id] = token
			n := &store.Node{ClusterID: "benchbenchbe", InstanceID: id, LogicalID: fmt.Sprintf("g-%d", i), GroupName: "g",
				InstanceType: "ml.c5.xlarge", Status: api.ClusterInstanceStatusRunning, LaunchTime: now}
			n.Details.AgentTokenHash = hash
			n.Details.Phase = store.PhaseReady
			if err := tx.InsertNode(n); err != nil {
				return err
			}
		}
		return nil
	})
	st.Close()

	free := func() string {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		defer l.Close()
		return l.Addr().String()
	}
	agentAddr := free()
	srv := exec.Command(bin, "server", "--data-dir", data, "--listen", free(), "--agent-listen", agentAddr, "--heartbeat-interval", "1s", "--store", storeURL)
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	time.Sleep(500 * time.Millisecond)
	idleCPU, idleRSS := procUsage(srv.Process.Pid)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for id, token := range tokens {
		adir := filepath.Join(dir, "agents", id)
		os.MkdirAll(adir, 0o700)
		os.WriteFile(filepath.Join(adir, "token"), []byte(token), 0o600)
		go agent.Run(ctx, agent.Config{Server: agentAddr, InstanceID: id, StateDir: filepath.Join(adir, "state"),
			BootstrapTokenFile: filepath.Join(adir, "token"), CAFile: filepath.Join(data, "agent-ca", "ca.crt"), Logger: quiet})
	}
	start := time.Now()
	for registered(b, data, storeURL) < agents {
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("only %d of %d agents registered", registered(b, data, storeURL), agents)
		}
		time.Sleep(200 * time.Millisecond)
	}
	joined := time.Since(start)
	time.Sleep(2 * time.Second) // let the registration burst settle
	cpu0, _ := procUsage(srv.Process.Pid)
	var db0 time.Duration
	if pg != nil {
		db0 = pg.CPU()
	}
	const window = 10 * time.Second
	time.Sleep(window)
	cpu1, rss := procUsage(srv.Process.Pid)
	if pg != nil {
		b.ReportMetric(100*(pg.CPU()-db0).Seconds()/window.Seconds(), "postgres-cpu-%")
	}
	b.ReportMetric(joined.Seconds(), "s-to-register-all")
	b.ReportMetric(100*(cpu1-cpu0).Seconds()/window.Seconds(), "server-cpu-%")
	b.ReportMetric(float64(rss)/(1<<20), "server-rss-MiB")
	b.ReportMetric(float64(rss-idleRSS)/(1<<20), "rss-over-idle-MiB")
	_ = idleCPU
}

// procUsage reads a process's CPU time (user+system) and resident memory from /proc.
func procUsage(pid int) (cpu time.Duration, rss int64) {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	cpu = time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			rss = kb * 1024
		}
	}
	return cpu, rss
}

// registered counts the nodes whose agents registered (their certificate's serial is stored).
func registered(b *testing.B, data, storeURL string) int {
	st, err := server.OpenStore(context.Background(), data, storeURL)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	n := 0
	st.Read(context.Background(), func(tx store.Tx) error {
		nodes, err := tx.NodesOf("benchbenchbe")
		for _, x := range nodes {
			if x.Details.AgentCertSerial != "" {
				n++
			}
		}
		return err
	})
	return n
}

// benchStore is the store a benchmark's server runs on: "" (SQLite in its data directory), or
// with HALE_BENCH_STORE=postgres a database of a PostgreSQL started for it.
func benchStore(b *testing.B) (string, *pgtest.Server) {
	if os.Getenv("HALE_BENCH_STORE") != "postgres" {
		return "", nil
	}
	return pgtest.Database(b)
}
