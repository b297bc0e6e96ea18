package server_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store/postgres/pgtest"
)

// TestServersShareAPostgresStore: two hale servers on one real PostgreSQL database both answer
// the API with the same records; exactly one runs the reconcilers, and when it stops, the
// other takes them over.
func TestServersShareAPostgresStore(t *testing.T) {
	url, _ := pgtest.Database(t)
	a := servertest.Start(t, server.Options{Store: url})
	// The second server finds the admin key in the store; its operator gives it the profile.
	bDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(bDir, "credentials"), readFile(t, a.App.CredentialsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	b := servertest.Start(t, server.Options{Store: url, DataDir: bDir})

	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not after 30 s: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until("one of the two servers leads", func() bool { return a.App.Leading() != b.App.Leading() })

	// One agent CA in the store: an agent trusts whichever server leads, and an instance one
	// server revoked is refused by the other.
	if !bytes.Equal(a.App.AgentCA.CertPEM(), b.App.AgentCA.CertPEM()) {
		t.Fatal("the two servers have different agent CAs: an agent would trust only one of them")
	}
	if err := a.App.AgentCA.Revoke("i-0123456789abcdef0", "replaced"); err != nil {
		t.Fatal(err)
	}
	if !b.App.AgentCA.IsRevoked("i-0123456789abcdef0") {
		t.Fatal("an instance one server revoked is not revoked on the other")
	}

	arn := createFromFile(t, a, "../../examples/cluster.json", "shared")
	out, err := b.SDK.DescribeCluster(servertest.Ctx(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("shared")})
	if err != nil {
		t.Fatalf("the other server's DescribeCluster: %v", err)
	}
	if *out.ClusterArn != arn {
		t.Fatalf("the servers disagree: %s and %s", *out.ClusterArn, arn)
	}

	leader, standby := a, b
	if b.App.Leading() {
		leader, standby = b, a
	}
	// The console and /metrics work on the standby too: they read the shared store.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn, _ := standby.App.Console.SignInURL(standby.App.URL, a.Admin.ID)
	if resp, err := browser.Get(signIn); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the standby's console sign-in: %v %v", resp, err)
	}
	resp, err := browser.Get(standby.App.URL + "/console/api/clusters")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `"shared"`) {
		t.Fatalf("the standby's console lists the clusters: %d %s", resp.StatusCode, page)
	}
	if code, m := scrape(t, standby.App.URL+"/metrics", ""); code != http.StatusOK || !strings.Contains(m, "hale_leader 0") || !strings.Contains(m, "hale_clusters") {
		t.Fatalf("the standby's /metrics: %d\n%s", code, m)
	}
	if err := leader.App.Close(); err != nil {
		t.Fatal(err)
	}
	until("the standby leads once the leader stopped", standby.App.Leading)
	if _, err := standby.SDK.ListClusters(servertest.Ctx(t), &sagemaker.ListClustersInput{}); err != nil {
		t.Fatal(err)
	}
}
