package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Defaults of Verifier's fields.
const (
	// DefaultService is the signing name SageMaker clients put in their credential scope.
	DefaultService = "sagemaker"
	// DefaultMaxSkew is how far a request's date may be from the server's clock: AWS refuses
	// SigV4 requests dated more than 15 minutes off.
	DefaultMaxSkew = 15 * time.Minute
)

// Fixed strings of SigV4 (AWS General Reference, "Signature Version 4 signing process").
const (
	algorithm       = "AWS4-HMAC-SHA256"
	amzDateFormat   = "20060102T150405Z" // ISO 8601 basic, as X-Amz-Date carries it
	scopeDateFormat = "20060102"
	scopeTerminator = "aws4_request"
	unsignedPayload = "UNSIGNED-PAYLOAD"
)

// Messages AWS answers with, word for word, so that tools matching on them keep working.
const (
	msgMissingToken      = "Request is missing Authentication Token"
	msgInvalidToken      = "The security token included in the request is invalid."
	msgSignatureMismatch = "The request signature we calculated does not match the signature you provided. " +
		"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
)

// sdkIgnoredHeaders are the headers the AWS SDK for Go v2 signer never signs (its
// aws/signer/internal/v4.IgnoredHeaders, which cannot be imported). A request whose client signed
// one of them cannot be re-signed by that signer, so it cannot be verified.
var sdkIgnoredHeaders = map[string]bool{
	"authorization":     true,
	"user-agent":        true,
	"x-amzn-trace-id":   true,
	"expect":            true,
	"transfer-encoding": true,
}

// KeyLookup returns the stored access key with that id, or an error wrapping store.ErrNotFound
// when there is none. Any other error is taken as an internal failure.
type KeyLookup func(ctx context.Context, id string) (*store.AccessKey, error)

// Verifier checks SigV4-signed requests (Authorization header form) against hale's stored
// access keys, the way an AWS service front end does.
type Verifier struct {
	// Keys finds the access key named in a request's credential scope.
	Keys KeyLookup
	// Service is the signing name the credential scope must carry; DefaultService ("sagemaker")
	// when empty.
	Service string
	// MaxSkew is how far the request's date may be from Now, either way; DefaultMaxSkew when zero.
	MaxSkew time.Duration
	// Now is the server's clock; time.Now when nil.
	Now func() time.Time
	// Logger receives failures that are not the caller's fault (a key lookup that failed for
	// another reason than not found), whose detail the API error hides; slog.Default when nil.
	Logger *slog.Logger
}

// Verify checks r's SigV4 Authorization header against the stored key it names and returns that
// key. body is the full request body, already read by the caller; Verify does not read r.Body.
// Any region in the credential scope is accepted: hale has no regions.
//
// Every error is an *api.Error, never wrapped, with the code AWS's common errors use:
//   - MissingAuthenticationToken: no Authorization header;
//   - IncompleteSignature: a malformed Authorization header (not AWS4-HMAC-SHA256, a missing
//     Credential, SignedHeaders or Signature, a credential scope that is not
//     <id>/<yyyymmdd>/<region>/<service>/aws4_request or names another service, host not signed),
//     no usable X-Amz-Date (or Date) header, or a scope date that is not the request's date;
//   - UnrecognizedClientException: an unknown access key id, or an X-Amz-Security-Token header
//     (hale's keys are long-term; it has no temporary credentials);
//   - InvalidSignatureException: a request dated more than MaxSkew away from Now, a signature
//     that does not match (wrong secret, altered body or signed header), or a request the
//     SDK signer cannot reproduce (it signed a header that signer never signs);
//   - InternalFailure: the key lookup failed for another reason (logged to Logger).
//
// The signature is recomputed with the AWS SDK for Go v2 signer over a copy of the request that
// holds only the headers the client signed, and compared in constant time.
func (v *Verifier) Verify(r *http.Request, body []byte) (*store.AccessKey, error) {
	k, e := v.verify(r, body)
	if e != nil {
		return nil, e // a typed nil *api.Error must not become a non-nil error
	}
	return k, nil
}

