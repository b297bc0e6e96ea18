package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/store"
)

// A sign-in URL gives a session once: the cookie is HttpOnly, SameSite=Strict and scoped to the
// console; the same URL again is refused and gives no session.
func TestSignInTokenIsGoodOnce(t *testing.T) {
	f := newFixture(t)
	k := f.key("admin", []string{"sagemaker:*"}, nil)
	u, _ := f.con.SignInURL(f.srv.URL, k.ID)
	b := f.browser()
	resp := b.get(u)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != Path+"/" {
		t.Fatalf("first use: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != Path || ck.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=%s, not Secure over plain HTTP", ck, Path)
	}
	var who me
	if st := b.getJSON(Path+"/api/me", &who); st != http.StatusOK || who.Principal != "admin" {
		t.Fatalf("signed in: %d %+v", st, who)
	}

	other := f.browser()
	again := other.get(u)
	if again.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use: %d, want 401", again.StatusCode)
	}
	for _, c := range again.Cookies() {
		if c.Name == sessionCookie && c.Value != "" {
			t.Fatal("the second use set a session cookie")
		}
	}
	if st := other.getJSON(Path+"/api/me", &who); st != http.StatusUnauthorized {
		t.Fatalf("the second browser is signed in: %d", st)
	}
	if bad := f.browser().get(f.srv.URL + Path + "/signin?token=not-a-token"); bad.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a made-up token: %d", bad.StatusCode)
	}
}

// A used sign-in link reopened in the browser it signed in (history, a second tab) goes to the
// console on that browser's session, without a new session; in a browser whose session ended,
// or whose key is gone, it is still refused.
func TestUsedLinkInASignedInBrowser(t *testing.T) {
	f := newFixture(t)
	k := f.key("admin", []string{"sagemaker:*"}, nil)
	u, _ := f.con.SignInURL(f.srv.URL, k.ID)
	b := f.browser()
	if first := b.get(u); first.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use: %d", first.StatusCode)
	}
	sessions := func() int {
		f.con.sessions.mu.Lock()
		defer f.con.sessions.mu.Unlock()
		return len(f.con.sessions.byID)
	}
	before := sessions()
	again := b.get(u)
	if again.StatusCode != http.StatusSeeOther || again.Header.Get("Location") != Path+"/" {
		t.Fatalf("reopened while signed in: %d to %q, want 303 to %s", again.StatusCode, again.Header.Get("Location"), Path+"/")
	}
	for _, c := range again.Cookies() {
		if c.Name == sessionCookie {
			t.Fatalf("reopening the used link set the session cookie %+v", c)
		}
	}
	if n := sessions(); n != before {
		t.Fatalf("%d sessions after reopening the used link, want %d", n, before)
	}

	b.signIn(k) // a fresh session, whose CSRF token signs out
	if st, e := b.post(Path+"/signout", "{}", nil); st != http.StatusOK {
		t.Fatalf("sign out: %d %+v", st, e)
	}
	if resp := b.get(u); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("reopened after sign-out: %d, want 401", resp.StatusCode)
	}

	b = f.browser()
	b.signIn(k)
	if err := f.st.Write(context.Background(), func(tx store.Tx) error { return tx.DeleteAccessKey(k.ID) }); err != nil {
		t.Fatal(err)
	}
	if resp := b.get(u); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("reopened after the key was deleted: %d, want 401", resp.StatusCode)
	}
}

// A sign-in URL past its lifetime is refused.
func TestSignInTokenExpires(t *testing.T) {
	f := newFixture(t)
	k := f.key("admin", []string{"sagemaker:*"}, nil)
	u, exp := f.con.SignInURL(f.srv.URL, k.ID)
	if want := f.clock.now().Add(DefaultTokenLifetime); !exp.Equal(want) {
		t.Fatalf("expires %v, want %v", exp, want)
	}
	f.clock.add(DefaultTokenLifetime)
	if resp := f.browser().get(u); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an expired token: %d, want 401", resp.StatusCode)
	}
}

