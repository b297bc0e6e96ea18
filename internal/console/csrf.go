package console

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
)

// Cookie names: the session, and the sign-in form's double-submitted token.
const (
	sessionCookie = "hale_console"
	signinCookie  = "hale_console_signin"
)

// csrfHeader carries the session's CSRF token on the console's POSTs.
const csrfHeader = "X-CSRF-Token"

// checkOrigin refuses a POST that a page of another origin could have sent: its Origin (or,
// when the browser sent none, its Referer's origin) must be this server's scheme and host.
// A request with neither is refused too: browsers send Origin on every cross-origin POST, and
// the console's own pages always send it.
func checkOrigin(r *http.Request) error {
	want := scheme(r) + "://" + r.Host
	origin := r.Header.Get("Origin")
	if origin == "" {
		ref, err := url.Parse(r.Header.Get("Referer"))
		if err != nil || ref.Host == "" {
			return errors.New("Refused: the request names no origin (Origin or Referer)")
		}
		origin = ref.Scheme + "://" + ref.Host
	}
	if origin != want {
		return errors.New("Refused: a request from " + origin + " to the console at " + want)
	}
	return nil
}

// checkCSRF refuses a POST without the session's CSRF token in csrfHeader (or the form field
// csrf, for plain form posts).
func checkCSRF(r *http.Request, ss *session) error {
	tok := r.Header.Get(csrfHeader)
	if tok == "" && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		tok = r.PostFormValue("csrf")
	}
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(ss.CSRF)) != 1 {
		return errors.New("Refused: the request lacks this session's CSRF token (reload the page)")
	}
	return nil
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// setCookie sets a console cookie: HttpOnly, SameSite=Strict, Secure over TLS, scoped to the
// console's paths; maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}
