package auth

import (
	"crypto/rand"
	"fmt"
	"github.com/haleproject/hale/api"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/store"
)

// Alphabets of AWS access keys: ids are "AKIA" and 16 characters of base32 (A-Z, 2-7); secrets
// are 40 characters of base64 (A-Z, a-z, 0-9, '+', '/'). Keeping AWS's shapes lets tools that
// validate them (and secret scanners) treat hale's keys like AWS's.
const (
	idPrefix       = "AKIA"
	idAlphabet     = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	idRandomLen    = 16
	secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	secretLen      = 40
)

// NewAccessKey returns a new long-term access key for principal, with an id and secret drawn
// from crypto/rand. actions are IAM-style action patterns (see Allows), ["sagemaker:*"] when nil;
// clusters are path.Match cluster name patterns (see AllowsCluster), nil for every cluster. The
// key is not stored. It fails when a pattern is malformed: an action that is neither "*" nor
// "service:action", or a cluster pattern path.Match rejects.
func NewAccessKey(principal string, actions, clusters []string) (*store.AccessKey, error) {
	if actions == nil {
		actions = []string{"sagemaker:*"}
	}
	for _, a := range actions {
		if err := checkActionPattern(a); err != nil {
			return nil, err
		}
	}
	for _, c := range clusters {
		if _, err := path.Match(c, ""); err != nil || c == "" {
			return nil, fmt.Errorf("auth: cluster pattern %q is not a valid path.Match pattern", c)
		}
	}
	id, err := randomString(idAlphabet, idRandomLen)
	if err != nil {
		return nil, err
	}
	secret, err := randomString(secretAlphabet, secretLen)
	if err != nil {
		return nil, err
	}
	return &store.AccessKey{
		ID:        idPrefix + id,
		Secret:    secret,
		Principal: principal,
		Actions:   slices.Clone(actions),
		Clusters:  slices.Clone(clusters),
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond),
	}, nil
}

// checkActionPattern accepts "*" and "service:action" patterns, as IAM policies write actions.
func checkActionPattern(a string) error {
	if a == "*" {
		return nil
	}
	service, action, ok := strings.Cut(a, ":")
	if !ok || service == "" || action == "" || strings.Contains(action, ":") || strings.ContainsAny(a, " \t\r\n") {
		return fmt.Errorf("auth: action pattern %q is not \"*\" or \"service:action\" (e.g. \"sagemaker:List*\")", a)
	}
	// A pattern that allows nothing is a typo ("sagemaker:DescribeClutser", "ec2:*"): say so
	// now rather than hand out a key that is refused everything.
	for _, op := range api.Operations {
		if wildcardMatch(strings.ToLower(a), strings.ToLower("sagemaker:"+op.Name)) {
			return nil
		}
	}
	return fmt.Errorf("auth: action pattern %q matches no SageMaker cluster operation (e.g. sagemaker:DescribeCluster, sagemaker:List*)", a)
}

// randomString returns n characters drawn uniformly from alphabet, whose length must divide 256
// (32 and 64 do) so that masking a random byte introduces no bias.
func randomString(alphabet string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("auth: reading random bytes: %w", err)
	}
	mask := byte(len(alphabet) - 1)
	for i := range b {
		b[i] = alphabet[b[i]&mask]
	}
	return string(b), nil
}
