// Package service implements the SageMaker cluster operations: one method per operation of
// api.Service. A method validates what the model cannot (api's cross-field rules), checks the
// caller may touch the cluster, and records the desired state and an event in one store
// transaction. It does not act on machines: reconcilers (internal/controller) do that, woken
// through Config.Notify.
package service

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// Defaults for Config.
const (
	DefaultRegion                 = "us-west-2"
	DefaultAccountID              = "123456789012"
	DefaultMaxClusters            = 100
	DefaultMaxInstancesPerCluster = 10000
)

// Config is the service's settings. Zero fields take the defaults above.
type Config struct {
	// Region and AccountID go into every ARN: arn:aws:sagemaker:<Region>:<AccountID>:cluster/<id>.
	Region    string
	AccountID string
	// MaxClusters and MaxInstancesPerCluster are the quotas behind ResourceLimitExceeded.
	MaxClusters            int
	MaxInstancesPerCluster int
	// Provider names the provider that turns groups into machines; "" means none, and new
	// clusters then stay Creating with a message that says so.
	Provider provider.Kind
	// Capabilities is what that provider can do: without Images a group can name no image but
	// "default"; Eks clusters need RealKubelets (with RealKubelets below) or SimulatedKubelets.
	Capabilities provider.Capabilities
	// RealKubelets: the provider's Eks nodes run the node stack (a kubelet of their own).
	RealKubelets bool
	// Notify is called after a change to a cluster is committed, so reconcilers can act on it.
	Notify func(clusterID string)
	// Orchestrators are the orchestrators clusters may have, as the controller has them (bound
	// to it): a cluster's is the first whose Manages accepts its specification, and it checks
	// its part of each request (orchestrator.Orchestrator's Check* and NodeRefusal). None
	// skips those checks.
	Orchestrators []orchestrator.Orchestrator
	// Images is the server's image registry, which instance groups' ImageId must name (or be
	// "default"); nil knows no image but "default".
	Images Images
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// NoProviderMessage is what DescribeCluster (FailureMessage) and ListClusterEvents (a Warn
// event) say while the server has no provider: it is why the cluster does not progress.
const NoProviderMessage = "this hale server has no provider configured, so no instances are launched " +
	"and the cluster stays Creating: start the server with --provider local (nodes on this machine) " +
	"to run it (DeleteCluster removes the cluster)"

// Service serves the cluster operations from a store.
type Service struct {
	cfg Config
	st  store.Store
}

var _ api.Service = (*Service)(nil)

// New returns a Service over st.
func New(st store.Store, cfg Config) *Service {
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.AccountID == "" {
		cfg.AccountID = DefaultAccountID
	}
	if cfg.MaxClusters == 0 {
		cfg.MaxClusters = DefaultMaxClusters
	}
	if cfg.MaxInstancesPerCluster == 0 {
		cfg.MaxInstancesPerCluster = DefaultMaxInstancesPerCluster
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, st: st}
}

// Config returns the service's settings with defaults filled in.
func (s *Service) Config() Config { return s.cfg }

func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Millisecond) }

// orchestratorFor is the orchestrator of a cluster with that specification, nil when none of
// Config.Orchestrators manages it.
func (s *Service) orchestratorFor(spec *api.CreateClusterRequest) orchestrator.Orchestrator {
	for _, o := range s.cfg.Orchestrators {
		if o.Manages(spec) {
			return o
		}
	}
	return nil
}

// checkGroupImages asks the cluster's orchestrator whether its groups may run these images together
// (group name → image id).
func (s *Service) checkGroupImages(spec *api.CreateClusterRequest, images map[string]string) error {
	if o := s.orchestratorFor(spec); o != nil {
		return o.CheckImages(images)
	}
	return nil
}

func (s *Service) notify(clusterID string) {
	if s.cfg.Notify != nil {
		s.cfg.Notify(clusterID)
	}
}

// clusterARN is arn:aws:sagemaker:<region>:<account>:cluster/<id> (research §1.2).
func (s *Service) clusterARN(id string) string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:cluster/%s", s.cfg.Region, s.cfg.AccountID, id)
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// newClusterID returns 12 random lowercase alphanumerics, the ARN's cluster id.
func newClusterID() string {
	b := make([]byte, 12)
	rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

// cluster finds the cluster named by a ClusterNameOrArn member and checks the caller may act
// on it with action. A name outside the caller's cluster patterns is refused before it is looked
// up, so AccessDeniedException never tells a caller whether a cluster it may not see exists. An
// unknown cluster is ResourceNotFound.
func (s *Service) cluster(ctx context.Context, tx store.Tx, ref, action string) (*store.Cluster, error) {
	if !strings.HasPrefix(ref, "arn:") {
		if err := authorizeCluster(ctx, action, ref, ref); err != nil {
			return nil, err
		}
	}
	c, err := store.ClusterOrNotFound(tx, ref)
	if err != nil {
		return nil, err
	}
	if err := authorizeCluster(ctx, action, c.Name, ref); err != nil {
		return nil, err
	}
	return c, nil
}

// authorizeCluster checks the caller's cluster name patterns; resource is how the request named
// the cluster, which the AccessDeniedException repeats. Calls without a key in ctx come from
// inside hale (hale up) and may act on every cluster.
func authorizeCluster(ctx context.Context, action, name, resource string) error {
	k := auth.KeyFrom(ctx)
	if k == nil || auth.AllowsCluster(k, name) {
		return nil
	}
	return auth.AccessDenied(k, "sagemaker:"+action, resource)
}

// event appends a ListClusterEvents record for c.
func (s *Service) event(tx store.Tx, c *store.Cluster, group, instanceID string, rt api.ClusterEventResourceType,
	level api.ClusterEventLevel, meta *api.EventMetadata, format string, args ...any) error {
	return tx.AppendEvent(&store.Event{
		ID:           uuid.NewString(),
		ClusterID:    c.ID,
		ClusterName:  c.Name,
		ClusterARN:   c.ARN,
		GroupName:    group,
		InstanceID:   instanceID,
		ResourceType: rt,
		Level:        level,
		Time:         s.now(),
		Description:  fmt.Sprintf(format, args...),
		Metadata:     meta,
	})
}

// write runs fn in a store write transaction and, when it commits, notifies reconcilers of the
// cluster whose id fn returns ("" for none).
func (s *Service) write(ctx context.Context, fn func(tx store.Tx) (clusterID string, err error)) error {
	var id string
	err := s.st.Write(ctx, func(tx store.Tx) error {
		var err error
		id, err = fn(tx)
		return err
	})
	if err == nil && id != "" {
		s.notify(id)
	}
	return err
}

func (s *Service) read(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.st.Read(ctx, fn)
}

func conflict(format string, args ...any) error {
	return api.Errorf(api.CodeConflictException, format, args...)
}

func invalid(format string, args ...any) error {
	return api.Errorf(api.CodeValidationException, format, args...)
}
