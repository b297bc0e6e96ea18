package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/store"
)

// actionRequest is the body of POST /console/api/actions.
type actionRequest struct {
	// Action is ScaleGroup, RebootNodes, ReplaceNodes, DeleteNodes, DeleteCluster or
	// CreateCluster.
	Action  string
	Cluster string
	Group   string // ScaleGroup
	Count   int32  // ScaleGroup: the group's new InstanceCount
	// NodeIds and NodeLogicalIds: the nodes of RebootNodes, ReplaceNodes and DeleteNodes.
	NodeIds        []string
	NodeLogicalIds []string
	Document       string // CreateCluster: the CreateCluster request, JSON
}

// actionAnswer is what an accepted action answers: the API operation it ran and its output.
type actionAnswer struct {
	Operation string
	Output    any
}

// operations maps the console's actions to the API operations they run.
var operations = map[string]string{
	"ScaleGroup":    "UpdateCluster",
	"RebootNodes":   "BatchRebootClusterNodes",
	"ReplaceNodes":  "BatchReplaceClusterNodes",
	"DeleteNodes":   "BatchDeleteClusterNodes",
	"DeleteCluster": "DeleteCluster",
	"CreateCluster": "CreateCluster",
}

// serveAction runs an action as its API operation, with the session's key: the body the API
// would get, decoded and validated by api.DecodeInput, authorised with the operation's action
// name, invoked on the service. An accepted action adds a cluster event naming the console and
// the key's principal.
func (c *Console) serveAction(w http.ResponseWriter, r *request) {
	var req actionRequest
	if err := decodeJSON(w, r.Request, &req); err != nil {
		writeAPIError(w, api.Errorf(api.CodeSerializationException, "The console's request is not JSON: %v", err))
		return
	}
	opName, ok := operations[req.Action]
	if !ok {
		writeAPIError(w, api.Errorf(api.CodeValidationException, "Unknown console action %q", req.Action))
		return
	}
	body, err := c.bodyOf(r, opName, &req)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	op := api.LookupOperation(opName)
	in, err := api.DecodeInput(op, body)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	if err := authorize(r.key, op.Name, ""); err != nil {
		writeAPIError(w, auth.AccessDenied(r.key, "sagemaker:"+op.Name, auth.ResourceOf(in)))
		return
	}
	out, err := op.Invoke(auth.WithKey(r.Context(), r.key), c.cfg.Service, in)
	if err != nil {
		c.log.Info("console: action refused", "principal", r.key.Principal, "operation", op.Name, "error", err)
		writeAPIError(w, err)
		return
	}
	cluster := req.Cluster
	if v, ok := in.(interface{ GetClusterName() string }); ok {
		cluster = v.GetClusterName()
	}
	if err := c.recordAction(r, cluster, describeAction(op.Name, &req)); err != nil {
		c.log.Error("console: record the action's event", "cluster", cluster, "error", err)
	}
	c.log.Info("console: action", "principal", r.key.Principal, "access_key", r.key.ID, "operation", op.Name, "cluster", cluster)
	writeJSON(w, http.StatusOK, actionAnswer{Operation: op.Name, Output: out})
}

// bodyOf writes the API request body of an action. ScaleGroup sends the group's stored
// specification with the new InstanceCount, as the AWS console does (UpdateCluster takes whole
// group specifications); it is authorised before the specification is read, so a refused key
// learns nothing of the cluster.
func (c *Console) bodyOf(r *request, opName string, req *actionRequest) ([]byte, error) {
	switch req.Action {
	case "CreateCluster":
		return []byte(req.Document), nil
	case "DeleteCluster":
		return json.Marshal(map[string]any{"ClusterName": req.Cluster})
	case "ScaleGroup":
		if err := authorize(r.key, opName, req.Cluster); err != nil {
			return nil, err
		}
		var spec *api.ClusterInstanceGroupSpecification
		err := c.cfg.Store.Read(r.Context(), func(tx store.Tx) error {
			cl, err := store.ClusterOrNotFound(tx, req.Cluster)
			if err != nil {
				return err
			}
			groups, err := tx.Groups(cl.ID)
			for _, g := range groups {
				if g.Name == req.Group {
					spec = &g.Spec
				}
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if spec == nil {
			return nil, api.Errorf(api.CodeValidationException, "Cluster %s has no instance group %s.", req.Cluster, req.Group)
		}
		spec.InstanceCount = &req.Count
		return json.Marshal(map[string]any{"ClusterName": req.Cluster, "InstanceGroups": []any{spec}})
	}
	m := map[string]any{"ClusterName": req.Cluster}
	if len(req.NodeIds) > 0 {
		m["NodeIds"] = req.NodeIds
	}
	if len(req.NodeLogicalIds) > 0 {
		m["NodeLogicalIds"] = req.NodeLogicalIds
	}
	return json.Marshal(m)
}

// describeAction says what an accepted action asked for, for its event.
func describeAction(op string, req *actionRequest) string {
	switch req.Action {
	case "ScaleGroup":
		return fmt.Sprintf("%s: instance group %s to %d instance(s)", op, req.Group, req.Count)
	case "RebootNodes", "ReplaceNodes", "DeleteNodes":
		return fmt.Sprintf("%s: node(s) %s", op, strings.Join(append(append([]string{}, req.NodeIds...), req.NodeLogicalIds...), ", "))
	}
	return op
}

// recordAction adds a cluster event: the console, the key's principal and id, what was asked.
// The service records what each operation does; this records who asked, through the console.
func (c *Console) recordAction(r *request, cluster, what string) error {
	return c.cfg.Store.Write(r.Context(), func(tx store.Tx) error {
		cl, err := tx.Cluster(cluster)
		if err != nil {
			return err
		}
		principal := r.key.Principal
		if principal == "" {
			principal = r.key.ID
		}
		return tx.AppendEvent(&store.Event{ID: uuid.NewString(), ClusterID: cl.ID, ClusterName: cl.Name, ClusterARN: cl.ARN,
			ResourceType: api.ClusterEventResourceTypeCluster, Level: api.ClusterEventLevelInfo,
			Time:        c.cfg.Now().UTC().Truncate(1e6),
			Description: fmt.Sprintf("Web console: %s (access key %s) requested %s.", principal, r.key.ID, what)})
	})
}
