package auth

import (
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestNewAccessKey(t *testing.T) {
	idRE := regexp.MustCompile(`^AKIA[A-Z2-7]{16}$`)
	secretRE := regexp.MustCompile(`^[A-Za-z0-9+/]{40}$`)
	before := time.Now().UTC().Truncate(time.Millisecond)
	seen := map[string]bool{}
	for range 200 {
		k, err := NewAccessKey("alice", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !idRE.MatchString(k.ID) {
			t.Errorf("id %q", k.ID)
		}
		if !secretRE.MatchString(k.Secret) {
			t.Errorf("secret of %s has the wrong form", k.ID)
		}
		if seen[k.ID] || seen[k.Secret] {
			t.Errorf("repeated id or secret")
		}
		seen[k.ID], seen[k.Secret] = true, true
		if k.Principal != "alice" || !slices.Equal(k.Actions, []string{"sagemaker:*"}) || k.Clusters != nil {
			t.Errorf("got %+v", k)
		}
		if k.CreatedAt.Location() != time.UTC || k.CreatedAt.Before(before) || k.CreatedAt.After(time.Now()) ||
			!k.CreatedAt.Equal(k.CreatedAt.Truncate(time.Millisecond)) {
			t.Errorf("CreatedAt %v", k.CreatedAt)
		}
	}
}

func TestNewAccessKeyPatterns(t *testing.T) {
	actions := []string{"sagemaker:List*", "sagemaker:DescribeCluster"}
	clusters := []string{"team-a-*"}
	k, err := NewAccessKey("bob", actions, clusters)
	if err != nil {
		t.Fatal(err)
	}
	actions[0], clusters[0] = "changed", "changed" // the key holds its own copies
	if !slices.Equal(k.Actions, []string{"sagemaker:List*", "sagemaker:DescribeCluster"}) || !slices.Equal(k.Clusters, []string{"team-a-*"}) {
		t.Errorf("got %+v", k)
	}
	if k, err := NewAccessKey("ro", []string{}, nil); err != nil || len(k.Actions) != 0 || Allows(k, "sagemaker:ListClusters") {
		t.Errorf("empty actions: %+v, %v", k, err)
	}
	if _, err := NewAccessKey("x", []string{"*"}, nil); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"ListClusters", ":List*", "sagemaker:", "sagemaker:a:b", "sagemaker: List"} {
		if _, err := NewAccessKey("x", []string{bad}, nil); err == nil {
			t.Errorf("action pattern %q accepted", bad)
		}
	}
	for _, bad := range []string{"[bad", ""} {
		if _, err := NewAccessKey("x", nil, []string{bad}); err == nil {
			t.Errorf("cluster pattern %q accepted", bad)
		}
	}
}
