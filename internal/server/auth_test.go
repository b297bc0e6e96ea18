package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// TestSigV4AndAuthorization checks the real server refuses what AWS refuses, with AWS's codes
// and HTTP statuses, and that keys only do what their principal may.
func TestSigV4AndAuthorization(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	ctx := servertest.Ctx(t)
	createFromFile(t, e, "testdata/slurm-cluster.json", "team-a-train")
	createFromFile(t, e, "testdata/slurm-cluster.json", "team-b-train")

	reader, _ := auth.NewAccessKey("reader", []string{"sagemaker:Describe*", "sagemaker:List*"}, nil)
	teamA, _ := auth.NewAccessKey("team-a", []string{"sagemaker:*"}, []string{"team-a-*"})
	e.Write(t, func(tx store.Tx) error {
		if err := tx.InsertAccessKey(reader); err != nil {
			return err
		}
		return tx.InsertAccessKey(teamA)
	})

	cases := []struct {
		name   string
		call   func() error
		code   string
		inText string
	}{
		{"wrong secret", func() error {
			_, err := e.Client(e.Admin.ID, "wrong-secret-wrong-secret-wrong-secret00").ListClusters(ctx, &sagemaker.ListClustersInput{})
			return err
		}, "InvalidSignatureException", "signature we calculated does not match"},
		{"unknown key", func() error {
			_, err := e.Client("AKIAUNKNOWNUNKNOWN00", "x").ListClusters(ctx, &sagemaker.ListClustersInput{})
			return err
		}, "UnrecognizedClientException", "security token"},
		{"anonymous", func() error {
			cfg := e.AWS.Copy()
			cfg.Credentials = aws.AnonymousCredentials{}
			_, err := sagemaker.NewFromConfig(cfg, servertest.NoRetries).ListClusters(ctx, &sagemaker.ListClustersInput{})
			return err
		}, "MissingAuthenticationToken", "Authentication Token"},
		{"action not allowed", func() error {
			_, err := e.Client(reader.ID, reader.Secret).DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("team-a-train")})
			return err
		}, "AccessDeniedException", "sagemaker:DeleteCluster"},
		{"cluster not allowed", func() error {
			_, err := e.Client(teamA.ID, teamA.Secret).DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("team-b-train")})
			return err
		}, "AccessDeniedException", "team-a is not authorized to perform: sagemaker:DescribeCluster on resource: team-b-train"},
		{"cluster not allowed, even when it does not exist", func() error {
			_, err := e.Client(teamA.ID, teamA.Secret).DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("team-b-nothing")})
			return err
		}, "AccessDeniedException", "on resource: team-b-nothing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if apiCode(err) != c.code || !strings.Contains(apiMessage(err), c.inText) {
				t.Fatalf("got %v; want %s containing %q", err, c.code, c.inText)
			}
		})
	}

	// What those keys may do, they do.
	if _, err := e.Client(reader.ID, reader.Secret).DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("team-b-train")}); err != nil {
		t.Errorf("reader DescribeCluster: %v", err)
	}
	list, err := e.Client(teamA.ID, teamA.Secret).ListClusters(ctx, &sagemaker.ListClustersInput{})
	if err != nil || len(list.ClusterSummaries) != 1 || *list.ClusterSummaries[0].ClusterName != "team-a-train" {
		t.Errorf("team-a ListClusters sees %+v, %v; want only its own cluster", list, err)
	}

	// Raw requests: statuses and the expired-signature message.
	a := post(t, e, "ListClusters", `{}`, time.Now().Add(-20*time.Minute))
	if a.status != http.StatusForbidden || a.code != "InvalidSignatureException" || !strings.Contains(a.message, "Signature expired") {
		t.Errorf("expired signature: %d %s %s", a.status, a.code, a.message)
	}
	req, _ := http.NewRequest(http.MethodPost, e.App.URL+"/", strings.NewReader(`{}`))
	req.Header.Set("X-Amz-Target", "SageMaker.ListClusters")
	if a := send(t, req); a.status != http.StatusForbidden || a.code != "MissingAuthenticationToken" || a.requestID == "" {
		t.Errorf("unsigned: %d %s", a.status, a.code)
	}
	req, _ = http.NewRequest(http.MethodPost, e.App.URL+"/", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
	if a := send(t, req); a.status != http.StatusBadRequest || a.code != "IncompleteSignature" {
		t.Errorf("malformed Authorization: %d %s", a.status, a.code)
	}
}

// TestThrottling checks a key beyond its rate gets ThrottlingException, and the SDK's own
// retries then succeed.
func TestThrottling(t *testing.T) {
	e := servertest.Start(t, server.Options{Rate: 5, Burst: 2})
	ctx := servertest.Ctx(t)
	var throttled int
	noRetries := sagemaker.NewFromConfig(e.AWS, servertest.NoRetries)
	for i := 0; i < 6; i++ {
		_, err := noRetries.ListClusters(ctx, &sagemaker.ListClustersInput{})
		if apiCode(err) == "ThrottlingException" {
			throttled++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if throttled == 0 {
		t.Fatal("6 back-to-back calls at burst 2 were never throttled")
	}
	// The SDK's standard retryer, with more attempts than its default 3: its backoff is random
	// (full jitter), so three attempts can all land before the bucket refills, and did.
	retrying := sagemaker.NewFromConfig(e.AWS, func(o *sagemaker.Options) {
		o.Retryer = retry.AddWithMaxAttempts(retry.NewStandard(), 10)
	})
	for i := 0; i < 6; i++ {
		if _, err := retrying.ListClusters(context.Background(), &sagemaker.ListClustersInput{}); err != nil {
			t.Fatalf("with SDK retries: %v", err)
		}
	}
}
