package server_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/smithy-go"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// The server has no provider in this build, so tests stand in for the reconcilers of the next
// layer through the store: they mark clusters InService and add nodes as a provider would.

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createFromFile creates a cluster from a CreateCluster JSON document through the SDK.
func createFromFile(t *testing.T, e *servertest.Env, path, name string) string {
	t.Helper()
	var in sagemaker.CreateClusterInput
	if err := unmarshalSDK(readFile(t, path), &in); err != nil {
		t.Fatal(err)
	}
	if name != "" {
		in.ClusterName = &name
	}
	out, err := e.SDK.CreateCluster(servertest.Ctx(t), &in)
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	return *out.ClusterArn
}

// markInService sets the cluster and its groups InService, as reconcilers do once nodes run.
func markInService(t testing.TB, e *servertest.Env, name string) {
	t.Helper()
	e.Write(t, func(tx store.Tx) error {
		c, err := tx.Cluster(name)
		if err != nil {
			return err
		}
		c.Status = api.ClusterStatusInService
		c.FailureMessage = ""
		if err := tx.UpdateCluster(c); err != nil {
			return err
		}
		groups, err := tx.Groups(c.ID)
		if err != nil {
			return err
		}
		for _, g := range groups {
			g.State.Status = api.InstanceGroupStatusInService
			g.State.Scaling = false
			if err := tx.PutGroup(g); err != nil {
				return err
			}
		}
		return nil
	})
}

// addNodes adds n Running nodes to a group, launched one second apart from start, and returns
// their instance ids.
func addNodes(t testing.TB, e *servertest.Env, cluster, group, instanceType string, n int, start time.Time) []string {
	t.Helper()
	var ids []string
	e.Write(t, func(tx store.Tx) error {
		c, err := tx.Cluster(cluster)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			node := &store.Node{
				ClusterID:    c.ID,
				InstanceID:   instanceID(),
				GroupName:    group,
				InstanceType: instanceType,
				Status:       api.ClusterInstanceStatusRunning,
				LaunchTime:   start.Add(time.Duration(i) * time.Second),
				Details:      store.NodeDetails{PrivateIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), PrivateDNSHostname: fmt.Sprintf("ip-10-1-%d-%d.us-west-2.compute.internal", i/250, i%250+1)},
			}
			node.LogicalID = group + "-" + node.InstanceID[2:]
			if err := tx.InsertNode(node); err != nil {
				return err
			}
			ids = append(ids, node.InstanceID)
		}
		return nil
	})
	return ids
}

var idCounter uint64 = uint64(time.Now().UnixNano())

func instanceID() string {
	idCounter++
	return fmt.Sprintf("i-%017x", idCounter&0xfffffffffffffff)
}

// apiCode returns the error code an SDK error carries, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return ""
}

// unmarshalSDK reads a CreateCluster JSON document into the SDK's input.
func unmarshalSDK(doc []byte, in *sagemaker.CreateClusterInput) error {
	v, err := client.DecodeCreateClusterInput(doc)
	if err != nil {
		return err
	}
	*in = *v
	return nil
}
