package agentca

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// Revoke revokes every certificate of an instance, at once and for good (RevokedFile, in the
// CA's keeper). The reconcilers call it when they terminate an instance (it is gone or
// replaced); a provider may call it to shut a node out (quarantine). Revoking an instance
// again keeps the first record.
func (c *CA) Revoke(instanceID, reason string) error {
	if instanceID == "" {
		return nil
	}
	now := c.now()
	return c.keeper.Update(RevokedFile, func(cur []byte) ([]byte, error) {
		revoked, err := parseRevoked(cur)
		if err != nil {
			return nil, err
		}
		if _, ok := revoked[instanceID]; !ok {
			revoked[instanceID] = Revocation{At: now.UTC(), Reason: reason, Until: now.Add(c.lifetime).UTC()}
		}
		for id, r := range revoked {
			if now.After(r.Until) {
				delete(revoked, id) // every certificate it covered has expired
			}
		}
		b, err := json.MarshalIndent(revoked, "", "  ")
		return append(b, '\n'), err
	})
}

// IsRevoked says whether an instance's certificates are revoked (or whether the revocations
// could not be read: then nothing of the instance's is trusted).
func (c *CA) IsRevoked(instanceID string) bool {
	_, ok, err := c.revocation(instanceID)
	return ok || err != nil
}

// revocation reads the instance's revocation from the keeper each time: on a shared store,
// another server may have revoked it since this one last looked (a connection or a renewal is
// rare enough for one read each).
func (c *CA) revocation(instanceID string) (Revocation, bool, error) {
	revoked, err := c.revocations()
	if err != nil {
		return Revocation{}, false, err
	}
	r, ok := revoked[instanceID]
	return r, ok, nil
}

func (c *CA) revocations() (map[string]Revocation, error) {
	b, err := c.keeper.Get(RevokedFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return parseRevoked(b)
}

func parseRevoked(b []byte) (map[string]Revocation, error) {
	revoked := map[string]Revocation{}
	if len(b) == 0 {
		return revoked, nil
	}
	if err := json.Unmarshal(b, &revoked); err != nil {
		return nil, fmt.Errorf("%s: %w", RevokedFile, err)
	}
	return revoked, nil
}
