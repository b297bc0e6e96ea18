package server_test

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// /hale/repairs shows a cluster's repair pause to a key that may describe it, and lifts it
// only for a key that may update it (sagemaker:UpdateCluster); a second resume is a
// ValidationException.
func TestRepairsEndpoint(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	ctx := servertest.Ctx(t)
	createFromFile(t, e, "testdata/slurm-cluster.json", "fleet")
	reader, _ := auth.NewAccessKey("reader", []string{"sagemaker:Describe*"}, nil)
	e.Write(t, func(tx store.Tx) error {
		cl, err := tx.Cluster("fleet")
		if err != nil {
			return err
		}
		cl.State.RepairPause = &store.RepairPause{Fault: "gpu.bus_lost (Xid 79)", Nodes: []string{"a", "b", "c"}, Since: time.Now(), Announced: true}
		if err := tx.UpdateCluster(cl); err != nil {
			return err
		}
		return tx.InsertAccessKey(reader)
	})
	resume, _ := json.Marshal(server.RepairsRequest{ClusterName: "fleet", Action: "resume"})

	t.Setenv("HALE_DATA_DIR", t.TempDir())
	t.Setenv("AWS_ACCESS_KEY_ID", reader.ID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", reader.Secret)
	rc, err := client.New(ctx, client.Options{EndpointURL: e.App.URL, Region: "us-west-2"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := rc.Get(ctx, server.RepairsPath, url.Values{"cluster-name": {"fleet"}})
	var st controller.RepairsStatus
	if err == nil {
		err = json.Unmarshal(body, &st)
	}
	if err != nil || st.Paused == nil || st.Paused.Fault != "gpu.bus_lost (Xid 79)" || st.MaxInRepair < 1 {
		t.Fatalf("status: %s %v", body, err)
	}
	if _, err := rc.Post(ctx, server.RepairsPath, resume); !api.IsCode(err, api.CodeAccessDeniedException) {
		t.Fatalf("a reader resumed: %v", err)
	}
	if _, err := rc.Get(ctx, server.RepairsPath, url.Values{"cluster-name": {"nope"}}); !api.IsCode(err, api.CodeResourceNotFound) {
		t.Fatalf("an unknown cluster: %v", err)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", e.Admin.ID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.Admin.Secret)
	ac, err := client.New(ctx, client.Options{EndpointURL: e.App.URL, Region: "us-west-2"})
	if err != nil {
		t.Fatal(err)
	}
	body, err = ac.Post(ctx, server.RepairsPath, resume)
	st = controller.RepairsStatus{}
	if err == nil {
		err = json.Unmarshal(body, &st)
	}
	if err != nil || !st.Resumed || st.Paused == nil {
		t.Fatalf("resume: %s %v", body, err)
	}
	if _, err := ac.Post(ctx, server.RepairsPath, resume); !api.IsCode(err, api.CodeValidationException) {
		t.Fatalf("a second resume: %v", err)
	}
}
