package console

import (
	"crypto/subtle"
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
)

// TokenAnswer is TokenPath's answer: the one-time sign-in URL and when it stops working.
type TokenAnswer struct {
	URL       string
	ExpiresAt time.Time
}

// serveToken answers `hale console`: a SigV4-signed POST gets a one-time sign-in URL for the
// key that signed it. Signing proves the caller holds the key's secret, so the URL grants no
// more than the key has; any key may ask for its own.
func (c *Console) serveToken(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		writeAPIError(w, api.Errorf(api.CodeSerializationException, "Could not read the request body: %v", err))
		return
	}
	key, err := c.cfg.Verifier.Verify(r, body)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	url, exp := c.SignInURL(scheme(r)+"://"+r.Host, key.ID)
	c.log.Info("console: sign-in URL issued", "principal", key.Principal, "access_key", key.ID, "expires", exp)
	writeJSON(w, http.StatusOK, TokenAnswer{URL: url, ExpiresAt: exp})
}

// signinPage is the data of the sign-in page.
type signinPage struct {
	Form    string // the double-submitted token of the form
	Message string // why the last attempt failed
	KeyID   string
}

// serveSignInPage exchanges ?token= for a session (hale console's URL), or shows the sign-in
// form. A token that is no good sends a browser with a live session to the console, others to
// the form with why.
func (c *Console) serveSignInPage(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("token"); tok != "" {
		keyID, ok := c.tokens.redeem(tok)
		if ok && c.keyOf(r.Context(), keyID) != nil {
			c.startSession(w, r, keyID)
			return
		}
		// A used link reopened in a browser that is signed in (its history, a second tab) goes
		// to the console on that browser's own session: the link still creates none.
		if ss := c.sessionOf(r); ss != nil && c.keyOf(r.Context(), ss.KeyID) != nil {
			http.Redirect(w, r, Path+"/", http.StatusSeeOther)
			return
		}
		c.renderSignIn(w, r, http.StatusUnauthorized, "This sign-in link was used already, has expired or is unknown: run hale console for a new one, or sign in with an access key.", "")
		return
	}
	c.renderSignIn(w, r, http.StatusOK, "", "")
}

// serveSignInForm signs in with an access key id and secret typed into the form.
func (c *Console) serveSignInForm(w http.ResponseWriter, r *http.Request) {
	if err := checkOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	ck, err := r.Cookie(signinCookie)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("form"))) != 1 {
		c.renderSignIn(w, r, http.StatusForbidden, "The sign-in form expired: try again.", "")
		return
	}
	id := strings.TrimSpace(r.PostFormValue("access_key_id"))
	secret := strings.TrimSpace(r.PostFormValue("secret_access_key"))
	k := c.keyOf(r.Context(), id)
	if k == nil || subtle.ConstantTimeCompare([]byte(k.Secret), []byte(secret)) != 1 {
		c.log.Info("console: sign-in refused", "access_key", id)
		c.renderSignIn(w, r, http.StatusUnauthorized, "The access key id or secret is wrong.", id)
		return
	}
	c.startSession(w, r, k.ID)
}

// startSession sets a new session's cookie and sends the browser to the console.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, keyID string) {
	ss := c.sessions.create(keyID)
	setCookie(w, r, sessionCookie, ss.ID, int(c.cfg.SessionLifetime/time.Second))
	setCookie(w, r, signinCookie, "", -1)
	c.log.Info("console: signed in", "access_key", keyID)
	http.Redirect(w, r, Path+"/", http.StatusSeeOther)
}

func (c *Console) serveSignOut(w http.ResponseWriter, r *request) {
	c.sessions.end(r.session.ID)
	setCookie(w, r.Request, sessionCookie, "", -1)
	writeJSON(w, http.StatusOK, struct{}{})
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg, keyID string) {
	form := randomToken()
	setCookie(w, r, signinCookie, form, 3600)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, "signin.html", signinPage{Form: form, Message: msg, KeyID: keyID}); err != nil {
		c.log.Error("console: render the sign-in page", "error", err)
	}
}

// indexPage is the data of the console's page.
type indexPage struct {
	CSRF      string
	Principal string
	KeyID     string
}

// serveIndex serves the console's single page to a signed-in browser; others go to sign in.
func (c *Console) serveIndex(w http.ResponseWriter, r *http.Request) {
	ss := c.sessionOf(r)
	if ss == nil {
		http.Redirect(w, r, Path+"/signin", http.StatusSeeOther)
		return
	}
	k := c.keyOf(r.Context(), ss.KeyID)
	if k == nil {
		c.sessions.end(ss.ID)
		http.Redirect(w, r, Path+"/signin", http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages.ExecuteTemplate(w, "index.html", indexPage{CSRF: ss.CSRF, Principal: k.Principal, KeyID: k.ID}); err != nil {
		c.log.Error("console: render the console page", "error", err)
	}
}

// me is who is signed in, for the page's header.
type me struct {
	Principal string
	KeyID     string
	Actions   []string
	Clusters  []string
}

func (c *Console) serveMe(w http.ResponseWriter, r *request) {
	writeJSON(w, http.StatusOK, me{Principal: r.key.Principal, KeyID: r.key.ID, Actions: r.key.Actions, Clusters: r.key.Clusters})
}

var pages = template.Must(template.ParseFS(assets, "assets/*.html"))

// decodeJSON reads a small JSON body into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<20)
	return json.NewDecoder(r.Body).Decode(v)
}
