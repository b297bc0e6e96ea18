package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	return c.send(ctx, http.MethodGet, path, query, nil)
}

// Post sends body (JSON) to one of hale's own HTTP resources (e.g. /hale/kube/clusters) with a
// SigV4-signed POST, and returns the body of a 200 answer; an error answer is an *api.Error.
func (c *Client) Post(ctx context.Context, path string, body []byte) ([]byte, error) {
	return c.send(ctx, http.MethodPost, path, nil, body)
}

func (c *Client) send(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, error) {
	if c.cfg.Credentials == nil {
		return nil, errNoCredentials(nil)
	}
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, errNoCredentials(err)
	}
	sum := sha256.Sum256(body)
	resp, endpoint, err := c.roundTrip(ctx, func(base *url.URL) (*http.Request, error) {
		u := *base
		u.Path = path
		u.RawQuery = query.Encode()
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("User-Agent", "hale-cli")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), api.SigningName, c.cfg.Region, time.Now()); err != nil {
			return nil, fmt.Errorf("signing the request: %w", err)
		}
		return req, nil
	})
	if err != nil {
		var ue *userError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, &userError{fmt.Sprintf("Could not connect to the endpoint URL: %q", endpoint.String()), err}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, parseError(resp.StatusCode, resp.Header, answer)
	}
	return answer, nil
}
