package server_test

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/store"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsNameTheCredentialsButNeverASecret: the first start logs where the admin profile was
// written; no log line, at debug level and through failed signatures, carries a secret.
func TestLogsNameTheCredentialsButNeverASecret(t *testing.T) {
	var logs syncBuffer
	e := servertest.Start(t, server.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := servertest.Ctx(t)
	createFromFile(t, e, "testdata/slurm-cluster.json", "logged")
	e.Client(e.Admin.ID, "not-the-secret-not-the-secret-not-the-se").ListClusters(ctx, &sagemaker.ListClustersInput{})
	post(t, e, "CreateCluster", `{"ClusterName": "x_y"}`, time.Now().Add(-30*time.Minute))
	out := logs.String()
	if !strings.Contains(out, e.App.CredentialsFile) || !strings.Contains(out, "profile=hale") {
		t.Errorf("the log does not say where the admin profile is:\n%s", out)
	}
	if !strings.Contains(out, "operation=CreateCluster") {
		t.Errorf("debug log lacks requests:\n%s", out)
	}
	if strings.Contains(out, e.Admin.Secret) {
		t.Fatalf("a secret appears in the log:\n%s", out)
	}
}

// TestLogsEndpointNeedsTheAPIsKeys: /hale/logs answers signed requests of keys that may
// describe the cluster, and refuses the others as the API does.
func TestLogsEndpointNeedsTheAPIsKeys(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	createFromFile(t, e, "testdata/slurm-cluster.json", "logged")
	e.Write(t, func(tx store.Tx) error {
		c, err := tx.Cluster("logged")
		if err != nil {
			return err
		}
		return tx.AppendLogEvents("/aws/sagemaker/Clusters/logged/"+c.ID, "LifecycleConfig/g/i-0123456789abcdef0", c.ID,
			[]store.LogEvent{{Time: time.Now(), Message: "hello from on_create.sh"}})
	})
	t.Setenv("HALE_DATA_DIR", e.Options.DataDir)
	c, err := client.New(servertest.Ctx(t), client.Options{Profile: "hale"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Get(servertest.Ctx(t), server.LogsPath, url.Values{"cluster": {"logged"}, "stream": {"LifecycleConfig/g/i-0123456789abcdef0"}})
	if err != nil || !strings.Contains(string(body), "hello from on_create.sh") {
		t.Fatalf("signed GET: %s %v", body, err)
	}
	resp, err := http.Get(e.App.URL + server.LogsPath + "?cluster=logged")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-amzn-ErrorType") != "MissingAuthenticationToken" {
		t.Fatalf("unsigned GET: %d %s", resp.StatusCode, resp.Header.Get("x-amzn-ErrorType"))
	}
	reader, _ := auth.NewAccessKey("other-team", []string{"sagemaker:*"}, []string{"team-b-*"})
	e.Write(t, func(tx store.Tx) error { return tx.InsertAccessKey(reader) })
	t.Setenv("HALE_DATA_DIR", t.TempDir()) // no [hale] profile to prefer: the environment's key signs
	t.Setenv("AWS_ACCESS_KEY_ID", reader.ID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", reader.Secret)
	other, _ := client.New(servertest.Ctx(t), client.Options{EndpointURL: e.App.URL, Region: "us-west-2", Profile: ""})
	if _, err := other.Get(servertest.Ctx(t), server.LogsPath, url.Values{"cluster": {"logged"}}); !api.IsCode(err, api.CodeAccessDeniedException) {
		t.Fatalf("another team's key: %v", err)
	}
}
