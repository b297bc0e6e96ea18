package auth

import (
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

func TestAllows(t *testing.T) {
	cases := []struct {
		actions []string
		action  string
		want    bool
	}{
		{[]string{"*"}, "sagemaker:CreateCluster", true},
		{[]string{"sagemaker:*"}, "sagemaker:DeleteCluster", true},
		{[]string{"sagemaker:*"}, "ec2:RunInstances", false},
		{[]string{"sagemaker:List*"}, "sagemaker:ListClusters", true},
		{[]string{"sagemaker:List*"}, "sagemaker:ListClusterNodes", true},
		{[]string{"sagemaker:List*"}, "sagemaker:DescribeCluster", false},
		{[]string{"sagemaker:List*", "sagemaker:Describe*"}, "sagemaker:DescribeClusterNode", true},
		{[]string{"sagemaker:list*"}, "SageMaker:ListClusters", true}, // IAM actions are case-insensitive
		{[]string{"SAGEMAKER:CREATECLUSTER"}, "sagemaker:CreateCluster", true},
		{[]string{"sagemaker:CreateCluster"}, "sagemaker:CreateClusterSchedulerConfig", false},
		{[]string{"sagemaker:*Cluster"}, "sagemaker:UpdateCluster", true},
		{[]string{"sagemaker:*Cluster"}, "sagemaker:UpdateClusterSoftware", false},
		{[]string{"sagemaker:*Cluster*"}, "sagemaker:UpdateClusterSoftware", true},
		{[]string{"sagemaker:Describe?luster"}, "sagemaker:DescribeCluster", true},
		{[]string{"sagemaker:*:*"}, "sagemaker:ListClusters", false},
		{[]string{"s*:L*s"}, "sagemaker:ListClusters", true},
		{nil, "sagemaker:ListClusters", false},
		{[]string{}, "sagemaker:ListClusters", false},
	}
	for _, tc := range cases {
		k := &store.AccessKey{Actions: tc.actions}
		if got := Allows(k, tc.action); got != tc.want {
			t.Errorf("Allows(%q, %q) = %v, want %v", tc.actions, tc.action, got, tc.want)
		}
	}
	if Allows(nil, "sagemaker:ListClusters") {
		t.Error("a nil key allows")
	}
}

func TestWildcardMatchPathological(t *testing.T) {
	// Backtracking only to the last star keeps this linear-ish rather than exponential.
	p := "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"
	s := ""
	for range 10000 {
		s += "a"
	}
	if wildcardMatch(p, s) {
		t.Error("matched")
	}
}

func TestAllowsCluster(t *testing.T) {
	cases := []struct {
		clusters []string
		name     string
		want     bool
	}{
		{nil, "anything", true},
		{[]string{}, "anything", true},
		{[]string{"team-a-*"}, "team-a-train", true},
		{[]string{"team-a-*"}, "team-b-train", false},
		{[]string{"team-a-*", "shared"}, "shared", true},
		{[]string{"exact"}, "exact", true},
		{[]string{"exact"}, "Exact", false},
		{[]string{"gpu-?"}, "gpu-1", true},
		{[]string{"gpu-[0-3]"}, "gpu-4", false},
		{[]string{"[bad"}, "[bad", false}, // malformed patterns match nothing
	}
	for _, tc := range cases {
		k := &store.AccessKey{Clusters: tc.clusters}
		if got := AllowsCluster(k, tc.name); got != tc.want {
			t.Errorf("AllowsCluster(%q, %q) = %v, want %v", tc.clusters, tc.name, got, tc.want)
		}
	}
	if AllowsCluster(nil, "x") {
		t.Error("a nil key allows")
	}
}

func TestAccessDenied(t *testing.T) {
	e := AccessDenied(&store.AccessKey{ID: "AKIAX", Secret: "s3cr3t", Principal: "alice"}, "sagemaker:DeleteCluster",
		"arn:aws:sagemaker:us-east-1:000000000000:cluster/abc")
	want := "User: alice is not authorized to perform: sagemaker:DeleteCluster on resource: arn:aws:sagemaker:us-east-1:000000000000:cluster/abc"
	if e.Code != api.CodeAccessDeniedException || e.Message != want {
		t.Errorf("got %s: %s", e.Code, e.Message)
	}
	if e := AccessDenied(&store.AccessKey{ID: "AKIAX"}, "sagemaker:ListClusters", ""); e.Message != "User: AKIAX is not authorized to perform: sagemaker:ListClusters" {
		t.Errorf("got %s", e.Message)
	}
	if e := AccessDenied(nil, "sagemaker:ListClusters", "*"); e.Message != "User: anonymous is not authorized to perform: sagemaker:ListClusters on resource: *" {
		t.Errorf("got %s", e.Message)
	}
}
