package client

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/server"
)

// TestMovesToAnotherServer: an endpoint that takes no connection (its server is gone) is
// passed over for the next of HALE_ENDPOINT_URLS, which is kept for the calls after.
func TestMovesToAnotherServer(t *testing.T) {
	isolate(t)
	app := startServer(t, server.Options{})
	t.Setenv(DataDirEnv, filepath.Dir(app.CredentialsFile))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close() // nothing listens there now: a server that went away
	t.Setenv(EndpointsEnv, " "+app.URL+" , "+gone)
	c, err := New(context.Background(), Options{EndpointURL: gone})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.endpoints) != 2 {
		t.Fatalf("endpoints %v: want the configured one and one more, each once", c.endpoints)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Call(context.Background(), "ListClusters", nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if c.Endpoint() != app.URL+"/" {
			t.Fatalf("call %d answered by %s, want %s", i, c.Endpoint(), app.URL)
		}
	}
	if _, err := c.Get(context.Background(), "/healthz", nil); err != nil {
		t.Fatalf("GET through the server that answers: %v", err)
	}

	// With no other server, the error names the endpoint, as the AWS CLI's does.
	t.Setenv(EndpointsEnv, "")
	c, err = New(context.Background(), Options{EndpointURL: gone})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), "ListClusters", nil); err == nil || !strings.Contains(err.Error(), "Could not connect to the endpoint URL: \""+gone+"/\"") {
		t.Fatalf("no server answers: %v", err)
	}
	t.Setenv(EndpointsEnv, "not a url")
	if _, err := New(context.Background(), Options{EndpointURL: gone}); err == nil || !strings.Contains(err.Error(), EndpointsEnv) {
		t.Fatalf("a bad %s: %v", EndpointsEnv, err)
	}
}
