package console

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"
)

// DefaultSessionLifetime is how long a console session lasts after sign-in.
const DefaultSessionLifetime = 12 * time.Hour

// session is one signed-in browser.
type session struct {
	ID      string // the cookie's value: 32 random bytes, base64url
	KeyID   string // the access key it signed in with
	CSRF    string // the token every POST of this session must carry
	Expires time.Time
}

// sessions is the server-side session store: in memory, so a server restart signs everyone out.
type sessions struct {
	mu       sync.Mutex
	byID     map[string]*session
	lifetime time.Duration
	now      func() time.Time
}

func newSessions(lifetime time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, lifetime: lifetime, now: now}
}

// create starts a session for keyID.
func (s *sessions) create(keyID string) *session {
	ss := &session{ID: randomToken(), KeyID: keyID, CSRF: randomToken(), Expires: s.now().Add(s.lifetime)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	s.byID[ss.ID] = ss
	return ss
}

// get returns the live session with that id, or nil (unknown or expired: an expired one is
// removed).
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.byID[id]
	if ss == nil {
		return nil
	}
	if !s.now().Before(ss.Expires) {
		delete(s.byID, id)
		return nil
	}
	return ss
}

// end removes a session (sign-out).
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// sweep drops expired sessions; called with mu held, on each sign-in, so the map stays bounded
// by the sign-ins of one lifetime.
func (s *sessions) sweep() {
	now := s.now()
	for id, ss := range s.byID {
		if !now.Before(ss.Expires) {
			delete(s.byID, id)
		}
	}
}

// randomToken is 32 bytes from crypto/rand, base64url without padding (43 characters).
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux (getrandom)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
