// Package servertest starts a real hale server for tests: a real SQLite store in a temporary
// directory, the real HTTP handler on a loopback port, and a real AWS SDK for Go v2 SageMaker
// client configured from the AWS profile the server wrote, exactly as a user's would be.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/store"
)

// Env is a running server and clients for it.
type Env struct {
	App     *server.App
	Options server.Options
	// SDK is a SageMaker client loaded from the server's [hale] profile with the SDK's standard
	// retryer, as users run it. The retryer never retries the codes tests assert on
	// (ValidationException, ResourceNotFound, signature errors...), except ThrottlingException:
	// tests of throttling build a client with NoRetries. It does retry transport errors, which
	// the Go SDK produces now and then on its own: it closes a request body while the HTTP
	// transport may still be checking it, and the transport then drops the connection under the
	// response being read (aws/aws-sdk-go-v2 issues #1825, #2737; seen here about once in 2,000
	// calls with 25 kB answers on loopback).
	SDK *sagemaker.Client
	// AWS is the aws.Config behind SDK.
	AWS aws.Config
	// Admin is the admin access key the server created.
	Admin *store.AccessKey
}

// Start starts a server with o (Listen and DataDir default to a free loopback port and a
// temporary directory; responses are checked against the model) and stops it when t ends.
func Start(t testing.TB, o server.Options) *Env {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.CheckResponses = true
	app, err := server.Start(o)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { app.Close() })
	e := &Env{App: app, Options: o}
	e.AWS = LoadConfig(t, app)
	e.SDK = sagemaker.NewFromConfig(e.AWS)
	if err := app.Store.Read(context.Background(), func(tx store.Tx) error {
		keys, err := tx.ListAccessKeys()
		if err == nil && len(keys) > 0 {
			e.Admin = keys[0]
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

// LoadConfig loads an aws.Config from the [hale] profile files the server wrote, as the AWS CLI
// or any SDK would with AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE and AWS_PROFILE set.
func LoadConfig(t testing.TB, app *server.App) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithSharedCredentialsFiles([]string{app.CredentialsFile}),
		config.WithSharedConfigFiles([]string{app.ConfigFile}),
		config.WithSharedConfigProfile(server.Profile))
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != app.URL {
		t.Fatalf("profile endpoint_url = %v, want %s", cfg.BaseEndpoint, app.URL)
	}
	return cfg
}

// NoRetries turns the SDK's retries off.
func NoRetries(o *sagemaker.Options) {
	o.Retryer = aws.NopRetryer{}
}

// Client returns a SageMaker client for the server signed with the given static key, with the
// SDK's standard retryer.
func (e *Env) Client(id, secret string) *sagemaker.Client {
	cfg := e.AWS.Copy()
	cfg.Credentials = aws.NewCredentialsCache(staticCreds{id, secret})
	return sagemaker.NewFromConfig(cfg)
}

type staticCreds struct{ id, secret string }

func (s staticCreds) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: s.id, SecretAccessKey: s.secret, Source: "test"}, nil
}

// Write runs fn in a store write transaction, failing the test on error. Tests use it to stand
// in for the reconcilers of a provider (marking a cluster InService, adding nodes).
func (e *Env) Write(t testing.TB, fn func(tx store.Tx) error) {
	t.Helper()
	if err := e.App.Store.Write(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// Ctx returns a context that ends with the test or after a minute.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
