package server_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// seedBigCluster creates a cluster and gives it n nodes spread over four groups. Launch times
// repeat (ten nodes per second), so the order must break ties by insertion, and groups are
// interleaved, so NAME order differs from launch order.
func seedBigCluster(t testing.TB, e *servertest.Env, name string, n int) (start time.Time) {
	t.Helper()
	var in sagemaker.CreateClusterInput
	unmarshalSDK(readFile(t, "testdata/slurm-cluster.json"), &in)
	in.ClusterName = &name
	if _, err := e.SDK.CreateCluster(servertest.Ctx(t), &in); err != nil {
		t.Fatal(err)
	}
	groups := []string{"gpu-compute", "cpu-compute", "login", "controller"}
	start = time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	e.Write(t, func(tx store.Tx) error {
		c, err := tx.Cluster(name)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			node := &store.Node{ClusterID: c.ID, InstanceID: instanceID(), GroupName: groups[i%len(groups)], InstanceType: "ml.p4d.24xlarge",
				Status: api.ClusterInstanceStatusRunning, LaunchTime: start.Add(time.Duration(i/10) * time.Second)}
			node.LogicalID = fmt.Sprintf("%s-%d", node.GroupName, i)
			if i%100 == 99 { // some nodes exist only as logical ids (Continuous provisioning)
				node.InstanceID = ""
			}
			if err := tx.InsertNode(node); err != nil {
				return err
			}
		}
		return nil
	})
	return start
}

// TestPagination10000Nodes pages through a 10,000-node cluster with the SDK's own paginator for
// every SortBy and SortOrder and checks each node appears once, in order.
func TestPagination10000Nodes(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	ctx := servertest.Ctx(t)
	const n = 10000
	start := seedBigCluster(t, e, "big", n)
	withInstance := n - n/100

	for _, sortBy := range []types.ClusterSortBy{"", types.ClusterSortByCreationTime, types.ClusterSortByName} {
		for _, order := range []types.SortOrder{"", types.SortOrderAscending, types.SortOrderDescending} {
			t.Run(fmt.Sprintf("%s/%s", cmp.Or(string(sortBy), "default"), cmp.Or(string(order), "default")), func(t *testing.T) {
				p := sagemaker.NewListClusterNodesPaginator(e.SDK, &sagemaker.ListClusterNodesInput{
					ClusterName: aws.String("big"), SortBy: sortBy, SortOrder: order, MaxResults: aws.Int32(100)})
				var got []types.ClusterNodeSummary
				pages := 0
				for p.HasMorePages() {
					page, err := p.NextPage(ctx)
					if err != nil {
						t.Fatal(err)
					}
					pages++
					if len(page.ClusterNodeSummaries) > 100 {
						t.Fatalf("page of %d > MaxResults", len(page.ClusterNodeSummaries))
					}
					got = append(got, page.ClusterNodeSummaries...)
				}
				if len(got) != withInstance || pages < withInstance/100 {
					t.Fatalf("got %d nodes in %d pages, want %d", len(got), pages, withInstance)
				}
				seen := map[string]bool{}
				for _, s := range got {
					if seen[*s.InstanceId] {
						t.Fatalf("node %s listed twice", *s.InstanceId)
					}
					seen[*s.InstanceId] = true
				}
				desc := order == types.SortOrderDescending
				less := func(a, b types.ClusterNodeSummary) int {
					if sortBy == types.ClusterSortByName {
						return cmp.Or(strings.Compare(*a.InstanceGroupName, *b.InstanceGroupName), strings.Compare(*a.InstanceId, *b.InstanceId))
					}
					return a.LaunchTime.Compare(*b.LaunchTime)
				}
				for i := 1; i < len(got); i++ {
					c := less(got[i-1], got[i])
					if (!desc && c > 0) || (desc && c < 0) {
						t.Fatalf("out of order at %d: %s/%s/%v then %s/%s/%v", i, *got[i-1].InstanceGroupName, *got[i-1].InstanceId, got[i-1].LaunchTime,
							*got[i].InstanceGroupName, *got[i].InstanceId, got[i].LaunchTime)
					}
				}
			})
		}
	}

	t.Run("filters", func(t *testing.T) {
		count := func(in *sagemaker.ListClusterNodesInput) (int, []types.ClusterNodeSummary) {
			in.ClusterName = aws.String("big")
			in.MaxResults = aws.Int32(100)
			var all []types.ClusterNodeSummary
			p := sagemaker.NewListClusterNodesPaginator(e.SDK, in)
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, page.ClusterNodeSummaries...)
			}
			return len(all), all
		}
		if got, _ := count(&sagemaker.ListClusterNodesInput{IncludeNodeLogicalIds: aws.Bool(true)}); got != n {
			t.Errorf("IncludeNodeLogicalIds: %d nodes, want %d", got, n)
		}
		got, nodes := count(&sagemaker.ListClusterNodesInput{InstanceGroupNameContains: aws.String("PU-comp")})
		if got != 5000 || slices.ContainsFunc(nodes, func(s types.ClusterNodeSummary) bool { return !strings.HasSuffix(*s.InstanceGroupName, "pu-compute") }) {
			t.Errorf("InstanceGroupNameContains: %d nodes", got)
		}
		after, before := start.Add(100*time.Second), start.Add(200*time.Second)
		got, nodes = count(&sagemaker.ListClusterNodesInput{CreationTimeAfter: &after, CreationTimeBefore: &before})
		want := 0 // nodes launched in seconds 101..199 that have an instance id
		for i := 1010; i < 2000; i++ {
			if i%100 != 99 {
				want++
			}
		}
		if got != want {
			t.Errorf("CreationTimeAfter/Before: %d nodes", got)
		}
		for _, s := range nodes {
			if !s.LaunchTime.After(after) || !s.LaunchTime.Before(before) {
				t.Fatalf("node launched %v outside (%v, %v)", s.LaunchTime, after, before)
			}
		}
		// A token only serves the query that made it.
		page, err := e.SDK.ListClusterNodes(ctx, &sagemaker.ListClusterNodesInput{ClusterName: aws.String("big"), MaxResults: aws.Int32(10)})
		if err != nil || page.NextToken == nil {
			t.Fatal(err)
		}
		_, err = e.SDK.ListClusterNodes(ctx, &sagemaker.ListClusterNodesInput{ClusterName: aws.String("big"), NextToken: page.NextToken, SortBy: types.ClusterSortByName})
		if apiCode(err) != "ValidationException" {
			t.Errorf("token reused with another sort: %v", err)
		}
	})
}

