//go:build e2e && robustness

package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/internal/store/postgres/pgtest"
)

// haServer is one of several real `hale server` processes on one PostgreSQL database.
type haServer struct {
	e   *env
	cmd *exec.Cmd
	run func(env ...string) *exec.Cmd
	dir string
}

// leading scrapes the server's /metrics for hale_leader: 1 leads, 0 stands by, -1 no answer.
func (s *haServer) leading() int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(s.e.url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		switch sc.Text() {
		case "hale_leader 1":
			return 1
		case "hale_leader 0":
			return 0
		}
	}
	return -1
}

// TestServersFailOver (issue 30): three hale servers, the real binary, on one real PostgreSQL.
// Exactly one runs the reconcilers at a time (its /metrics say hale_leader 1); every server
// answers the API from the shared store. The leader's SIGKILL hands the reconcilers to another
// server; a restarted server stands by; PostgreSQL killed and restarted, and PostgreSQL stopped
// for 30 s, leave the servers running, then one leader again, with a new lease token, and
// nothing stored lost.
func TestServersFailOver(t *testing.T) {
	parallel(t)
	url, pg := pgtest.Database(t)
	var servers []*haServer
	for i := 0; i < 3; i++ {
		dir := t.TempDir()
		if i > 0 {
			// The admin key is in the store; the operator gives the other servers its profile.
			if err := os.WriteFile(filepath.Join(dir, "credentials"), readFileT(t, filepath.Join(servers[0].dir, "credentials")), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		e, cmd, run := binaryServerWith(t, dir, &haleBin, []string{}, "--store", url)
		servers = append(servers, &haServer{e: e, cmd: cmd, run: run, dir: dir})
	}
	f := &haFleet{t: t, pg: pg, servers: servers}
	f.logsOnFailure()
	ctx := context.Background()
	first := f.leader(30*time.Second, "three servers started")
	var lc string
	for _, s := range servers {
		lc = s.e.script("ha", "on_create.sh", "#!/bin/bash\ntrue\n")
	}
	if _, err := first.e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("ha"), InstanceGroups: fourNodes(lc)}); err != nil {
		t.Fatal(err)
	}
	// described: every running server answers DescribeCluster from the shared store (a server
	// that lost the lease starts over as a candidate: its API is back a moment later).
	described := func(what string) {
		t.Helper()
		for _, s := range servers {
			if s.cmd == nil {
				continue
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := s.e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("ha")})
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s's DescribeCluster: %v", what, s.e.url, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	described("created through the leader")

	// The leader's SIGKILL: it never releases its lease.
	killed := time.Now()
	first.cmd.Process.Signal(syscall.SIGKILL)
	first.cmd.Wait()
	first.cmd = nil
	second := f.leader(30*time.Second, "after the leader's SIGKILL") // among the servers still running
	t.Logf("leader SIGKILL -> another server leads: %.2f s", time.Since(killed).Seconds())
	described("after the failover")
	// The CLI, given every server, moves past the one that is gone.
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.e.url)
	}
	cli := haleCmd(first.dir, "list-clusters", "--endpoint-url", first.e.url, "--query", "ClusterSummaries[].ClusterName", "--output", "text")
	cli.Env = append(cli.Env, "HALE_ENDPOINT_URLS="+strings.Join(urls, ","))
	if out, err := cli.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ha" {
		t.Fatalf("hale list-clusters with the leader gone and HALE_ENDPOINT_URLS: %v\n%s", err, out)
	}
	first.cmd = first.run()
	time.Sleep(2 * time.Second) // long enough to campaign several times
	if first.leading() != 0 || f.leader(5*time.Second, "the killed server restarted") != second {
		t.Fatal("the restarted server took the lease from a live leader")
	}

	token := func() int64 {
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var tok int64
		if err := db.QueryRow(`SELECT token FROM leases WHERE name = 'reconcilers'`).Scan(&tok); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	before := token()

	// PostgreSQL killed (a crash), restarted 6 s later: longer than the lease (4 s), so the
	// leader must step down and a new tenure begin.
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	f.leader(60*time.Second, "after PostgreSQL's restart")
	described("after PostgreSQL's restart")
	afterCrash := token()
	if afterCrash <= before {
		t.Fatalf("lease token %d after the database was out longer than the lease, want more than %d: a leader went on without its lease", afterCrash, before)
	}

	// PostgreSQL stopped for 30 s (connections open, unanswered).
	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Second)
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	f.leader(60*time.Second, "after PostgreSQL's 30 s stop")
	described("after PostgreSQL's 30 s stop")
	if tok := token(); tok <= afterCrash {
		t.Fatalf("lease token %d after a 30 s stop of the database, want more than %d", tok, afterCrash)
	}
	for _, s := range servers {
		if s.cmd.ProcessState != nil {
			t.Fatalf("server %s exited: %s", s.e.url, s.cmd.ProcessState)
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		if strings.Contains(string(log), "panic") {
			t.Fatalf("server %s panicked:\n%s", s.e.url, log)
		}
	}
}
