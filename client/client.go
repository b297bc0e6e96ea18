// Package client calls hale's SageMaker cluster API the way the AWS SDKs do: POST / with
// X-Amz-Target: SageMaker.<Operation>, an AWS JSON 1.1 body and a SigV4 signature, with
// credentials, region and endpoint found as the AWS CLI finds them (plus the files `hale server`
// writes to its data directory). The hale CLI is built on it; Go programs may use it too.
package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/haleproject/hale/api"
)

// ContentType is the media type of AWS JSON 1.1 requests.
const ContentType = "application/x-amz-json-1.1"

// Retry policy: throttling and server faults are retried with capped exponential backoff and
// jitter, as the AWS SDKs' standard mode does, so that a burst of CLI calls rides out the
// server's per-key rate limit instead of failing.
const (
	maxRetries  = 3
	baseBackoff = 100 * time.Millisecond
	maxBackoff  = 5 * time.Second
)

// Client calls hale's API. It is safe for concurrent use, except for changing Debug.
type Client struct {
	cfg aws.Config
	// endpoints are the servers, the configured endpoint first, then HALE_ENDPOINT_URLS'
	// others; cur is the one that last answered (failover.go).
	endpoints []*url.URL
	cur       atomic.Int32
	profile   string
	signer    *v4.Signer
	http      *http.Client

	// Debug, when not nil, receives every request and response: headers (with the signature
	// redacted; the secret key is never sent, so never shown) and bodies.
	Debug io.Writer
}

// New returns a Client configured from o, the environment and the AWS shared files. See
// Options for the precedence of each setting. It fails when no endpoint can be found or the
// named profile does not exist; missing credentials are reported by the first Call.
func New(ctx context.Context, o Options) (*Client, error) {
	cfg, endpoint, profile, err := load(ctx, o)
	if err != nil {
		return nil, err
	}
	endpoints, err := parseEndpoints(endpoint, os.Getenv(EndpointsEnv))
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg:       cfg,
		endpoints: endpoints,
		profile:   profile,
		signer:    v4.NewSigner(),
		http:      &http.Client{Timeout: 60 * time.Second},
	}, nil
}

// Endpoint returns the URL requests are sent to (the server that last answered).
func (c *Client) Endpoint() string { return c.endpoint().String() }

// Region returns the region requests are signed for.
func (c *Client) Region() string { return c.cfg.Region }

// Profile returns the AWS profile the configuration came from ("default" when none was named).
func (c *Client) Profile() string { return c.profile }

// Call invokes operation (e.g. "ListClusters") with input, a JSON object (empty means {}), and
// returns the response body. A service error is returned as *api.Error with the code and
// message the server sent; other errors (connection, credentials) are plain errors.
func (c *Client) Call(ctx context.Context, operation string, input []byte) ([]byte, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	if c.cfg.Credentials == nil {
		return nil, errNoCredentials(nil)
	}
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, errNoCredentials(err)
	}
	sum := sha256.Sum256(input)
	payloadHash := hex.EncodeToString(sum[:])
	for attempt := 0; ; attempt++ {
		status, body, err := c.do(ctx, creds, operation, input, payloadHash)
		if err != nil {
			return nil, err
		}
		if status.code == http.StatusOK {
			return body, nil
		}
		apiErr := parseError(status.code, status.header, body)
		if attempt >= maxRetries || !retryable(status.code, apiErr.Code) {
			return nil, apiErr
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// CallJSON invokes operation with in marshalled as JSON (nil means {}; []byte and
// json.RawMessage are sent as they are) and unmarshals the response into out unless out is
// nil. Errors are as for Call.
func (c *Client) CallJSON(ctx context.Context, operation string, in, out any) error {
	var body []byte
	switch v := in.(type) {
	case nil:
	case []byte:
		body = v
	case json.RawMessage:
		body = v
	default:
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encoding %s input: %w", operation, err)
		}
	}
	resp, err := c.Call(ctx, operation, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp, out); err != nil {
		return fmt.Errorf("decoding %s response: %w", operation, err)
	}
	return nil
}

// httpStatus is the status line and headers of an answer.
type httpStatus struct {
	code   int
	header http.Header
}

// do sends one signed attempt and returns the answer.
func (c *Client) do(ctx context.Context, creds aws.Credentials, operation string, input []byte, payloadHash string) (httpStatus, []byte, error) {
	resp, endpoint, err := c.roundTrip(ctx, func(base *url.URL) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.String(), bytes.NewReader(input))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", ContentType)
		req.Header.Set("X-Amz-Target", api.TargetPrefix+"."+operation)
		req.Header.Set("User-Agent", "hale-cli")
		if err := c.signer.SignHTTP(ctx, creds, req, payloadHash, api.SigningName, c.cfg.Region, time.Now()); err != nil {
			return nil, fmt.Errorf("signing the request: %w", err)
		}
		c.debugf("%s %s (operation %s, region %s, profile %s)\n%s\n%s\n", req.Method, req.URL, operation, c.cfg.Region, c.profile, headerText(req.Header), input)
		return req, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return httpStatus{}, nil, ctx.Err()
		}
		var ue *userError
		if errors.As(err, &ue) {
			return httpStatus{}, nil, err
		}
		c.debugf("%v\n", err)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return httpStatus{}, nil, &userError{fmt.Sprintf("Read timeout on endpoint URL: %q", endpoint.String()), err}
		}
		return httpStatus{}, nil, &userError{fmt.Sprintf("Could not connect to the endpoint URL: %q", endpoint.String()), err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpStatus{}, nil, fmt.Errorf("reading the %s response from %s: %w", operation, endpoint, err)
	}
	c.debugf("response %s\n%s\n%s\n", resp.Status, headerText(resp.Header), body)
	return httpStatus{resp.StatusCode, resp.Header}, body, nil
}

