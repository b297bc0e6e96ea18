package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/haleproject/hale/api"
)

// Get fetches one of hale's own HTTP resources (outside the SageMaker API, e.g. /hale/logs)
// with a SigV4-signed GET, and returns the body of a 200 answer; an error answer is an
// *api.Error, as for Call.
func (c *Client) Get(ctx context.Context, path string, query url.Values) ([]byte, error) {
	if c.cfg.Credentials == nil {
		return nil, errNoCredentials(nil)
	}
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, errNoCredentials(err)
	}
	u := *c.endpoint
	u.Path = path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "hale-cli")
	empty := sha256.Sum256(nil)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(empty[:]), api.SigningName, c.cfg.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("signing the request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &userError{fmt.Sprintf("Could not connect to the endpoint URL: %q", c.endpoint.String()), err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, parseError(resp.StatusCode, resp.Header, body)
	}
	return body, nil
}
