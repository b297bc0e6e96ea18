package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/controller"
)

// RepairsPath is hale's endpoint behind `hale repairs`: GET with the query cluster-name=NAME
// answers a controller.RepairsStatus (the cap, the repairs under way and waiting, a pause);
// POST of a RepairsRequest with Action "resume" lifts the cluster's repair pause (a burst of the
// same fault, controller/safety.go) and answers the same. Reading needs
// sagemaker:DescribeCluster, resuming sagemaker:UpdateCluster: it lets hale reboot and replace
// nodes again.
const RepairsPath = "/hale/repairs"

// RepairsRequest is the body of a POST to RepairsPath.
type RepairsRequest struct {
	ClusterName string
	Action      string // resume
}

// Repairs is what the endpoint needs of the controller.
type Repairs interface {
	RepairsStatusOf(ctx context.Context, cluster string) (*controller.RepairsStatus, error)
	ResumeRepairs(ctx context.Context, cluster string) (*controller.RepairsStatus, error)
}

// serveRepairs answers RepairsPath.
func (h *Handler) serveRepairs(w http.ResponseWriter, r *http.Request, repairs Repairs) {
	var ans *controller.RepairsStatus
	err := func() error {
		key, body, err := h.verifiedBody(r)
		if err != nil {
			return err
		}
		name := r.URL.Query().Get("cluster-name")
		action := "sagemaker:DescribeCluster"
		if r.Method == http.MethodPost {
			var req RepairsRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return api.Errorf(api.CodeValidationException, "the body is not a RepairsRequest: %v", err)
			}
			if req.Action != "resume" {
				return api.Errorf(api.CodeValidationException, "Action: must be resume")
			}
			name, action = req.ClusterName, "sagemaker:UpdateCluster"
		}
		if !auth.Allows(key, action) {
			return auth.AccessDenied(key, action, "*")
		}
		if name == "" {
			return api.Errorf(api.CodeValidationException, "the cluster's name is required")
		}
		if r.Method == http.MethodPost {
			ans, err = repairs.ResumeRepairs(r.Context(), name)
			if errors.Is(err, controller.ErrNotPaused) {
				return api.Errorf(api.CodeValidationException, "The automatic repairs of cluster %s are not paused", name)
			}
			return err
		}
		ans, err = repairs.RepairsStatusOf(r.Context(), name)
		return err
	}()
	writeJSON(w, h, ans, err)
}
