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

// /hale/repairs/history lists a cluster's repairs newest first with their timelines and node
// (logical id), finds one by id, and refuses a key that may not describe clusters.
func TestRepairHistoryEndpoint(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	ctx := servertest.Ctx(t)
	createFromFile(t, e, "testdata/slurm-cluster.json", "fleet")
	lister, _ := auth.NewAccessKey("lister", []string{"sagemaker:List*"}, nil)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	e.Write(t, func(tx store.Tx) error {
		cl, err := tx.Cluster("fleet")
		if err != nil {
			return err
		}
		for i, id := range []string{"repair-old", "repair-new"} {
			at := t0.Add(time.Duration(i) * time.Minute)
			if err := tx.InsertRepair(&store.Repair{ID: id, ClusterID: cl.ID, LogicalID: "gpu-1", InstanceID: "i-0123456789abcdef" + string(rune('0'+i)),
				Action: "Replace", Fault: "gpu.bus_lost", Source: "health", Reason: "Xid 79", State: store.RepairDone,
				Timeline:  []store.RepairStep{{At: at, What: "detected"}, {At: at.Add(3 * time.Second), What: "back in service"}},
				CreatedAt: at, UpdatedAt: at.Add(3 * time.Second)}); err != nil {
				return err
			}
		}
		return tx.InsertAccessKey(lister)
	})
	t.Setenv("HALE_DATA_DIR", t.TempDir())
	t.Setenv("AWS_ACCESS_KEY_ID", e.Admin.ID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.Admin.Secret)
	ac, err := client.New(ctx, client.Options{EndpointURL: e.App.URL, Region: "us-west-2"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(q url.Values) ([]controller.RepairRecord, error) {
		body, err := ac.Get(ctx, server.RepairHistoryPath, q)
		if err != nil {
			return nil, err
		}
		var recs []controller.RepairRecord
		return recs, json.Unmarshal(body, &recs)
	}
	recs, err := get(url.Values{"cluster-name": {"fleet"}})
	if err != nil || len(recs) != 2 || recs[0].ID != "repair-new" || recs[1].ID != "repair-old" {
		t.Fatalf("history: %+v %v", recs, err)
	}
	if r := recs[0]; r.Node != "gpu-1" || len(r.Timeline) != 2 || r.Timeline[1].What != "back in service" || r.State != store.RepairDone {
		t.Errorf("a record: %+v", r)
	}
	if recs, err := get(url.Values{"cluster-name": {"fleet"}, "repair-id": {"repair-old"}}); err != nil || len(recs) != 1 || recs[0].ID != "repair-old" {
		t.Errorf("one repair: %+v %v", recs, err)
	}
	if _, err := get(url.Values{"cluster-name": {"fleet"}, "repair-id": {"repair-none"}}); !api.IsCode(err, api.CodeResourceNotFound) {
		t.Errorf("an unknown repair: %v", err)
	}
	if _, err := get(url.Values{"cluster-name": {"fleet"}, "days": {"0"}}); !api.IsCode(err, api.CodeValidationException) {
		t.Errorf("days 0: %v", err)
	}
	if _, err := get(url.Values{"cluster-name": {"nope"}}); !api.IsCode(err, api.CodeResourceNotFound) {
		t.Errorf("an unknown cluster: %v", err)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", lister.ID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", lister.Secret)
	lc, err := client.New(ctx, client.Options{EndpointURL: e.App.URL, Region: "us-west-2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Get(ctx, server.RepairHistoryPath, url.Values{"cluster-name": {"fleet"}}); !api.IsCode(err, api.CodeAccessDeniedException) {
		t.Errorf("a key without sagemaker:DescribeCluster: %v", err)
	}
}
