package service

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// A NextToken is opaque to clients: base64url of the last item's sort key plus a digest of the
// request's sort and filter members, so that a token is only accepted by the query that made it.

type token struct {
	V      int             `json:"v"`
	Query  string          `json:"q"`
	Cursor json.RawMessage `json:"c"`
}

// queryDigest identifies a list request's sort and filter members (everything but the token and
// the page size).
func queryDigest(parts ...any) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func encodeToken(digest string, cursor any) string {
	c, _ := json.Marshal(cursor)
	b, _ := json.Marshal(token{V: 1, Query: digest, Cursor: c})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken reads a NextToken into cursor. A token that is not one of ours, or that another
// query made, is a ValidationException.
func decodeToken(s, digest string, cursor any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var t token
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err == nil && t.V != 1 {
		err = fmt.Errorf("version %d", t.V)
	}
	if err == nil {
		err = json.Unmarshal(t.Cursor, cursor)
	}
	if err != nil {
		return invalid("Invalid pagination token: NextToken was not returned by this operation.")
	}
	if t.Query != digest {
		return invalid("Invalid pagination token: NextToken belongs to a request with other sort or filter members; repeat those members unchanged when you pass NextToken.")
	}
	return nil
}

// pageSize returns MaxResults or the default.
func pageSize(max *int32, def int) int {
	if max == nil {
		return def
	}
	return int(*max)
}