func (v *Verifier) verify(r *http.Request, body []byte) (*store.AccessKey, *api.Error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 || strings.TrimSpace(values[0]) == "" {
		return nil, &api.Error{Code: api.CodeMissingAuthenticationToken, Message: msgMissingToken}
	}
	if len(values) > 1 {
		return nil, incomplete("The request has more than one Authorization header.")
	}
	a, e := parseAuthorization(values[0], v.service())
	if e != nil {
		return nil, e
	}
	signedAt, e := requestTime(r.Header)
	if e != nil {
		return nil, e
	}
	if day := signedAt.Format(scopeDateFormat); day != a.date {
		return nil, incomplete("Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.",
			a.date, day, signedAt.Format(amzDateFormat))
	}
	if len(r.Header.Values("X-Amz-Security-Token")) > 0 {
		return nil, &api.Error{Code: api.CodeUnrecognizedClientException, Message: msgInvalidToken}
	}
	if e := v.checkSkew(signedAt); e != nil {
		return nil, e
	}
	k, e := v.lookup(r.Context(), a.keyID)
	if e != nil {
		return nil, e
	}
	if e := v.checkSignature(r, body, a, signedAt, k); e != nil {
		return nil, e
	}
	return k, nil
}

func (v *Verifier) service() string {
	if v.Service == "" {
		return DefaultService
	}
	return v.Service
}

func (v *Verifier) logger() *slog.Logger {
	if v.Logger == nil {
		return slog.Default()
	}
	return v.Logger
}

// authorization is a parsed SigV4 Authorization header.
type authorization struct {
	keyID, date, region, service string
	signedHeaders                string   // as sent, e.g. "content-type;host;x-amz-date"
	headers                      []string // signedHeaders split
	signature                    string
}

// parseAuthorization parses "AWS4-HMAC-SHA256 Credential=<scope>, SignedHeaders=<h1;h2>,
// Signature=<hex>" and checks the scope's form and service. Messages follow AWS's where AWS has
// one, and never repeat the signature.
func parseAuthorization(h, service string) (*authorization, *api.Error) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if scheme != algorithm {
		return nil, incomplete("Unsupported Authorization algorithm %s: only %s (Signature Version 4) is accepted.", clip(scheme), algorithm)
	}
	params := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return nil, incomplete("Authorization header parameter %s is not of the form Name=Value.", clip(name))
		}
		switch name {
		case "Credential", "SignedHeaders", "Signature":
		default:
			return nil, incomplete("Authorization header has an unknown parameter %s.", clip(name))
		}
		if _, dup := params[name]; dup {
			return nil, incomplete("Authorization header has more than one '%s' parameter.", name)
		}
		params[name] = value
	}
	var missing []string
	for _, name := range []string{"Credential", "SignedHeaders", "Signature"} {
		if params[name] == "" {
			missing = append(missing, "Authorization header requires '"+name+"' parameter.")
		}
	}
	if len(missing) > 0 {
		return nil, incomplete("%s", strings.Join(missing, " "))
	}

	a := &authorization{signedHeaders: params["SignedHeaders"], signature: params["Signature"]}
	scope := strings.Split(params["Credential"], "/")
	if len(scope) != 5 {
		return nil, incomplete("Credential should be of the form <access key id>/<yyyymmdd>/<region>/<service>/%s, not %d '/'-separated parts.", scopeTerminator, len(scope))
	}
	a.keyID, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	if a.keyID == "" {
		return nil, incomplete("Credential should name an access key id.")
	}
	if _, err := time.Parse(scopeDateFormat, a.date); err != nil || len(a.date) != len(scopeDateFormat) {
		return nil, incomplete("Credential should be scoped to a date in yyyymmdd form, not %s.", clip(a.date))
	}
	if a.region == "" {
		return nil, incomplete("Credential should be scoped to a valid region.")
	}
	if a.service != service {
		return nil, incomplete("Credential should be scoped to correct service: '%s'.", service)
	}
	if scope[4] != scopeTerminator {
		return nil, incomplete("Credential should be scoped with a valid terminator: '%s', not %s.", scopeTerminator, clip(scope[4]))
	}

	a.headers = strings.Split(a.signedHeaders, ";")
	seen := map[string]bool{}
	for _, name := range a.headers {
		switch {
		case name == "":
			return nil, incomplete("SignedHeaders has an empty header name.")
		case name != strings.ToLower(name):
			return nil, incomplete("SignedHeaders must be lowercase header names, not %s.", clip(name))
		case seen[name]:
			return nil, incomplete("SignedHeaders lists %s more than once.", clip(name))
		}
		seen[name] = true
	}
	if !seen["host"] {
		return nil, incomplete("SignedHeaders must include 'host'.")
	}
	return a, nil
}