// userError is a failure worded for the CLI's user as the AWS CLI words it (naming the
// endpoint, not Go's dial error; not the SDK's credential-chain detail), with the cause kept
// for errors.Is and errors.As.
type userError struct {
	msg   string
	cause error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.cause }

func errNoCredentials(err error) error {
	return &userError{"Unable to locate credentials. Start `hale server` (it writes the [hale] profile to DATA_DIR/credentials), pass --profile, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.", err}
}

// parseError reads an error answer as AWS clients read AWS JSON 1.1 errors: the code from the
// body's __type (or the x-amzn-ErrorType header), keeping what follows a '#' namespace and what
// precedes a ':' suffix; the message from "message" or "Message".
func parseError(status int, header http.Header, body []byte) *api.Error {
	var fields struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(body, &fields)
	code := sanitizeCode(fields.Type)
	if code == "" {
		code = sanitizeCode(header.Get("x-amzn-ErrorType"))
	}
	if code == "" {
		code = strconv.Itoa(status)
	}
	msg := fields.Message
	if msg == "" {
		msg = fields.MessageU
	}
	if msg == "" && !json.Valid(body) {
		msg = strings.TrimSpace(string(body))
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &api.Error{Code: code, Message: msg}
}

func sanitizeCode(s string) string {
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// retryable reports whether an error answer is worth another attempt: throttling and faults.
func retryable(status int, code string) bool {
	switch code {
	case api.CodeThrottlingException, "Throttling", "ThrottledException", "TooManyRequestsException", "RequestLimitExceeded":
		return true
	}
	return status >= 500 || status == http.StatusTooManyRequests
}

// backoff returns the delay before retry attempt+1: half the exponential step plus random
// jitter up to the other half, so that concurrent clients spread out but always wait.
func backoff(attempt int) time.Duration {
	d := baseBackoff << attempt
	if d > maxBackoff {
		d = maxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var signatureRe = regexp.MustCompile(`Signature=[0-9a-f]+`)

// headerText renders headers one per line, sorted, with the request signature and any session
// token redacted.
func headerText(h http.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := strings.Join(h[k], ", ")
		switch strings.ToLower(k) {
		case "authorization":
			v = signatureRe.ReplaceAllString(v, "Signature=<redacted>")
		case "x-amz-security-token":
			v = "<redacted>"
		}
		fmt.Fprintf(&b, "  %s: %s\n", k, v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (c *Client) debugf(format string, args ...any) {
	if c.Debug != nil {
		fmt.Fprintf(c.Debug, "DEBUG: "+format, args...)
	}
}
