package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// EndpointsEnv names more hale servers of one store (comma-separated URLs), tried in turn when
// the endpoint does not take a connection: several servers on one PostgreSQL answer the same
// API (docs/architecture.md, Store). It is hale's own, beside AWS_ENDPOINT_URL, which names
// one endpoint as the AWS CLI expects.
const EndpointsEnv = "HALE_ENDPOINT_URLS"

// parseEndpoints is the configured endpoint followed by others (comma-separated), each once.
func parseEndpoints(first, others string) ([]*url.URL, error) {
	var out []*url.URL
	seen := map[string]bool{}
	for i, raw := range append([]string{first}, strings.Split(others, ",")...) {
		raw = strings.TrimSpace(raw)
		if raw == "" || seen[raw] {
			continue
		}
		seen[raw] = true
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Host == "" {
			if i == 0 {
				return nil, fmt.Errorf("Bad value for --endpoint-url %q: scheme is missing.  Must be of the form http://<hostname>/ or https://<hostname>/", raw)
			}
			return nil, fmt.Errorf("Bad value in %s %q: each must be of the form http://<hostname>/ or https://<hostname>/", EndpointsEnv, raw)
		}
		if u.Path == "" {
			u.Path = "/"
		}
		out = append(out, u)
	}
	return out, nil
}

// endpoint is the server that last answered.
func (c *Client) endpoint() *url.URL { return c.endpoints[int(c.cur.Load())%len(c.endpoints)] }

// roundTrip sends the request build makes for an endpoint, starting with the one that last
// answered and moving to the next only when a connection could not be made: a request that
// reached a server is never sent again to another (a CreateCluster must not be made twice).
// It returns the answer and the endpoint that gave it, or the last endpoint tried.
func (c *Client) roundTrip(ctx context.Context, build func(base *url.URL) (*http.Request, error)) (*http.Response, *url.URL, error) {
	start := int(c.cur.Load())
	var last *url.URL
	var lastErr error
	for i := range c.endpoints {
		k := (start + i) % len(c.endpoints)
		last = c.endpoints[k]
		req, err := build(last)
		if err != nil {
			return nil, last, &userError{err.Error(), err}
		}
		resp, err := c.http.Do(req)
		if err == nil {
			c.cur.Store(int32(k))
			return resp, last, nil
		}
		lastErr = err
		if ctx.Err() != nil || !notConnected(err) {
			return nil, last, err
		}
		c.debugf("%s does not take connections (%v); trying the next server\n", last, err)
	}
	return nil, last, lastErr
}

// notConnected reports whether err is a failure to connect (nothing was sent).
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
