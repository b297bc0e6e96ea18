package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

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

// RepairHistoryPath is hale's endpoint behind `hale repairs list|describe`: GET with the query
// cluster-name=NAME (and optionally days=N, 30 by default, and repair-id=ID for one repair)
// answers the cluster's repairs created in those days, newest first, each a
// controller.RepairRecord with its timeline. It needs sagemaker:DescribeCluster; an unknown
// cluster or repair is ResourceNotFound.
const RepairHistoryPath = "/hale/repairs/history"

// DefaultRepairHistoryDays is how far back RepairHistoryPath looks unless asked otherwise.
const DefaultRepairHistoryDays = 30

// RepairsRequest is the body of a POST to RepairsPath.
type RepairsRequest struct {
	ClusterName string
	Action      string // resume
}

// Repairs is what the endpoint needs of the controller.
type Repairs interface {
	RepairsStatusOf(ctx context.Context, cluster string) (*controller.RepairsStatus, error)
	ResumeRepairs(ctx context.Context, cluster string) (*controller.RepairsStatus, error)
	RepairHistory(ctx context.Context, cluster string, since time.Time) ([]controller.RepairRecord, error)
}

// serveRepairHistory answers RepairHistoryPath.
func (h *Handler) serveRepairHistory(w http.ResponseWriter, r *http.Request, repairs Repairs) {
	var ans []controller.RepairRecord
	err := func() error {
		key, _, err := h.verifiedBody(r)
		if err != nil {
			return err
		}
		if !auth.Allows(key, "sagemaker:DescribeCluster") {
			return auth.AccessDenied(key, "sagemaker:DescribeCluster", "*")
		}
		q := r.URL.Query()
		name := q.Get("cluster-name")
		if name == "" {
			return api.Errorf(api.CodeValidationException, "the cluster's name is required")
		}
		days := DefaultRepairHistoryDays
		if d := q.Get("days"); d != "" {
			if days, err = strconv.Atoi(d); err != nil || days < 1 {
				return api.Errorf(api.CodeValidationException, "days: %q is not a whole number of days, 1 or more", d)
			}
		}
		ans, err = repairs.RepairHistory(r.Context(), name, time.Now().AddDate(0, 0, -days))
		if err != nil {
			return err
		}
		if id := q.Get("repair-id"); id != "" {
			for _, rec := range ans {
				if rec.ID == id {
					ans = []controller.RepairRecord{rec}
					return nil
				}
			}
			return api.Errorf(api.CodeResourceNotFound, "Repair %s of cluster %s not found (in the last %d days)", id, name, days)
		}
		return nil
	}()
	writeJSON(w, h, ans, err)
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
