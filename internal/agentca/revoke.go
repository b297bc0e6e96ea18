package agentca

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Revocation records that an instance's certificates are revoked. A client certificate names
// exactly one instance, and instance ids are never used again, so revoking the instance revokes
// every serial ever issued to it (including one issued by a renewal in flight), with no list
// of serials to keep in step. The record is kept until every certificate it covers has expired.
type Revocation struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	// Until is when the last certificate the instance can hold expires (At plus the client
	// lifetime): the record is dropped after it.
	Until time.Time `json:"until"`
}

// Revoke revokes every certificate of an instance, at once and for good (DATA_DIR/agent-ca/
// revoked.json). The reconcilers call it when they terminate an instance (it is gone or
// replaced); a provider may call it to shut a node out (quarantine). Revoking an instance
// again keeps the first record.
func (c *CA) Revoke(instanceID, reason string) error {
	if instanceID == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.revoked[instanceID]; ok {
		return nil
	}
	now := c.now()
	c.revoked[instanceID] = Revocation{At: now.UTC(), Reason: reason, Until: now.Add(c.lifetime).UTC()}
	return c.saveRevoked(now)
}

// IsRevoked says whether an instance's certificates are revoked.
func (c *CA) IsRevoked(instanceID string) bool {
	_, ok := c.revocation(instanceID)
	return ok
}

func (c *CA) revocation(instanceID string) (Revocation, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.revoked[instanceID]
	return r, ok
}

func (c *CA) loadRevoked() error {
	c.revoked = map[string]Revocation{}
	b, err := os.ReadFile(filepath.Join(c.dir, RevokedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &c.revoked); err != nil {
		return fmt.Errorf("%s: %w", RevokedFile, err)
	}
	return nil
}

// saveRevoked writes the revocations still needed (c.mu held).
func (c *CA) saveRevoked(now time.Time) error {
	for id, r := range c.revoked {
		if now.After(r.Until) {
			delete(c.revoked, id) // every certificate it covered has expired
		}
	}
	b, err := json.MarshalIndent(c.revoked, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(c.dir, RevokedFile), append(b, '\n'), 0o600)
}
