// Package server is hale's HTTP front door: the SageMaker API over the AWS JSON 1.1 protocol.
//
// Every API request is POST / with X-Amz-Target: SageMaker.<Operation> and a JSON body. The
// handler reads the body, checks the SigV4 signature (auth.Verifier), decodes and validates the
// input against the model (api.DecodeInput), checks the key may call the operation, applies the
// key's rate limit, and calls the operation on api.Service. Every answer carries an
// x-amzn-RequestId header; errors are {"__type": code, "message": text} with a matching
// x-amzn-ErrorType header and the code's HTTP status (api.Error.HTTPStatus), so AWS SDKs
// surface them as typed errors.
package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/store"
	"golang.org/x/time/rate"
)

// Defaults for Config.
const (
	// DefaultMaxBodyBytes bounds a request body. The largest legal input (100 instance groups of
	// full specifications) is far below it.
	DefaultMaxBodyBytes = 8 << 20
	// DefaultRate and DefaultBurst are each access key's request rate (per second) and burst,
	// beyond which requests get ThrottlingException.
	DefaultRate  = 500
	DefaultBurst = 1000
)

// ContentType is the AWS JSON 1.1 media type of requests and answers.
const ContentType = "application/x-amz-json-1.1"

// Config is what a Handler serves and how.
type Config struct {
	Service  api.Service
	Verifier *auth.Verifier
	Logger   *slog.Logger
	// Rate (requests per second) and Burst are each access key's token bucket; zero takes the
	// defaults, a negative Rate turns throttling off.
	Rate  float64
	Burst int
	// MaxBodyBytes bounds a request body; zero takes DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// CheckResponses validates every answer against the model before it is sent and turns a
	// violation into an InternalFailure (tests turn it on to keep hale honest about its shapes).
	CheckResponses bool
	// Observe, when set, is told each request's operation (one of the API's, or "unknown"),
	// its error code ("" for success) and how long it took (the server's metrics).
	Observe func(operation, code string, d time.Duration)
}

// Handler serves the SageMaker API.
type Handler struct {
	cfg      Config
	log      *slog.Logger
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Handler{cfg: cfg, log: cfg.Logger, limiters: map[string]*rate.Limiter{}}
}

// ServeHTTP answers one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := uuid.NewString()
	w.Header().Set("x-amzn-RequestId", reqID)
	opName := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), api.TargetPrefix+".")
	out, key, err := h.serve(r, opName)
	status := http.StatusOK
	code := ""
	if err != nil {
		e := api.AsError(err)
		if e.Code == api.CodeInternalFailure {
			h.log.Error("internal failure", "request_id", reqID, "operation", opName, "error", err)
		}
		status = e.HTTPStatus()
		var he *httpError
		if errors.As(err, &he) {
			status = he.status
		}
		code = h.writeError(w, status, e)
	} else {
		status = h.writeJSON(w, reqID, opName, out)
	}
	if h.cfg.Observe != nil {
		op := "unknown" // a client's made-up name is not a label value
		if api.LookupOperation(opName) != nil {
			op = opName
		}
		h.cfg.Observe(op, code, time.Since(start))
	}
	attrs := []any{"request_id", reqID, "operation", opName, "status", status, "duration_ms", float64(time.Since(start).Microseconds()) / 1000}
	if code != "" {
		attrs = append(attrs, "error_code", code)
	}
	if key != nil {
		attrs = append(attrs, "principal", key.Principal, "access_key", key.ID)
	}
	h.log.Debug("request", attrs...)
}

// serve runs the protocol steps and returns the operation's output.
func (h *Handler) serve(r *http.Request, opName string) (any, *store.AccessKey, error) {
	if r.URL.Path != "/" {
		return nil, nil, &httpError{http.StatusNotFound, api.Errorf(api.CodeUnknownOperationException,
			"hale serves the SageMaker API at POST /, not %s", r.URL.Path)}
	}
	if r.Method != http.MethodPost {
		return nil, nil, &httpError{http.StatusMethodNotAllowed, api.Errorf(api.CodeUnknownOperationException,
			"The SageMaker API takes POST requests, not %s", r.Method)}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, nil, api.Errorf(api.CodeSerializationException, "Could not read the request body: %v", err)
	}
	if int64(len(body)) > h.cfg.MaxBodyBytes {
		return nil, nil, &httpError{http.StatusRequestEntityTooLarge, api.Errorf(api.CodeSerializationException,
			"The request body is larger than %d bytes", h.cfg.MaxBodyBytes)}
	}
	key, err := h.cfg.Verifier.Verify(r, body)
	if err != nil {
		return nil, nil, err
	}
	target := r.Header.Get("X-Amz-Target")
	op := api.LookupOperation(opName)
	if !strings.HasPrefix(target, api.TargetPrefix+".") || op == nil {
		if target == "" {
			return nil, key, api.Errorf(api.CodeUnknownOperationException, "Missing X-Amz-Target header; it names the operation, e.g. SageMaker.ListClusters")
		}
		return nil, key, api.Errorf(api.CodeUnknownOperationException, "Unknown operation %s", target)
	}
	if ct := mediaType(r.Header.Get("Content-Type")); ct != ContentType && ct != "application/json" {
		return nil, key, api.Errorf(api.CodeSerializationException, "Content-Type must be %s, not %q", ContentType, ct)
	}
	in, err := api.DecodeInput(op, body)
	if err != nil {
		return nil, key, err
	}
	action := "sagemaker:" + op.Name
	if !auth.Allows(key, action) {
		return nil, key, auth.AccessDenied(key, action, auth.ResourceOf(in))
	}
	if !h.allow(key.ID) {
		return nil, key, api.Errorf(api.CodeThrottlingException, "Rate exceeded")
	}
	out, err := op.Invoke(auth.WithKey(r.Context(), key), h.cfg.Service, in)
	if err != nil {
		return nil, key, err
	}
	if h.cfg.CheckResponses {
		if v, ok := out.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return nil, key, fmt.Errorf("response of %s breaks the model: %w", op.Name, err)
			}
		}
	}
	return out, key, nil
}

// httpError is an *api.Error answered with a status other than its code's usual one.
type httpError struct {
	status int
	err    *api.Error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func (h *Handler) writeError(w http.ResponseWriter, status int, e *api.Error) string {
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("x-amzn-ErrorType", e.Code)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": e.Code, "message": e.Message})
	return e.Code
}

func (h *Handler) writeJSON(w http.ResponseWriter, reqID, op string, out any) int {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(out); err != nil {
		h.log.Error("encode response", "request_id", reqID, "operation", op, "error", err)
		e := api.AsError(err)
		h.writeError(w, e.HTTPStatus(), e)
		return e.HTTPStatus()
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Write(buf.Bytes())
	return http.StatusOK
}

// allow spends a token of the key's bucket.
func (h *Handler) allow(keyID string) bool {
	if h.cfg.Rate < 0 {
		return true
	}
	h.mu.Lock()
	l := h.limiters[keyID]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(h.cfg.Rate), h.cfg.Burst)
		h.limiters[keyID] = l
	}
	h.mu.Unlock()
	return l.Allow()
}

func mediaType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.TrimSpace(strings.ToLower(ct))
}
