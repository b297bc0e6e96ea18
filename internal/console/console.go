package console

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/store"
)

// Path is where hale server serves the console; TokenPath is where `hale console` asks for a
// sign-in token (a SigV4-signed POST, outside the console's cookie sessions).
const (
	Path      = "/console"
	TokenPath = "/hale/console/token"
)

// Repairs is what the console shows of the controller's repair bookkeeping (the cap, the repairs
// under way, a pause); nil hides it.
type Repairs interface {
	RepairsStatusOf(ctx context.Context, cluster string) (*controller.RepairsStatus, error)
}

// Config is what a Console serves.
type Config struct {
	Store store.Store
	// Service runs the actions: the same service the API handler calls, through the same
	// operations (api.Operation.Invoke), so validation and authorisation are the API's.
	Service  api.Service
	Verifier *auth.Verifier // checks the signature of `hale console`'s token request
	Repairs  Repairs
	Logger   *slog.Logger
	// SessionLifetime and TokenLifetime: zero takes DefaultSessionLifetime and
	// DefaultTokenLifetime.
	SessionLifetime time.Duration
	TokenLifetime   time.Duration
	Now             func() time.Time // the clock; time.Now when nil
}

// Console serves the web console.
type Console struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	tokens   *tokens
	mux      *http.ServeMux
}

// New returns a Console for cfg.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionLifetime == 0 {
		cfg.SessionLifetime = DefaultSessionLifetime
	}
	if cfg.TokenLifetime == 0 {
		cfg.TokenLifetime = DefaultTokenLifetime
	}
	c := &Console{cfg: cfg, log: cfg.Logger, sessions: newSessions(cfg.SessionLifetime, cfg.Now),
		tokens: newTokens(cfg.TokenLifetime, cfg.Now), mux: http.NewServeMux()}
	c.routes()
	return c
}

// SignInURL returns a one-time sign-in URL for the access key keyID on the server at base
// (e.g. http://127.0.0.1:7070), and when it expires: what hale up prints.
func (c *Console) SignInURL(base, keyID string) (string, time.Time) {
	tok, exp := c.tokens.issue(keyID)
	return base + Path + "/signin?token=" + tok, exp
}

// ServeHTTP serves Path and everything under it, and TokenPath.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// The sign-in URL carries a token: no page may leak it (or anything) to another site in a
	// Referer. same-origin rather than no-referrer: under no-referrer browsers send the sign-in
	// form's POST with "Origin: null", which checkOrigin refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := c.mux
	m.HandleFunc("POST "+TokenPath, c.serveToken)
	m.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path+"/", http.StatusSeeOther)
	})
	m.HandleFunc("GET "+Path+"/{$}", c.serveIndex)
	m.HandleFunc("GET "+Path+"/signin", c.serveSignInPage)
	m.HandleFunc("POST "+Path+"/signin", c.serveSignInForm)
	m.HandleFunc("POST "+Path+"/signout", c.withSession(c.serveSignOut))
	m.Handle("GET "+Path+"/assets/", http.StripPrefix(Path+"/assets/", assetServer()))
	m.HandleFunc("GET "+Path+"/api/me", c.withSession(c.serveMe))
	m.HandleFunc("GET "+Path+"/api/clusters", c.withSession(c.serveClusters))
	m.HandleFunc("GET "+Path+"/api/clusters/{name}", c.withSession(c.serveCluster))
	m.HandleFunc("GET "+Path+"/api/clusters/{name}/events", c.withSession(c.serveEvents))
	m.HandleFunc("GET "+Path+"/api/clusters/{name}/logs", c.withSession(c.serveLogs))
	m.HandleFunc("GET "+Path+"/api/clusters/{name}/repairs", c.withSession(c.serveRepairs))
	m.HandleFunc("POST "+Path+"/api/actions", c.withSession(c.serveAction))
}

// request is a signed-in request: its session and the session's access key, as stored now.
type request struct {
	*http.Request
	session *session
	key     *store.AccessKey
}

// withSession admits requests of a live session whose key still exists; POSTs must also pass
// the origin and CSRF checks. API paths answer 401 JSON, pages redirect to the sign-in page.
func (c *Console) withSession(fn func(http.ResponseWriter, *request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := c.sessionOf(r)
		var key *store.AccessKey
		if ss != nil {
			key = c.keyOf(r.Context(), ss.KeyID)
		}
		if key == nil {
			if ss != nil {
				c.sessions.end(ss.ID)
			}
			writeError(w, http.StatusUnauthorized, "Unauthorized", "Not signed in, or the session ended: sign in again.")
			return
		}
		if r.Method == http.MethodPost {
			if err := checkOrigin(r); err != nil {
				writeError(w, http.StatusForbidden, "Forbidden", err.Error())
				return
			}
			if err := checkCSRF(r, ss); err != nil {
				writeError(w, http.StatusForbidden, "Forbidden", err.Error())
				return
			}
		}
		fn(w, &request{Request: r, session: ss, key: key})
	}
}

// sessionOf returns the request's live session, or nil.
func (c *Console) sessionOf(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// keyOf reads an access key from the store; nil when it is gone (or the store fails).
func (c *Console) keyOf(ctx context.Context, id string) *store.AccessKey {
	var k *store.AccessKey
	err := c.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		k, err = tx.AccessKey(id)
		return err
	})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			c.log.Error("console: read an access key", "error", err)
		}
		return nil
	}
	return k
}

// errorBody is the JSON of a refusal: the API's error code and message.
type errorBody struct {
	Code    string
	Message string
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Code: code, Message: msg})
}

// writeAPIError answers err as the API would: its code, message and HTTP status.
func writeAPIError(w http.ResponseWriter, err error) {
	e := api.AsError(err)
	writeError(w, e.HTTPStatus(), e.Code, e.Message)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
