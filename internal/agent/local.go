package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"google.golang.org/grpc/status"
)

// SocketName is the agent's local endpoint in its state directory: programs on the node (srun
// --auto-resume=1) ask the control plane through it, and the agent asks on their behalf over
// mutual TLS with the node's client certificate, whose key those programs never see. Anyone on the node may connect (mode 0666), as
// any user may run srun.
const SocketName = "agent.sock"

// AutoResumePath is the HTTP path of the auto-resume question on the local endpoint: POST an
// agentproto.AutoResumeRequest as JSON (encoding/json of the Go type: snake_case names), get an AutoResumeResponse.
const AutoResumePath = "/v1/auto-resume"

// serveLocal serves the local endpoint until ctx ends.
func (a *Agent) serveLocal(ctx context.Context) {
	path := filepath.Join(a.cfg.StateDir, SocketName)
	os.Remove(path) // one left by a previous agent of this node
	ln, err := net.Listen("unix", path)
	if err != nil {
		a.log.Error("local endpoint", "error", err)
		return
	}
	os.Chmod(path, 0o666)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+AutoResumePath, func(w http.ResponseWriter, r *http.Request) {
		var req agentproto.AutoResumeRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		req.InstanceId = a.cfg.InstanceID
		if req.Kind == "resumed" && a.serverCapability() < 10 {
			// A server before capability 10 does not know the report (it refuses the kind):
			// there is nothing to tell it, and nothing for srun to warn about.
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(&agentproto.AutoResumeResponse{Action: "NONE", Message: "the hale server does not record resumed jobs (capability before 10)"})
			return
		}
		if (req.Kind == "implicate" || req.Kind == "hang") && a.serverCapability() < 11 {
			// Run policies (hang detection) need a server of capability 11: srun says so and
			// keeps to the ladder without the server's help.
			http.Error(w, "the hale server is older than this node's agent and does not know job run policies (capability before 11)", http.StatusNotImplemented)
			return
		}
		if a.identity() == nil {
			http.Error(w, "this node has not registered with its hale server yet", http.StatusServiceUnavailable)
			return
		}
		// A connection of its own, so the handshake presents the current certificate (the
		// session's connection holds the one it was opened with, which a renewal replaced).
		conn, err := a.dial(a.server(), a.identity)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		cctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		resp, err := agentproto.NewAgentClient(conn).AutoResume(cctx, &req)
		if err != nil {
			msg := err.Error()
			if s, ok := status.FromError(err); ok {
				msg = s.Message()
			}
			http.Error(w, "hale server: "+msg, http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error("local endpoint", "error", err)
	}
}