// requestTime returns the request's signing time: X-Amz-Date, or the Date header when there is
// no X-Amz-Date (SigV4 accepts either).
func requestTime(h http.Header) (time.Time, *api.Error) {
	if s := h.Get("X-Amz-Date"); s != "" {
		t, err := time.Parse(amzDateFormat, s)
		if err != nil {
			return time.Time{}, incomplete("X-Amz-Date header value %s is not an ISO 8601 basic date-time (yyyymmddThhmmssZ).", clip(s))
		}
		return t, nil
	}
	if s := h.Get("Date"); s != "" {
		if t, err := http.ParseTime(s); err == nil {
			return t.UTC(), nil
		}
		for _, layout := range []string{time.RFC1123Z, amzDateFormat} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC(), nil
			}
		}
		return time.Time{}, incomplete("Date header value %s is not an HTTP date.", clip(s))
	}
	return time.Time{}, incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
}

// checkSkew refuses requests dated too far from the server's clock, with AWS's messages; the
// window bounds how long a captured request can be replayed.
func (v *Verifier) checkSkew(signedAt time.Time) *api.Error {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	t := now().UTC()
	skew := v.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	window := skew.String()
	if skew%time.Minute == 0 {
		window = fmt.Sprintf("%d min", skew/time.Minute)
	}
	if earliest := t.Add(-skew); signedAt.Before(earliest) {
		return invalidSignature("Signature expired: %s is now earlier than %s (%s - %s.)",
			signedAt.Format(amzDateFormat), earliest.Format(amzDateFormat), t.Format(amzDateFormat), window)
	}
	if latest := t.Add(skew); signedAt.After(latest) {
		return invalidSignature("Signature not yet current: %s is still later than %s (%s + %s.)",
			signedAt.Format(amzDateFormat), latest.Format(amzDateFormat), t.Format(amzDateFormat), window)
	}
	return nil
}

func (v *Verifier) lookup(ctx context.Context, id string) (*store.AccessKey, *api.Error) {
	if v.Keys == nil {
		v.logger().Error("auth: Verifier has no KeyLookup")
		return nil, api.AsError(errors.New("no key lookup"))
	}
	k, err := v.Keys(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && k == nil:
		return nil, &api.Error{Code: api.CodeUnrecognizedClientException, Message: msgInvalidToken}
	case err != nil:
		var e *api.Error
		if errors.As(err, &e) {
			return nil, e
		}
		v.logger().Error("auth: access key lookup failed", "access_key_id", id, "err", err)
		return nil, api.AsError(err)
	}
	return k, nil
}