// A session ends at its expiry, at sign-out, and when its key is deleted.
func TestSessionEnds(t *testing.T) {
	f := newFixture(t)
	k := f.key("admin", []string{"sagemaker:*"}, nil)
	var who me

	b := f.browser()
	b.signIn(k)
	f.clock.add(DefaultSessionLifetime - 1)
	if st := b.getJSON(Path+"/api/me", &who); st != http.StatusOK {
		t.Fatalf("just before expiry: %d", st)
	}
	f.clock.add(1)
	if st := b.getJSON(Path+"/api/me", &who); st != http.StatusUnauthorized {
		t.Fatalf("at expiry: %d, want 401", st)
	}
	if resp := b.get(f.srv.URL + Path + "/"); resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("the page of an expired session: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	b = f.browser()
	b.signIn(k)
	if st, e := b.post(Path+"/signout", "{}", nil); st != http.StatusOK {
		t.Fatalf("sign out: %d %+v", st, e)
	}
	if st := b.getJSON(Path+"/api/me", &who); st != http.StatusUnauthorized {
		t.Fatalf("after sign-out: %d", st)
	}

	b = f.browser()
	b.signIn(k)
	if err := f.st.Write(context.Background(), func(tx store.Tx) error { return tx.DeleteAccessKey(k.ID) }); err != nil {
		t.Fatal(err)
	}
	if st := b.getJSON(Path+"/api/me", &who); st != http.StatusUnauthorized {
		t.Fatalf("after its key was deleted: %d", st)
	}
}

// The sign-in form takes a key's id and secret; a wrong secret, a missing form token or
// another origin is refused.
func TestSignInForm(t *testing.T) {
	f := newFixture(t)
	k := f.key("alice", []string{"sagemaker:*"}, nil)
	submit := func(b *browser, secret, origin string, withForm bool) *http.Response {
		t.Helper()
		page := b.get(f.srv.URL + Path + "/signin")
		form := ""
		for _, c := range page.Cookies() {
			if c.Name == signinCookie {
				form = c.Value
			}
		}
		if !withForm {
			form = "forged"
		}
		v := url.Values{"form": {form}, "access_key_id": {k.ID}, "secret_access_key": {secret}}
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+Path+"/signin", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := submit(f.browser(), "wrong", f.srv.URL, true); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", r.StatusCode)
	}
	if r := submit(f.browser(), k.Secret, f.srv.URL, false); r.StatusCode != http.StatusForbidden {
		t.Errorf("without the form's token: %d", r.StatusCode)
	}
	if r := submit(f.browser(), k.Secret, "http://evil.example", true); r.StatusCode != http.StatusForbidden {
		t.Errorf("from another origin: %d", r.StatusCode)
	}
	b := f.browser()
	if r := submit(b, k.Secret, f.srv.URL, true); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("right secret: %d", r.StatusCode)
	}
	var who me
	if st := b.getJSON(Path+"/api/me", &who); st != http.StatusOK || who.Principal != "alice" {
		t.Fatalf("signed in: %d %+v", st, who)
	}
}

// Every POST of a session needs its CSRF token and the console's own origin.
func TestCSRF(t *testing.T) {
	f := newFixture(t)
	k := f.key("admin", []string{"sagemaker:*"}, nil)
	b := f.browser()
	b.signIn(k)
	other := f.browser()
	other.signIn(k)
	body := `{"Action": "CreateCluster", "Document": "{}"}`
	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"no token", map[string]string{"Origin": f.srv.URL}},
		{"a wrong token", map[string]string{"Origin": f.srv.URL, csrfHeader: "wrong"}},
		{"another session's token", map[string]string{"Origin": f.srv.URL, csrfHeader: other.csrf}},
		{"another origin", map[string]string{"Origin": "http://evil.example", csrfHeader: b.csrf}},
		{"another origin's referer", map[string]string{"Referer": "http://evil.example/page", csrfHeader: b.csrf}},
		{"no origin at all", map[string]string{csrfHeader: b.csrf}},
	} {
		if st, e := b.post(Path+"/api/actions", body, tc.header); st != http.StatusForbidden {
			t.Errorf("%s: %d %+v, want 403", tc.name, st, e)
		}
	}
	if strings.Contains(f.events("x"), "console") {
		t.Fatal("a refused request left an event")
	}
	// With both, the request reaches the API's validation.
	if st, e := b.post(Path+"/api/actions", body, nil); st != http.StatusBadRequest || e.Code != "ValidationException" {
		t.Errorf("with token and origin: %d %+v, want the API's ValidationException", st, e)
	}
	if st, e := b.post(Path+"/api/actions", body, map[string]string{"Referer": f.srv.URL + "/console/", csrfHeader: b.csrf}); st != http.StatusBadRequest {
		t.Errorf("same-origin Referer without Origin: %d %+v", st, e)
	}
}

// hale console's token request must be signed with an access key (SigV4): an unsigned one, or
// one with a made-up signature, gets no sign-in URL.
func TestTokenNeedsASignature(t *testing.T) {
	f := newFixture(t)
	k := f.key("admin", []string{"sagemaker:*"}, nil)
	for name, authz := range map[string]string{
		"unsigned": "",
		"forged": "AWS4-HMAC-SHA256 Credential=" + k.ID + "/20261202/us-west-2/sagemaker/aws4_request, SignedHeaders=host;x-amz-date, Signature=" +
			strings.Repeat("0", 64),
	} {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+TokenPath, strings.NewReader("{}"))
		if authz != "" {
			req.Header.Set("Authorization", authz)
			req.Header.Set("X-Amz-Date", f.clock.now().Format("20060102T150405Z"))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ans TokenAnswer
		json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || ans.URL != "" {
			t.Errorf("%s: %d %q, want a refusal", name, resp.StatusCode, ans.URL)
		}
	}
	if n := len(f.con.tokens.byHash); n != 0 {
		t.Errorf("%d tokens issued", n)
	}
}
