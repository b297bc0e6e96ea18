package server_test

import (
	"bytes"
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