// TestListClustersAndEventsPaging pages clusters by name and time and events newest first.
func TestListClustersAndEventsPaging(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	ctx := servertest.Ctx(t)
	var in sagemaker.CreateClusterInput
	unmarshalSDK(readFile(t, "testdata/slurm-cluster.json"), &in)
	names := []string{"delta", "alpha", "charlie", "bravo", "echo"}
	for _, name := range names {
		in.ClusterName = aws.String(name)
		if _, err := e.SDK.CreateCluster(ctx, &in); err != nil {
			t.Fatal(err)
		}
	}
	list := func(in *sagemaker.ListClustersInput) []string {
		in.MaxResults = aws.Int32(2)
		var out []string
		p := sagemaker.NewListClustersPaginator(e.SDK, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.ClusterSummaries {
				out = append(out, *s.ClusterName)
			}
		}
		return out
	}
	if got := list(&sagemaker.ListClustersInput{}); !slices.Equal(got, names) {
		t.Errorf("by creation time: %v", got)
	}
	if got := list(&sagemaker.ListClustersInput{SortBy: types.ClusterSortByName, SortOrder: types.SortOrderDescending}); !slices.Equal(got, []string{"echo", "delta", "charlie", "bravo", "alpha"}) {
		t.Errorf("by name, descending: %v", got)
	}
	if got := list(&sagemaker.ListClustersInput{NameContains: aws.String("LpH")}); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("NameContains LpH: %v", got)
	}

	for i := 0; i < 7; i++ {
		if _, err := e.SDK.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(mustARN(t, e, "alpha")), Tags: []types.Tag{{Key: aws.String(fmt.Sprint(i)), Value: aws.String("v")}}}); err != nil {
			t.Fatal(err)
		}
	}
	p := sagemaker.NewListClusterEventsPaginator(e.SDK, &sagemaker.ListClusterEventsInput{ClusterName: aws.String("alpha"), MaxResults: aws.Int32(1)})
	var times []time.Time
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			times = append(times, *ev.EventTime)
		}
	}
	if len(times) != 2 || times[0].Before(times[1]) {
		t.Errorf("events newest first: %v", times)
	}
}

func mustARN(t *testing.T, e *servertest.Env, name string) string {
	d, err := e.SDK.DescribeCluster(servertest.Ctx(t), &sagemaker.DescribeClusterInput{ClusterName: &name})
	if err != nil {
		t.Fatal(err)
	}
	return *d.ClusterArn
}
