package alarms

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// The JSON of GET /api/v1/alerts as Prometheus 2.x answers it: one firing alert (twice, for two
// label sets), one pending.
const alertsJSON = `{"status":"success","data":{"alerts":[
{"labels":{"alertname":"XidBurst","instance":"a"},"annotations":{},"state":"firing","activeAt":"2026-12-02T10:00:00Z","value":"3e+00"},
{"labels":{"alertname":"XidBurst","instance":"b"},"annotations":{},"state":"firing","activeAt":"2026-12-02T10:00:00Z","value":"1e+00"},
{"labels":{"alertname":"NodesDown"},"annotations":{},"state":"pending","activeAt":"2026-12-02T10:00:00Z","value":"1e+00"}]}}`

// An alarm is in ALARM while an alert of its name fires; a pending alert (its rule's for: not
// yet passed) and an unknown name are not; a Prometheus that answers an error is an error.
func TestPrometheusFiring(t *testing.T) {
	broken := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/alerts" {
			http.NotFound(w, r)
			return
		}
		if broken {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"error","errorType":"unavailable","error":"rule manager not ready"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(alertsJSON))
	}))
	defer srv.Close()
	p, err := NewPrometheus(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Firing(context.Background(), []string{"NodesDown", "XidBurst", "NoSuchAlert"})
	if err != nil || !slices.Equal(got, []string{"XidBurst"}) {
		t.Errorf("Firing: %v, %v; want [XidBurst]", got, err)
	}
	if p.String() != "Prometheus at "+srv.URL {
		t.Errorf("String: %q", p.String())
	}
	broken = true
	if got, err := p.Firing(context.Background(), []string{"XidBurst"}); err == nil || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("a Prometheus answering 503: %v, %v; want an error naming it", got, err)
	}
	if _, err := NewPrometheus("http://[::1"); err == nil {
		t.Error("NewPrometheus accepted a malformed URL")
	}
}
