package resume

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/runpolicy"
)

// fakeAgent answers srun's questions on a Unix socket as a node's agent relays the server's
// answers: implicate names the nodes to blame (and the repairs of those with a fault), hang
// records the rung. It keeps the hang reports.
func fakeAgent(t *testing.T, implicate *agentproto.AutoResumeResponse) (socket string, hangs *[]*agentproto.AutoResumeRequest) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var got []*agentproto.AutoResumeRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+agent.AutoResumePath, func(w http.ResponseWriter, r *http.Request) {
		var req agentproto.AutoResumeRequest
		json.NewDecoder(r.Body).Decode(&req)
		resp := &agentproto.AutoResumeResponse{Action: "NONE"}
		switch req.Kind {
		case "implicate":
			resp = implicate
		case "hang":
			got = append(got, &req)
			if req.Rung == string(runpolicy.RepairNode) {
				resp.Action = "RETRYSTEP"
			}
		}
		json.NewEncoder(w).Encode(resp)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return socket, &got
}

// A hung step whose node hale found a fault on is repaired at once, whatever the rung the
// ladder would give a first hang (in place); a node to blame without a fault gets the ladder's
// rung, and the server hears of each.
func TestClimbRepairsAFaultyNodeAtOnce(t *testing.T) {
	hung := watched{err: Exit(137), verdict: &runpolicy.Verdict{State: runpolicy.Hanging, Rule: "Progress", Why: "no line for 5 s"}}
	socket, hangs := fakeAgent(t, &agentproto.AutoResumeResponse{Unhealthy: []string{"ip-10-1-0-3"}, Message: "ip-10-1-0-3: has a fault (gpu.bus_lost)",
		Repairs: []*agentproto.NodeRepair{{Node: "ip-10-1-0-3", State: "Draining", Action: "Replace", Fault: "gpu.bus_lost"}}})
	r := &Runner{Socket: socket, Stderr: &bytes.Buffer{}}
	ladder := runpolicy.NewLadder(&runpolicy.Policy{}, 0)
	bad, d := r.climb(context.Background(), ladder, "7", "0", time.Now(), []string{"ip-10-1-0-2", "ip-10-1-0-3"}, hung)
	if d.Rung != runpolicy.RepairNode || len(bad) != 1 || bad[0] != "ip-10-1-0-3" {
		t.Fatalf("a hang on a node with a fault: %+v, repair %v", d, bad)
	}
	if len(*hangs) != 1 || (*hangs)[0].Rung != string(runpolicy.RepairNode) || (*hangs)[0].Repair[0] != "ip-10-1-0-3" {
		t.Errorf("the server heard %+v", *hangs)
	}

	socket, hangs = fakeAgent(t, &agentproto.AutoResumeResponse{Unhealthy: []string{"ip-10-1-0-3"}, Message: "ip-10-1-0-3: process 38 (python3) is stopped (T)"})
	r.Socket = socket
	bad, d = r.climb(context.Background(), runpolicy.NewLadder(&runpolicy.Policy{}, 0), "8", "0", time.Now(), []string{"ip-10-1-0-2", "ip-10-1-0-3"}, hung)
	if d.Rung != runpolicy.InPlace || bad != nil {
		t.Fatalf("a first hang with a stopped rank: %+v, repair %v", d, bad)
	}
	if len(*hangs) != 1 || (*hangs)[0].Rung != string(runpolicy.InPlace) {
		t.Errorf("the server heard %+v", *hangs)
	}
}

// An interactive job (salloc, or srun outside a batch script) cannot be requeued: the
// whole-job rung gives up there, saying why, with the step's status.
func TestWholeJobRungOfAnInteractiveJobGivesUp(t *testing.T) {
	var stderr bytes.Buffer
	r := &Runner{Socket: "/nonexistent/agent.sock", Stderr: &stderr}
	err := r.offLadder(context.Background(), "8", "1", job{"BatchFlag": "0"}, runpolicy.Decision{Rung: runpolicy.WholeJob, Why: "3 in-place restarts"}, Exit(137))
	if code, ok := err.(Exit); !ok || code != 137 {
		t.Errorf("err %v; want the step's exit status 137", err)
	}
	if !bytes.Contains(stderr.Bytes(), []byte("Slurm requeues only batch jobs")) || !bytes.Contains(stderr.Bytes(), []byte("giving up")) {
		t.Errorf("srun said:\n%s", stderr.String())
	}
}
