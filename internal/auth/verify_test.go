package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/smithy-go"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

const (
	testRegion = "us-west-2"
	testID     = "AKIAHALETESTKEY00002"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

var testKey = &store.AccessKey{ID: testID, Secret: testSecret, Principal: "alice", Actions: []string{"sagemaker:*"}}

// lookupIn is a KeyLookup over a fixed set of keys.
func lookupIn(keys ...*store.AccessKey) KeyLookup {
	return func(_ context.Context, id string) (*store.AccessKey, error) {
		for _, k := range keys {
			if k.ID == id {
				return k, nil
			}
		}
		return nil, fmt.Errorf("access key %s: %w", id, store.ErrNotFound)
	}
}

// newServer starts a server that answers like hale's front end: it reads the body, verifies the
// request, and answers {"ClusterSummaries":[]} or the *api.Error in the AWS JSON 1.1 error form.
func newServer(t *testing.T, v *Verifier, tls bool) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading body: %v", err)
			return
		}
		k, err := v.Verify(r, body)
		if err != nil {
			e, ok := err.(*api.Error)
			if !ok {
				t.Errorf("Verify returned %T (%v), want *api.Error", err, err)
				e = api.AsError(err)
			}
			writeError(w, e)
			return
		}
		if k == nil {
			t.Error("Verify returned no key and no error")
		}
		if got := KeyFrom(WithKey(r.Context(), k)); got != k {
			t.Error("KeyFrom(WithKey(k)) is not k")
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"ClusterSummaries":[]}`))
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

func writeError(w http.ResponseWriter, e *api.Error) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("x-amzn-ErrorType", e.Code)
	w.WriteHeader(e.HTTPStatus())
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.Code, "message": e.Message})
}

// doerFunc lets a test change a request after the SDK signed it, before it is sent.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func tamper(fn func(*http.Request)) func(*sagemaker.Options) {
	return func(o *sagemaker.Options) {
		o.HTTPClient = doerFunc(func(r *http.Request) (*http.Response, error) {
			fn(r)
			return http.DefaultClient.Do(r)
		})
	}
}

func rewriteAuthorization(fn func(string) string) func(*sagemaker.Options) {
	return tamper(func(r *http.Request) { r.Header.Set("Authorization", fn(r.Header.Get("Authorization"))) })
}

// shiftedSigner is the SDK's own v4 signer signing as if its clock were off by shift.
type shiftedSigner struct{ shift time.Duration }

func (s shiftedSigner) SignHTTP(ctx context.Context, c aws.Credentials, r *http.Request, payloadHash, service, region string, t time.Time, optFns ...func(*v4.SignerOptions)) error {
	return v4.NewSigner().SignHTTP(ctx, c, r, payloadHash, service, region, t.Add(s.shift), optFns...)
}

// newClient is an unmodified SageMaker client pointed at url, with retries off so each call is
// one request.
func newClient(url, id, secret, token string, opts ...func(*sagemaker.Options)) *sagemaker.Client {
	cfg := aws.Config{
		Region:      testRegion,
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, token),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	opts = append([]func(*sagemaker.Options){func(o *sagemaker.Options) {
		o.BaseEndpoint = aws.String(url)
		o.RetryMaxAttempts = 1
	}}, opts...)
	return sagemaker.NewFromConfig(cfg, opts...)
}

func listClusters(c *sagemaker.Client) error {
	_, err := c.ListClusters(context.Background(), &sagemaker.ListClustersInput{MaxResults: aws.Int32(10)})
	return err
}

// wantAPIError checks that the SDK surfaced an API error with code and a message containing
// each of parts, and that the message does not leak the secret.
func wantAPIError(t *testing.T, err error, code string, parts ...string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an API error %s", err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("code = %s (%s), want %s", ae.ErrorCode(), ae.ErrorMessage(), code)
	}
	for _, p := range parts {
		if !strings.Contains(ae.ErrorMessage(), p) {
			t.Errorf("message %q does not contain %q", ae.ErrorMessage(), p)
		}
	}
	t.Logf("%s: %s", ae.ErrorCode(), ae.ErrorMessage())
	if strings.Contains(ae.ErrorMessage(), testSecret) {
		t.Errorf("message %q contains the secret", ae.ErrorMessage())
	}
}

func newVerifier() *Verifier {
	return &Verifier{Keys: lookupIn(testKey), Service: "sagemaker"}
}

func TestSDKClientAccepted(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			srv := newServer(t, newVerifier(), tls)
			// The test server's URL has a port (127.0.0.1:NNNNN), which the client signs.
			c := newClient(srv.URL, testID, testSecret, "", func(o *sagemaker.Options) { o.HTTPClient = srv.Client() })
			out, err := c.ListClusters(context.Background(), &sagemaker.ListClustersInput{})
			if err != nil {
				t.Fatal(err)
			}
			if out.ClusterSummaries == nil {
				t.Error("no ClusterSummaries decoded")
			}
			if err := listClusters(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSDKClientAcceptedDefaultService(t *testing.T) {
	srv := newServer(t, &Verifier{Keys: lookupIn(testKey)}, false)
	if err := listClusters(newClient(srv.URL, testID, testSecret, "")); err != nil {
		t.Fatal(err)
	}
}

func TestSDKClientWithinSkew(t *testing.T) {
	srv := newServer(t, newVerifier(), false)
	for _, shift := range []time.Duration{-14 * time.Minute, 14 * time.Minute} {
		c := newClient(srv.URL, testID, testSecret, "", func(o *sagemaker.Options) { o.HTTPSignerV4 = shiftedSigner{shift} })
		if err := listClusters(c); err != nil {
			t.Errorf("signed %v off: %v", shift, err)
		}
	}
}

func TestSDKClientRefused(t *testing.T) {
	srv := newServer(t, newVerifier(), false)
	cases := []struct {
		name         string
		id, secret   string
		token        string
		opt          func(*sagemaker.Options)
		code         string
		messageParts []string
	}{
		{name: "wrong secret", secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEZ",
			code: api.CodeInvalidSignatureException, messageParts: []string{msgSignatureMismatch}},
		{name: "unknown key id", id: "AKIAUNKNOWNKEY000000",
			code: api.CodeUnrecognizedClientException, messageParts: []string{msgInvalidToken}},
		{name: "security token", token: "FwoGZXIvYXdzEXAMPLE",
			code: api.CodeUnrecognizedClientException, messageParts: []string{msgInvalidToken}},
		{name: "no authorization header", opt: tamper(func(r *http.Request) { r.Header.Del("Authorization") }),
			code: api.CodeMissingAuthenticationToken, messageParts: []string{msgMissingToken}},
		{name: "expired", opt: func(o *sagemaker.Options) { o.HTTPSignerV4 = shiftedSigner{-20 * time.Minute} },
			code: api.CodeInvalidSignatureException, messageParts: []string{"Signature expired: ", " is now earlier than ", " - 15 min.)"}},
		{name: "future", opt: func(o *sagemaker.Options) { o.HTTPSignerV4 = shiftedSigner{20 * time.Minute} },
			code: api.CodeInvalidSignatureException, messageParts: []string{"Signature not yet current: ", " is still later than ", " + 15 min.)"}},
		{name: "tampered body", opt: tamper(func(r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			b = bytes.Replace(b, []byte(`"MaxResults":10`), []byte(`"MaxResults":99`), 1)
			r.Body = io.NopCloser(bytes.NewReader(b))
		}), code: api.CodeInvalidSignatureException, messageParts: []string{msgSignatureMismatch}},
		{name: "tampered signed header", opt: tamper(func(r *http.Request) { r.Header.Set("X-Amz-Target", "SageMaker.DeleteCluster") }),
			code: api.CodeInvalidSignatureException, messageParts: []string{msgSignatureMismatch}},
		{name: "tampered signature", opt: rewriteAuthorization(func(h string) string {
			flipped := "0"
			if strings.HasSuffix(h, "0") {
				flipped = "1"
			}
			return h[:len(h)-1] + flipped
		}), code: api.CodeInvalidSignatureException, messageParts: []string{msgSignatureMismatch}},
		{name: "signed header removed", opt: tamper(func(r *http.Request) { r.Header.Del("X-Amz-Target") }),
			code: api.CodeInvalidSignatureException, messageParts: []string{"x-amz-target", "does not carry it"}},
		{name: "signs a header the SDK signer ignores", opt: rewriteAuthorization(func(h string) string {
			return strings.Replace(h, ";x-amz-date;", ";user-agent;x-amz-date;", 1)
		}), code: api.CodeInvalidSignatureException, messageParts: []string{"user-agent"}},
		{name: "signs a header it does not send", opt: rewriteAuthorization(func(h string) string {
			return strings.Replace(h, ";host;", ";host;x-hale-extra;", 1)
		}), code: api.CodeInvalidSignatureException, messageParts: []string{"x-hale-extra", "does not carry it"}},
		{name: "content sha256 mismatch", opt: tamper(func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", strings.Repeat("ab", 32))
		}), code: api.CodeInvalidSignatureException, messageParts: []string{"X-Amz-Content-Sha256"}},
		{name: "unsorted signed headers", opt: rewriteAuthorization(func(h string) string {
			return regexp.MustCompile(`SignedHeaders=([^,]*)`).ReplaceAllStringFunc(h, func(s string) string {
				parts := strings.Split(strings.TrimPrefix(s, "SignedHeaders="), ";")
				parts[0], parts[len(parts)-1] = parts[len(parts)-1], parts[0]
				return "SignedHeaders=" + strings.Join(parts, ";")
			})
		}), code: api.CodeInvalidSignatureException, messageParts: []string{"sorted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, secret := testID, testSecret
			if tc.id != "" {
				id = tc.id
			}
			if tc.secret != "" {
				secret = tc.secret
			}
			var opts []func(*sagemaker.Options)
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			wantAPIError(t, listClusters(newClient(srv.URL, id, secret, tc.token, opts...)), tc.code, tc.messageParts...)
		})
	}
}

func TestSDKClientMalformedAuthorization(t *testing.T) {
	srv := newServer(t, newVerifier(), false)
	re := func(pattern, repl string) func(*sagemaker.Options) {
		return rewriteAuthorization(func(h string) string { return regexp.MustCompile(pattern).ReplaceAllString(h, repl) })
	}
	cases := []struct {
		name string
		opt  func(*sagemaker.Options)
		part string
	}{
		{"other algorithm", re(`^AWS4-HMAC-SHA256`, "AWS4-HMAC-SHA512"), "only AWS4-HMAC-SHA256"},
		{"no algorithm", re(`^AWS4-HMAC-SHA256 `, ""), "only AWS4-HMAC-SHA256"},
		{"no Credential", re(`Credential=[^,]*, `, ""), "requires 'Credential' parameter"},
		{"no SignedHeaders", re(`SignedHeaders=[^,]*, `, ""), "requires 'SignedHeaders' parameter"},
		{"no Signature", re(`, Signature=.*$`, ""), "requires 'Signature' parameter"},
		{"empty Signature", re(`Signature=.*$`, "Signature="), "requires 'Signature' parameter"},
		{"unknown parameter", re(`, Signature=`, ", Extra=1, Signature="), "unknown parameter"},
		{"duplicate parameter", re(`, Signature=(.*)$`, ", Signature=$1, Signature=$1"), "more than one 'Signature'"},
		{"parameter without value", re(`, Signature=.*$`, ", Signature"), "Name=Value"},
		{"scope without terminator", re(`/aws4_request`, ""), "of the form"},
		{"scope with other terminator", re(`/aws4_request`, "/aws5_request"), "valid terminator: 'aws4_request'"},
		{"scope for another service", re(`/sagemaker/`, "/s3/"), "correct service: 'sagemaker'"},
		{"scope without region", re(`/`+testRegion+`/`, "//"), "valid region"},
		{"scope without key id", re(`Credential=[^/]*/`, "Credential=/"), "access key id"},
		{"scope date not a date", re(`/\d{8}/`, "/2026AB01/"), "yyyymmdd"},
		{"scope date differs", re(`/\d{8}/`, "/20000101/"), "Date in Credential scope does not match"},
		{"host not signed", re(`;host;`, ";"), "must include 'host'"},
		{"uppercase signed header", re(`;host;`, ";Host;"), "lowercase"},
		{"empty signed header", re(`;host;`, ";host;;"), "empty header name"},
		{"duplicate signed header", re(`;host;`, ";host;host;"), "more than once"},
		{"no X-Amz-Date", tamper(func(r *http.Request) { r.Header.Del("X-Amz-Date") }), "'X-Amz-Date' or a 'Date' header"},
		{"bad X-Amz-Date", tamper(func(r *http.Request) { r.Header.Set("X-Amz-Date", "2026-01-01T00:00:00Z") }), "ISO 8601"},
		{"bad Date", tamper(func(r *http.Request) {
			r.Header.Del("X-Amz-Date")
			r.Header.Set("Date", "yesterday")
		}), "not an HTTP date"},
		{"two Authorization headers", tamper(func(r *http.Request) { r.Header.Add("Authorization", r.Header.Get("Authorization")) }), "more than one Authorization"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantAPIError(t, listClusters(newClient(srv.URL, testID, testSecret, "", tc.opt)), api.CodeIncompleteSignature, tc.part)
		})
	}
}

// signRaw builds a ListClusters request for url, addressed to host, signed by the SDK's v4
// signer at the given time.
func signRaw(t *testing.T, url, host string, body []byte, secret string, at time.Time, before func(*http.Request)) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Host = host
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	r.Header.Set("X-Amz-Target", "SageMaker.ListClusters")
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if before != nil {
		before(r)
		if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" {
			hash = h
		}
	}
	creds := aws.Credentials{AccessKeyID: testID, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hash, "sagemaker", testRegion, at); err != nil {
		t.Fatal(err)
	}
	return r
}

// send sends r and returns the status and, for errors, the code and message.
func send(t *testing.T, r *http.Request) (status int, code, message string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if resp.StatusCode != http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if h := resp.Header.Get("X-Amzn-Errortype"); h != e.Type {
			t.Errorf("x-amzn-ErrorType %q, body __type %q", h, e.Type)
		}
	}
	return resp.StatusCode, e.Type, e.Message
}

func TestRawNoAuthorization(t *testing.T) {
	srv := newServer(t, newVerifier(), false)
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	r.Header.Set("X-Amz-Target", "SageMaker.ListClusters")
	status, code, msg := send(t, r)
	if status != http.StatusForbidden || code != api.CodeMissingAuthenticationToken || msg != msgMissingToken {
		t.Errorf("got %d %s %q", status, code, msg)
	}
}

func TestRawHostAndPort(t *testing.T) {
	srv := newServer(t, newVerifier(), false)
	now := time.Now()
	for _, tc := range []struct {
		name, signedHost, sentHost string
		status                     int
	}{
		{"host with port", "hale.example.com:8443", "hale.example.com:8443", http.StatusOK},
		{"host without port", "hale.example.com", "hale.example.com", http.StatusOK},
		{"other port", "hale.example.com:8443", "hale.example.com:8444", http.StatusForbidden},
		{"port dropped", "hale.example.com:8443", "hale.example.com", http.StatusForbidden},
		{"other host", "hale.example.com", "evil.example.com", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := signRaw(t, srv.URL, tc.signedHost, []byte("{}"), testSecret, now, nil)
			r.Host = tc.sentHost
			status, code, msg := send(t, r)
			if status != tc.status {
				t.Errorf("status %d (%s %s), want %d", status, code, msg, tc.status)
			}
			if status != http.StatusOK && (code != api.CodeInvalidSignatureException || msg != msgSignatureMismatch) {
				t.Errorf("got %s %q", code, msg)
			}
		})
	}
}

func TestRawPayloadHashHeader(t *testing.T) {
	srv := newServer(t, newVerifier(), false)
	body := []byte(`{"MaxResults":5}`)
	sum := sha256.Sum256(body)
	for _, tc := range []struct {
		name, header string
		status       int
	}{
		{"signed hash", hex.EncodeToString(sum[:]), http.StatusOK},
		{"unsigned payload", "UNSIGNED-PAYLOAD", http.StatusOK},
		{"hash of another body", strings.Repeat("0", 64), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := signRaw(t, srv.URL, "127.0.0.1:8080", body, testSecret, time.Now(), func(r *http.Request) {
				r.Header.Set("X-Amz-Content-Sha256", tc.header)
			})
			if status, code, msg := send(t, r); status != tc.status {
				t.Errorf("status %d (%s %s), want %d", status, code, msg, tc.status)
			}
		})
	}
}

func TestSkewMessages(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	v := &Verifier{Keys: lookupIn(testKey), Service: "sagemaker", Now: func() time.Time { return now }}
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			"Signature expired: 20260101T000000Z is now earlier than 20261130T004500Z (20261130T010000Z - 15 min.)"},
		{time.Date(2026, 11, 30, 1, 30, 0, 0, time.UTC),
			"Signature not yet current: 20261130T013000Z is still later than 20261130T011500Z (20261130T010000Z + 15 min.)"},
		{now.Add(-15 * time.Minute), ""},
		{now.Add(15 * time.Minute), ""},
	} {
		r := signRaw(t, "http://127.0.0.1:8080", "127.0.0.1:8080", []byte("{}"), testSecret, tc.at, nil)
		k, err := v.Verify(r, []byte("{}"))
		if tc.want == "" {
			if err != nil || k != testKey {
				t.Errorf("signed at %v: %v", tc.at, err)
			}
			continue
		}
		e, ok := err.(*api.Error)
		if !ok || e.Code != api.CodeInvalidSignatureException || e.Message != tc.want {
			t.Errorf("signed at %v: got %v, want %s: %s", tc.at, err, api.CodeInvalidSignatureException, tc.want)
		}
	}
	v.MaxSkew = 90 * time.Second
	r := signRaw(t, "http://127.0.0.1:8080", "127.0.0.1:8080", []byte("{}"), testSecret, now.Add(-2*time.Minute), nil)
	if _, err := v.Verify(r, []byte("{}")); !api.IsCode(err, api.CodeInvalidSignatureException) || !strings.Contains(err.Error(), "- 1m30s.)") {
		t.Errorf("MaxSkew 90s: %v", err)
	}
}

// errReader fails every read: Verify must not read r.Body.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("Verify read r.Body") }

func TestVerifyUsesGivenBody(t *testing.T) {
	body := []byte(`{"MaxResults":3}`)
	r := signRaw(t, "http://127.0.0.1:8080", "127.0.0.1:8080", body, testSecret, time.Now(), nil)
	r.Body = io.NopCloser(errReader{})
	k, err := newVerifier().Verify(r, body)
	if err != nil || k != testKey {
		t.Fatalf("Verify = %v, %v", k, err)
	}
	if _, err := newVerifier().Verify(r, []byte(`{"MaxResults":4}`)); !api.IsCode(err, api.CodeInvalidSignatureException) {
		t.Errorf("other body: %v", err)
	}
}

func TestVerifyLookupFailure(t *testing.T) {
	r := signRaw(t, "http://127.0.0.1:8080", "127.0.0.1:8080", []byte("{}"), testSecret, time.Now(), nil)
	v := &Verifier{Service: "sagemaker", Keys: func(context.Context, string) (*store.AccessKey, error) {
		return nil, errors.New("database is locked")
	}}
	_, err := v.Verify(r, []byte("{}"))
	e, ok := err.(*api.Error)
	if !ok || e.Code != api.CodeInternalFailure || strings.Contains(e.Message, "locked") {
		t.Errorf("got %#v", err)
	}
	v.Keys = func(context.Context, string) (*store.AccessKey, error) { return nil, nil }
	if _, err := v.Verify(r, []byte("{}")); !api.IsCode(err, api.CodeUnrecognizedClientException) {
		t.Errorf("nil key: %v", err)
	}
}

func TestVerifyErrorIsNilInterfaceOnSuccess(t *testing.T) {
	r := signRaw(t, "http://127.0.0.1:8080", "127.0.0.1:8080", []byte("{}"), testSecret, time.Now(), nil)
	if _, err := newVerifier().Verify(r, []byte("{}")); err != nil {
		t.Fatalf("err = %#v", err)
	}
}

func TestContextKey(t *testing.T) {
	ctx := context.Background()
	if KeyFrom(ctx) != nil {
		t.Error("KeyFrom of a bare context is not nil")
	}
	if KeyFrom(WithKey(ctx, testKey)) != testKey {
		t.Error("KeyFrom(WithKey(k)) != k")
	}
}
