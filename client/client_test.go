package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/server"
)

// isolate clears the AWS settings of the environment the tests run in, so that only what a
// test sets is seen, and points the default shared files at empty files.
func isolate(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for _, k := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_SAGEMAKER", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", home)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv(DataDirEnv, filepath.Join(home, "no-hale-here"))
	return home
}

func startServer(t *testing.T, o server.Options) *server.App {
	t.Helper()
	o.Listen = "127.0.0.1:0"
	o.DataDir = t.TempDir()
	o.CheckResponses = true
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := server.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return app
}

func TestDescribeUnknownClusterIsResourceNotFound(t *testing.T) {
	isolate(t)
	app := startServer(t, server.Options{})
	// The hale profile is found through HALE_DATA_DIR alone: no AWS_* variable names it.
	t.Setenv(DataDirEnv, filepath.Dir(app.CredentialsFile))
	c, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile() != "hale" || c.Endpoint() != app.URL+"/" || c.Region() != "us-west-2" {
		t.Fatalf("profile %q endpoint %q region %q", c.Profile(), c.Endpoint(), c.Region())
	}
	_, err = c.Call(context.Background(), "DescribeCluster", []byte(`{"ClusterName":"nope"}`))
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeResourceNotFound {
		t.Fatalf("got %v, want ResourceNotFound", err)
	}
	if !strings.Contains(e.Message, "nope") {
		t.Errorf("message %q does not name the cluster", e.Message)
	}

	var out struct{ ClusterSummaries []map[string]any }
	if err := c.CallJSON(context.Background(), "ListClusters", map[string]any{"MaxResults": 5}, &out); err != nil {
		t.Fatal(err)
	}
	if out.ClusterSummaries == nil || len(out.ClusterSummaries) != 0 {
		t.Errorf("ListClusters on a new server: %+v", out)
	}
}

// Options.DataDir names the server's data directory in place of HALE_DATA_DIR (which points
// elsewhere here): several servers' clients in one process, each with its own.
func TestDataDirOption(t *testing.T) {
	isolate(t)
	a, b := startServer(t, server.Options{}), startServer(t, server.Options{})
	for _, app := range []*server.App{a, b} {
		c, err := New(context.Background(), Options{DataDir: filepath.Dir(app.CredentialsFile)})
		if err != nil {
			t.Fatal(err)
		}
		if c.Profile() != "hale" || c.Endpoint() != app.URL+"/" {
			t.Fatalf("profile %q endpoint %q, want hale at %s", c.Profile(), c.Endpoint(), app.URL)
		}
		if err := c.CallJSON(context.Background(), "ListClusters", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), "no-hale-here") {
		t.Fatalf("without DataDir the client reads HALE_DATA_DIR's directory: %v", err)
	}
}

