package console

import (
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultTokenLifetime is how long a sign-in token (the URL hale console prints) stays good.
const DefaultTokenLifetime = 10 * time.Minute

// tokens are one-time sign-in tokens: each is good once, for its lifetime. Only their sha256 is
// kept, so a memory dump of the server does not hold a usable token.
type tokens struct {
	mu       sync.Mutex
	byHash   map[[32]byte]signinToken
	lifetime time.Duration
	now      func() time.Time
}

type signinToken struct {
	keyID   string
	expires time.Time
}

func newTokens(lifetime time.Duration, now func() time.Time) *tokens {
	return &tokens{byHash: map[[32]byte]signinToken{}, lifetime: lifetime, now: now}
}

// issue returns a new token for keyID and when it expires.
func (t *tokens) issue(keyID string) (string, time.Time) {
	tok := randomToken()
	exp := t.now().Add(t.lifetime)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for h, st := range t.byHash { // bounded by the tokens issued in one lifetime
		if !now.Before(st.expires) {
			delete(t.byHash, h)
		}
	}
	t.byHash[sha256.Sum256([]byte(tok))] = signinToken{keyID: keyID, expires: exp}
	return tok, exp
}

// redeem consumes tok and returns its key id; ok is false for an unknown, used or expired token
// (a token is removed on its first redemption, whatever the outcome).
func (t *tokens) redeem(tok string) (keyID string, ok bool) {
	h := sha256.Sum256([]byte(tok))
	t.mu.Lock()
	defer t.mu.Unlock()
	st, found := t.byHash[h]
	if !found {
		return "", false
	}
	delete(t.byHash, h)
	if !t.now().Before(st.expires) {
		return "", false
	}
	return st.keyID, true
}
