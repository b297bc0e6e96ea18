//go:build e2e && robustness

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/internal/store/postgres/pgtest"
)

// TestRobustnessOnThreeServers (issue 30) is the robustness suite with three real hale servers
// on one real PostgreSQL in place of the one server, and a multi-head Slurm cluster (two
// controllers, their state on FSx), whose primary controller's node is one of the faults
// (killed whole: the backup takes over, hale replaces it once). The faults that hit the server hit the
// leader (its SIGKILL, alone, during a repair, or at a named point of a creation, a scale-up, a
// scale-down, a repair and a software update), and another server must carry on within the
// lease, with the suite's invariants: no healthy node repaired, the broken one replaced once,
// no event lost, lifecycle scripts run once per instance, the held job kept. The servers share
// the agent CA (in the store) and the local provider's records (--provider-dir); PostgreSQL
// is killed and restarted, or stopped for 30 s, too; nodes are
// given every server's agent endpoint (--agent-endpoints); the test's client, like a load
// balancer, sends each request to the first server that takes the connection.
func TestRobustnessOnThreeServers(t *testing.T) {
	parallel(t)
	seed, duration := robustnessSettings(t)
	faults := onlyFaults(t, []fault{
		{name: "leader SIGKILL", inject: (*robust).killLeader},
		{name: "server SIGKILL, down", inject: (*robust).serverOutage, longest: 10 * time.Second},
		{name: "agent SIGKILL", broken: true, heartbeat: true, inject: (*robust).killAgent},
		{name: "agent SIGKILL, then server SIGKILL mid-repair", broken: true, heartbeat: true, inject: (*robust).killAgentThenServer, longest: 3 * time.Second},
		{name: "agent SIGKILL, server dies at a failpoint", broken: true, heartbeat: true, inject: (*robust).failpointRepair},
		{name: "scale-up and scale-down, server dies at failpoints", target: "group cpu", inject: (*robust).scale},
		{name: "UpdateClusterSoftware, server dies at a failpoint", broken: true, inject: (*robust).softwareUpdate},
		{name: "PostgreSQL killed, restarted", inject: (*robust).restartPostgres, longest: 10 * time.Second},
		{name: "PostgreSQL stopped 30 s", inject: (*robust).haltPostgres},
		{name: "primary controller's node killed", target: "controller-1", broken: true, heartbeat: true, inject: (*robust).killPrimary},
	})
	f := startFleet(t)
	r := newRobust(t, f.servers[0].e, f.servers[0].dir, nil, nil, seed)
	r.ha = f
	// A multi-head Slurm cluster: two controllers with their state on FSx.
	r.lc = f.servers[0].e.script("robust", "on_create.sh", "#!/bin/bash\necho configured $(hostname) >> /var/log/provision/runs\n")
	r.groups, r.vpc = withFSx(fourNodes(r.lc)), vpc
	r.groups[0].InstanceCount = aws.Int32(2)
	r.drive(faults, duration)
	if len(f.failovers) > 0 {
		var s []string
		for _, d := range f.failovers {
			s = append(s, fmt.Sprintf("%.2f", d.Seconds()))
		}
		t.Logf("leader SIGKILL -> another server leads (s): %s", strings.Join(s, " "))
	}
}

// haFleet is three hale servers on one PostgreSQL store, sharing a local provider's bridge and
// records, with one client that reaches whichever of them is up.
type haFleet struct {
	t       *testing.T
	pg      *pgtest.Server
	servers []*haServer
	// failovers are the measured times from a leader's SIGKILL to another server leading.
	failovers []time.Duration
}