func TestSharedFilesThroughAWSVariables(t *testing.T) {
	isolate(t)
	app := startServer(t, server.Options{})
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", app.CredentialsFile)
	t.Setenv("AWS_CONFIG_FILE", app.ConfigFile)
	c, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CallJSON(context.Background(), "ListClusters", nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointPrecedence(t *testing.T) {
	isolate(t)
	app := startServer(t, server.Options{})
	t.Setenv(DataDirEnv, filepath.Dir(app.CredentialsFile))
	ctx := context.Background()

	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
	c, err := New(ctx, Options{})
	if err != nil || c.Endpoint() != "http://127.0.0.1:2/" {
		t.Fatalf("AWS_ENDPOINT_URL: %v %v", c, err)
	}
	t.Setenv("AWS_ENDPOINT_URL_SAGEMAKER", "http://127.0.0.1:3")
	if c, _ = New(ctx, Options{}); c.Endpoint() != "http://127.0.0.1:3/" {
		t.Fatalf("AWS_ENDPOINT_URL_SAGEMAKER: %s", c.Endpoint())
	}
	if c, _ = New(ctx, Options{EndpointURL: app.URL, Region: "eu-west-1"}); c.Endpoint() != app.URL+"/" || c.Region() != "eu-west-1" {
		t.Fatalf("Options: %s %s", c.Endpoint(), c.Region())
	}
	// The connection failure names the endpoint, as the AWS CLI's message does.
	c, _ = New(ctx, Options{})
	_, err = c.Call(ctx, "ListClusters", nil)
	if err == nil || !strings.Contains(err.Error(), `Could not connect to the endpoint URL: "http://127.0.0.1:3/"`) {
		t.Fatalf("got %v", err)
	}
	var e *api.Error
	if errors.As(err, &e) {
		t.Fatalf("a connection failure is not a service error: %v", err)
	}
}

func TestNoEndpointAndUnknownProfile(t *testing.T) {
	isolate(t)
	_, err := New(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), "--endpoint-url") || !strings.Contains(err.Error(), "hale server") {
		t.Fatalf("got %v", err)
	}
	_, err = New(context.Background(), Options{Profile: "nobody", EndpointURL: "http://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "The config profile (nobody) could not be found") {
		t.Fatalf("got %v", err)
	}
	_, err = New(context.Background(), Options{EndpointURL: "127.0.0.1:7070"})
	if err == nil || !strings.Contains(err.Error(), "scheme is missing") {
		t.Fatalf("got %v", err)
	}
}

func TestProfileWins(t *testing.T) {
	home := isolate(t)
	app := startServer(t, server.Options{})
	t.Setenv(DataDirEnv, filepath.Dir(app.CredentialsFile))
	// A [default] profile with a key hale does not know: the hale profile is still preferred
	// when none is named, and naming default gets the server's UnrecognizedClientException.
	os.WriteFile(filepath.Join(home, "credentials"), []byte("[default]\naws_access_key_id = AKIAUNKNOWNUNKNOWN00\naws_secret_access_key = x\n"), 0o600)
	ctx := context.Background()
	c, err := New(ctx, Options{})
	if err != nil || c.Profile() != "hale" {
		t.Fatalf("%v %v", c, err)
	}
	if _, err := c.Call(ctx, "ListClusters", nil); err != nil {
		t.Fatal(err)
	}
	c, err = New(ctx, Options{Profile: "default", EndpointURL: app.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(ctx, "ListClusters", nil)
	if !api.IsCode(err, api.CodeUnrecognizedClientException) {
		t.Fatalf("got %v", err)
	}
	t.Setenv("AWS_PROFILE", "default")
	if c, err = New(ctx, Options{EndpointURL: app.URL}); err != nil || c.Profile() != "default" {
		t.Fatalf("AWS_PROFILE ignored: %v %v", c, err)
	}
}

func TestMissingCredentials(t *testing.T) {
	isolate(t)
	c, err := New(context.Background(), Options{EndpointURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(context.Background(), "ListClusters", nil)
	if err == nil || !strings.Contains(err.Error(), "Unable to locate credentials") {
		t.Fatalf("got %v", err)
	}
}

func TestThrottlingIsRetried(t *testing.T) {
	isolate(t)
	// Five requests a second with a burst of one: back-to-back calls are throttled and succeed
	// on a retry.
	app := startServer(t, server.Options{Rate: 5, Burst: 1})
	t.Setenv(DataDirEnv, filepath.Dir(app.CredentialsFile))
	c, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var debug strings.Builder
	c.Debug = &debug
	for i := range 4 {
		if err := c.CallJSON(context.Background(), "ListClusters", nil, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	log := debug.String()
	if !strings.Contains(log, "ThrottlingException") {
		t.Errorf("no call was throttled; the test proves nothing:\n%s", log)
	}
	if !strings.Contains(log, "Signature=<redacted>") || strings.Contains(log, secretOf(t, app.CredentialsFile)) {
		t.Errorf("debug output must redact the signature and never hold the secret:\n%s", log)
	}
}

func secretOf(t *testing.T, credentialsFile string) string {
	b, err := os.ReadFile(credentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "aws_secret_access_key" {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no secret in " + credentialsFile)
	return ""
}

func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		body, header, code, msg string
	}{
		{`{"__type":"com.amazonaws.sagemaker#ValidationException:http://internal.amazon.com/","message":"bad"}`, "", "ValidationException", "bad"},
		{`{"__type":"ResourceNotFound","Message":"gone"}`, "", "ResourceNotFound", "gone"},
		{`not json`, "ThrottlingException:extra", "ThrottlingException", "not json"},
		{``, "", "503", "Service Unavailable"},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("x-amzn-ErrorType", tc.header)
		}
		status := 400
		if tc.code == "503" {
			status = 503
		}
		e := parseError(status, h, []byte(tc.body))
		if e.Code != tc.code || e.Message != tc.msg {
			t.Errorf("%s: got %q %q, want %q %q", tc.body, e.Code, e.Message, tc.code, tc.msg)
		}
	}
}