// checkSignature re-signs a copy of r with k's secret and compares the result with the client's
// signature.
func (v *Verifier) checkSignature(r *http.Request, body []byte, a *authorization, signedAt time.Time, k *store.AccessKey) *api.Error {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https" // the signer drops a port that is the scheme's default, as clients do
	}
	// The copy carries the client's path as escaped on the wire and only the signed headers:
	// the signer signs every header it is given, and proxies or the HTTP stack may have added
	// unsigned ones.
	req := &http.Request{
		Method: r.Method,
		URL:    &url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Host:   r.Host, // with its port: clients sign "host:port"
		Header: make(http.Header),
	}
	for _, name := range a.headers {
		switch {
		case name == "host":
			continue // the signer takes it from req.Host
		case name == "content-length":
			// The SDK signer signs Content-Length from req.ContentLength, and only when it is
			// positive; a client that did not sign it (botocore) must get ContentLength 0.
			req.ContentLength = int64(len(body))
			continue
		case sdkIgnoredHeaders[name]:
			return invalidSignature("The request signs the %s header, which this server's SigV4 signer (the AWS SDK for Go v2) never signs, so the signature cannot be verified. Sign without it.", name)
		}
		values := r.Header.Values(name)
		if len(values) == 0 {
			return invalidSignature("The request signs the %s header, but does not carry it.", name)
		}
		req.Header[textproto.CanonicalMIMEHeaderKey(name)] = slices.Clone(values)
	}

	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" {
		if h != unsignedPayload && !strings.EqualFold(h, payloadHash) {
			return invalidSignature("The X-Amz-Content-Sha256 header does not match the SHA-256 hash of the request body.")
		}
		if slices.Contains(a.headers, "x-amz-content-sha256") {
			payloadHash = h // the client signed the header's value as its payload hash
		}
	}

	// A fresh signer each time: the signer's derived-key cache is keyed by access key id, not by
	// secret, so a shared one could keep accepting a replaced key's old secret for a day.
	creds := aws.Credentials{AccessKeyID: a.keyID, SecretAccessKey: k.Secret}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, req, payloadHash, a.service, a.region, signedAt); err != nil {
		v.logger().Error("auth: re-signing the request failed", "access_key_id", a.keyID, "err", err)
		return api.AsError(err)
	}
	want, e := parseAuthorization(req.Header.Get("Authorization"), a.service)
	if e != nil {
		v.logger().Error("auth: the SDK signer produced an unparsable Authorization header", "err", e)
		return api.AsError(errors.New(e.Message))
	}
	if want.signedHeaders != a.signedHeaders {
		return invalidSignature("%s", headerDifference(a.headers, want.headers))
	}
	if !hmac.Equal([]byte(want.signature), []byte(a.signature)) {
		return invalidSignature("%s", msgSignatureMismatch)
	}
	return nil
}

// headerDifference says how the client's SignedHeaders differ from those the SDK signer signs
// for the same request.
func headerDifference(client, server []string) string {
	var extra, lacking []string
	for _, h := range client {
		if !slices.Contains(server, h) {
			extra = append(extra, h)
		}
	}
	for _, h := range server {
		if !slices.Contains(client, h) {
			lacking = append(lacking, h)
		}
	}
	msg := "The request's SignedHeaders (" + strings.Join(client, ";") + ") differ from those this server's SigV4 signer signs for it (" + strings.Join(server, ";") + ")"
	switch {
	case len(extra) > 0 && len(lacking) > 0:
		msg += fmt.Sprintf(": the request signs %s, which the server does not, and does not sign %s", strings.Join(extra, ", "), strings.Join(lacking, ", "))
	case len(extra) > 0:
		msg += ": the request signs " + strings.Join(extra, ", ") + ", which the server does not"
	case len(lacking) > 0:
		msg += ": the request does not sign " + strings.Join(lacking, ", ")
	default:
		msg += ": SignedHeaders must be sorted"
	}
	return msg + "."
}

func incomplete(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeIncompleteSignature, format, args...)
}

func invalidSignature(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalidSignatureException, format, args...)
}

// clip quotes a client-supplied string for an error message, cut short so a hostile header
// cannot make the answer large.
func clip(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return fmt.Sprintf("%q", s)
}
