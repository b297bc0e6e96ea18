package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// prometheus-config warns when the target's /metrics refuses the token given (or asks for one
// when none is given), and says nothing when the token is right, the server has none, or the
// server cannot be reached.
func TestCheckMetricsToken(t *testing.T) {
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer right" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer guarded.Close()
	open := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer open.Close()
	gone := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	gone.Close()
	for _, c := range []struct {
		srv, token, want string
	}{
		{guarded.URL, "right", ""},
		{guarded.URL, "wrong", "refuses this --metrics-token"},
		{guarded.URL, "", "give it with --metrics-token"},
		{open.URL, "any", ""},
		{gone.URL, "any", ""},
	} {
		u, _ := url.Parse(c.srv + "/")
		got := checkMetricsToken(context.Background(), u, c.token)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s with token %q: %q, want %q", c.srv, c.token, got, c.want)
		}
	}
}