func startFleet(t *testing.T) *haFleet {
	url, pg := pgtest.Database(t)
	f := &haFleet{t: t, pg: pg}
	dir0 := t.TempDir()
	o := options(t, dir0) // the fleet's bridge, subnet and object store, and the clean-up of its nodes
	gateway, err := subnetGateway(o.LocalSubnet)
	if err != nil {
		t.Fatal(err)
	}
	var ports, endpoints []string
	for range 3 {
		p := freePort(t)
		ports = append(ports, p)
		endpoints = append(endpoints, net.JoinHostPort(gateway, p))
	}
	for i := range 3 {
		dir := dir0
		if i > 0 {
			dir = t.TempDir()
			// The admin key is in the store; the operator gives the other servers its profile.
			if err := os.WriteFile(filepath.Join(dir, "credentials"), readFileT(t, filepath.Join(dir0, "credentials")), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"--provider", "local", "--local-bridge", o.LocalBridge, "--local-subnet", o.LocalSubnet, "--object-store", o.ObjectStore,
			"--provider-dir", filepath.Join(dir0, "local"), "--agent-port", ports[i], "--agent-endpoints", strings.Join(endpoints, ",")}
		e, cmd, run := binaryServerWith(t, dir, &haleBin, args, "--store", url)
		e.scripts = o.ObjectStore
		f.servers = append(f.servers, &haServer{e: e, cmd: cmd, run: run, dir: dir})
	}
	var hosts []string
	for _, s := range f.servers {
		hosts = append(hosts, strings.TrimPrefix(s.e.url, "http://"))
	}
	// Every env's client reaches the first server up, so a step's checks never depend on
	// which server was killed.
	for _, s := range f.servers {
		opts := s.e.SDK.Options()
		opts.HTTPClient = &http.Client{Transport: &firstUp{hosts: hosts, base: &http.Transport{DisableKeepAlives: true}}}
		s.e.SDK = sagemaker.New(opts)
	}
	f.logsOnFailure()
	f.leader(30*time.Second, "three servers started")
	return f
}

// logsOnFailure has a failed test end with the last lines of every server's log.
func (f *haFleet) logsOnFailure() {
	f.t.Cleanup(func() {
		if !f.t.Failed() {
			return
		}
		for _, s := range f.servers {
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			lines := strings.Split(strings.TrimSpace(string(log)), "\n")
			f.t.Logf("the last lines of %s's log:\n%s", s.e.url, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
}

// leader waits up to within for exactly one server to lead (hale_leader 1 on its /metrics),
// failing the test when two do at once or none does in time.
func (f *haFleet) leader(within time.Duration, what string) *haServer {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var leads []*haServer
		for _, s := range f.servers {
			if s.cmd != nil && s.leading() == 1 {
				leads = append(leads, s)
			}
		}
		if len(leads) > 1 {
			f.t.Fatalf("%s: %d servers lead at once", what, len(leads))
		}
		if len(leads) == 1 {
			return leads[0]
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: no server leads after %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restarter starts s again (with env) and keeps its process.
func restarter(s *haServer) func(env ...string) *exec.Cmd {
	return func(env ...string) *exec.Cmd {
		s.cmd = s.run(env...)
		return s.cmd
	}
}

// lead is the leader's process and how to start it again: what the suite's server faults hit.
func (f *haFleet) lead() (*exec.Cmd, func(env ...string) *exec.Cmd) {
	s := f.leader(30*time.Second, "before a fault")
	return s.cmd, restarter(s)
}

// arm makes the leader a server armed with a failpoint: every server is killed, one is started
// armed, and once it leads the others are started unarmed, to take over when it dies there.
func (f *haFleet) arm(point string) (*exec.Cmd, func(env ...string) *exec.Cmd) {
	s := f.servers[0]
	for _, o := range f.servers {
		if o.cmd != nil && o.leading() == 1 {
			s = o
		}
	}
	for _, o := range f.servers {
		if o.cmd != nil {
			o.cmd.Process.Signal(syscall.SIGKILL)
			o.cmd.Wait()
			o.cmd = nil
		}
	}
	s.cmd = s.run("HALE_FAILPOINT=" + point)
	if f.leader(30*time.Second, "the armed server started alone") != s {
		f.t.Fatal("another server leads")
	}
	for _, o := range f.servers {
		if o != s {
			o.cmd = o.run()
		}
	}
	return s.cmd, restarter(s)
}

// killPrimary kills every process of a multi-head cluster's primary controller (a machine that
// loses power): the backup serves the queue, and hale replaces the node once (check's
// invariants: the held job keeps its id, nothing else is touched).
func (r *robust) killPrimary(id string, _ time.Duration) string {
	return fmt.Sprintf("the %d processes of %s killed", killNode(r.t, r.e, id), id)
}

// killLeader SIGKILLs the leader (it never releases its lease), measures the time until another
// server leads, and starts the killed one again (it stands by).
func (r *robust) killLeader(_ string, _ time.Duration) string {
	f := r.ha
	old := f.leader(30*time.Second, "before the leader's SIGKILL")
	killed := time.Now()
	old.cmd.Process.Signal(syscall.SIGKILL)
	old.cmd.Wait()
	old.cmd = nil
	next := f.leader(30*time.Second, "after the leader's SIGKILL")
	d := time.Since(killed)
	f.failovers = append(f.failovers, d)
	old.cmd = old.run()
	return fmt.Sprintf("%s killed; %s leads %.2f s later", old.e.url, next.e.url, d.Seconds())
}

// restartPostgres kills PostgreSQL (a crash) and starts it again d later: a leader whose lease
// ran out meanwhile steps down, and once the database answers one server leads again.
func (r *robust) restartPostgres(_ string, d time.Duration) string {
	if err := r.ha.pg.Kill(); err != nil {
		r.t.Fatal(err)
	}
	time.Sleep(d)
	if err := r.ha.pg.Restart(); err != nil {
		r.t.Fatal(err)
	}
	return fmt.Sprintf("PostgreSQL killed, restarted %s later; %s", d.Round(time.Millisecond), r.ha.answering())
}

// haltPostgres stops PostgreSQL for 30 s (SIGSTOP: connections open, nothing answers).
func (r *robust) haltPostgres(_ string, _ time.Duration) string {
	if err := r.ha.pg.Halt(); err != nil {
		r.t.Fatal(err)
	}
	time.Sleep(30 * time.Second)
	if err := r.ha.pg.Resume(); err != nil {
		r.t.Fatal(err)
	}
	return "PostgreSQL stopped 30 s; " + r.ha.answering()
}

// answering waits for a leader and an API that answers again after the database was away.
func (f *haFleet) answering() string {
	start := time.Now()
	s := f.leader(90*time.Second, "after the database came back")
	if ok, last := poll(60*time.Second, func() (bool, string) {
		_, err := f.servers[0].e.SDK.ListClusters(context.Background(), &sagemaker.ListClustersInput{})
		return err == nil, fmt.Sprint(err)
	}); !ok {
		f.t.Fatalf("the API does not answer after the database came back: %s", last)
	}
	return fmt.Sprintf("%s leads %.1f s after it came back", s.e.url, time.Since(start).Seconds())
}

// leaderDir is the data directory of the server whose log tells what went wrong: the leader's
// in a fleet (the first server's when none leads), else the one server's.
func (r *robust) leaderDir() string {
	if r.ha == nil {
		return r.dir
	}
	for _, s := range r.ha.servers {
		if s.cmd != nil && s.leading() == 1 {
			return s.dir
		}
	}
	return r.dir
}

// firstUp sends each request to the first of hosts that takes the connection, keeping the Host
// header the request was signed for: a load balancer in front of the servers, in the client.
// A request that reached a server is never sent to another.
type firstUp struct {
	hosts []string
	base  http.RoundTripper
}

func (f *firstUp) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	var lastErr error
	for _, h := range f.hosts {
		r := req.Clone(req.Context())
		r.Host = req.URL.Host
		r.URL.Host = h
		r.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := f.base.RoundTrip(r)
		if err == nil {
			return resp, nil
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// subnetGateway is the local provider's bridge address in subnet: its first host.
func subnetGateway(subnet string) (string, error) {
	ip, n, err := net.ParseCIDR(subnet)
	if err != nil {
		return "", err
	}
	ip = ip.Mask(n.Mask).To4()
	ip[3]++
	return ip.String(), nil
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func readFileT(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
