package console

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/service"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// clock is a settable clock for sessions and tokens.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is a console over a fresh store and service, served by httptest.
type fixture struct {
	t     testing.TB
	st    store.Store
	svc   *service.Service
	con   *Console
	srv   *httptest.Server
	clock *clock
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hale.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	f := &fixture{t: t, st: st, svc: service.New(st, service.Config{}), clock: clk}
	verifier := &auth.Verifier{Service: "sagemaker", Keys: func(ctx context.Context, id string) (*store.AccessKey, error) {
		var k *store.AccessKey
		err := st.Read(ctx, func(tx store.Tx) error {
			var err error
			k, err = tx.AccessKey(id)
			return err
		})
		return k, err
	}}
	f.con = New(Config{Store: st, Service: f.svc, Verifier: verifier, Now: clk.now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.srv = httptest.NewServer(f.con)
	t.Cleanup(f.srv.Close)
	return f
}

// key stores a new access key for principal with those actions and cluster patterns.
func (f *fixture) key(principal string, actions, clusters []string) *store.AccessKey {
	f.t.Helper()
	k, err := auth.NewAccessKey(principal, actions, clusters)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.st.Write(context.Background(), func(tx store.Tx) error { return tx.InsertAccessKey(k) }); err != nil {
		f.t.Fatal(err)
	}
	return k
}

// cluster creates a cluster through the service, as hale itself (no key in the context).
func (f *fixture) cluster(name string) {
	f.t.Helper()
	in, err := api.DecodeInput(api.LookupOperation("CreateCluster"), []byte(clusterDoc(name)))
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.svc.CreateCluster(context.Background(), in.(*api.CreateClusterRequest)); err != nil {
		f.t.Fatal(err)
	}
}

func clusterDoc(name string) string {
	return `{"ClusterName": "` + name + `", "InstanceGroups": [{"InstanceGroupName": "workers", "InstanceType": "ml.c5.xlarge",
	"InstanceCount": 1, "ExecutionRole": "arn:aws:iam::123456789012:role/r",
	"LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lc", "OnCreate": "on_create.sh"}}]}`
}

// browser is an HTTP client with a cookie jar that does not follow redirects, and the CSRF
// token of its session once signed in.
type browser struct {
	f    *fixture
	c    *http.Client
	csrf string
}

func (f *fixture) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{f: f, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn redeems a fresh sign-in URL for k and reads the session's CSRF token from the page.
func (b *browser) signIn(k *store.AccessKey) {
	b.f.t.Helper()
	url, _ := b.f.con.SignInURL(b.f.srv.URL, k.ID)
	resp := b.get(url)
	if resp.StatusCode != http.StatusSeeOther {
		b.f.t.Fatalf("sign-in URL: %d", resp.StatusCode)
	}
	page := b.get(b.f.srv.URL + Path + "/")
	body, _ := io.ReadAll(page.Body)
	m := regexp.MustCompile(`<meta name="csrf" content="([^"]+)">`).FindSubmatch(body)
	if m == nil {
		b.f.t.Fatalf("no CSRF token in the console's page (%d):\n%s", page.StatusCode, body)
	}
	b.csrf = string(m[1])
}

func (b *browser) get(url string) *http.Response {
	b.f.t.Helper()
	resp, err := b.c.Get(url)
	if err != nil {
		b.f.t.Fatal(err)
	}
	b.f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// getJSON GETs a console API path and decodes the answer into out; it returns the status.
func (b *browser) getJSON(path string, out any) int {
	b.f.t.Helper()
	resp := b.get(b.f.srv.URL + path)
	json.NewDecoder(resp.Body).Decode(out)
	return resp.StatusCode
}

// post sends a JSON body with the given headers (nil: this session's CSRF token and origin).
func (b *browser) post(path, body string, header map[string]string) (int, errorBody) {
	b.f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if header == nil {
		header = map[string]string{"Origin": b.f.srv.URL, csrfHeader: b.csrf}
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var e errorBody
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e
}

// events returns the descriptions of a cluster's events.
func (f *fixture) events(cluster string) string {
	f.t.Helper()
	var out []string
	f.st.Read(context.Background(), func(tx store.Tx) error {
		c, err := tx.Cluster(cluster)
		if err != nil {
			return err
		}
		evs, err := tx.ListEvents(store.EventQuery{ClusterID: c.ID, Limit: 1000})
		for _, e := range evs {
			out = append(out, e.Description)
		}
		return err
	})
	return strings.Join(out, "\n")
}
