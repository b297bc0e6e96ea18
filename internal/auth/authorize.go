package auth

import (
	"path"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// Allows reports whether k may perform action (e.g. "sagemaker:CreateCluster"). k.Actions holds
// IAM-style action patterns matched as IAM matches a policy's Action element: case-insensitively,
// with '*' standing for any run of characters and '?' for any one ("*", "sagemaker:*",
// "sagemaker:List*", "sagemaker:Describe*"). A nil key allows nothing.
func Allows(k *store.AccessKey, action string) bool {
	if k == nil {
		return false
	}
	action = strings.ToLower(action)
	for _, p := range k.Actions {
		if wildcardMatch(strings.ToLower(p), action) {
			return true
		}
	}
	return false
}

// AllowsCluster reports whether k may act on the cluster named clusterName. k.Clusters holds
// path.Match patterns on cluster names ("team-a-*"); an empty list means every cluster. A
// malformed pattern matches nothing, and a nil key allows nothing.
func AllowsCluster(k *store.AccessKey, clusterName string) bool {
	if k == nil {
		return false
	}
	if len(k.Clusters) == 0 {
		return true
	}
	for _, p := range k.Clusters {
		if ok, err := path.Match(p, clusterName); err == nil && ok {
			return true
		}
	}
	return false
}

// AccessDenied returns the AccessDeniedException for k's principal attempting action on
// resource (an ARN or name; "" when the action has no resource), worded like IAM's:
// "User: <principal> is not authorized to perform: <action> on resource: <resource>".
func AccessDenied(k *store.AccessKey, action, resource string) *api.Error {
	principal := "anonymous"
	if k != nil {
		principal = k.Principal
		if principal == "" {
			principal = k.ID // the id is public; it names the caller when nothing else does
		}
	}
	msg := "User: " + principal + " is not authorized to perform: " + action
	if resource != "" {
		msg += " on resource: " + resource
	}
	return &api.Error{Code: api.CodeAccessDeniedException, Message: msg}
}

// wildcardMatch matches s against pattern, where '*' matches any run of characters (also none)
// and '?' any single byte; everything else matches itself. It backtracks only to the last '*',
// so it runs in O(len(pattern)*len(s)) at worst, whatever the pattern.
func wildcardMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// ResourceOf names the resource an operation's input addresses, for AccessDenied messages: its
// ClusterName, else its ResourceArn (the tag operations), else "*".
func ResourceOf(in any) string {
	switch v := in.(type) {
	case interface{ GetClusterName() string }:
		return v.GetClusterName()
	case interface{ GetResourceArn() string }:
		return v.GetResourceArn()
	}
	return "*"
}
