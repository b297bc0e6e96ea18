package service

import (
	"context"

	"github.com/haleproject/hale/api"
)

// Operations of the model that hale does not serve yet. Each answers a ValidationException that
// names the operation, so a client learns at once what is missing instead of getting a generic
// failure.

func notServed(op, why string) error {
	return invalid("hale does not serve SageMaker.%s yet: %s.", op, why)
}

const schedulerWhy = "task governance (Kueue on Eks clusters) is not built yet"

// CreateClusterSchedulerConfig is not served (EKS task governance).
func (s *Service) CreateClusterSchedulerConfig(context.Context, *api.CreateClusterSchedulerConfigRequest) (*api.CreateClusterSchedulerConfigResponse, error) {
	return nil, notServed("CreateClusterSchedulerConfig", schedulerWhy)
}

// DescribeClusterSchedulerConfig is not served (EKS task governance).
func (s *Service) DescribeClusterSchedulerConfig(context.Context, *api.DescribeClusterSchedulerConfigRequest) (*api.DescribeClusterSchedulerConfigResponse, error) {
	return nil, notServed("DescribeClusterSchedulerConfig", schedulerWhy)
}

// ListClusterSchedulerConfigs is not served (EKS task governance).
func (s *Service) ListClusterSchedulerConfigs(context.Context, *api.ListClusterSchedulerConfigsRequest) (*api.ListClusterSchedulerConfigsResponse, error) {
	return nil, notServed("ListClusterSchedulerConfigs", schedulerWhy)
}

// UpdateClusterSchedulerConfig is not served (EKS task governance).
func (s *Service) UpdateClusterSchedulerConfig(context.Context, *api.UpdateClusterSchedulerConfigRequest) (*api.UpdateClusterSchedulerConfigResponse, error) {
	return nil, notServed("UpdateClusterSchedulerConfig", schedulerWhy)
}

// DeleteClusterSchedulerConfig is not served (EKS task governance).
func (s *Service) DeleteClusterSchedulerConfig(context.Context, *api.DeleteClusterSchedulerConfigRequest) error {
	return notServed("DeleteClusterSchedulerConfig", schedulerWhy)
}

// CreateComputeQuota is not served (EKS task governance).
func (s *Service) CreateComputeQuota(context.Context, *api.CreateComputeQuotaRequest) (*api.CreateComputeQuotaResponse, error) {
	return nil, notServed("CreateComputeQuota", schedulerWhy)
}

// DescribeComputeQuota is not served (EKS task governance).
func (s *Service) DescribeComputeQuota(context.Context, *api.DescribeComputeQuotaRequest) (*api.DescribeComputeQuotaResponse, error) {
	return nil, notServed("DescribeComputeQuota", schedulerWhy)
}

// ListComputeQuotas is not served (EKS task governance).
func (s *Service) ListComputeQuotas(context.Context, *api.ListComputeQuotasRequest) (*api.ListComputeQuotasResponse, error) {
	return nil, notServed("ListComputeQuotas", schedulerWhy)
}

// UpdateComputeQuota is not served (EKS task governance).
func (s *Service) UpdateComputeQuota(context.Context, *api.UpdateComputeQuotaRequest) (*api.UpdateComputeQuotaResponse, error) {
	return nil, notServed("UpdateComputeQuota", schedulerWhy)
}

// DeleteComputeQuota is not served (EKS task governance).
func (s *Service) DeleteComputeQuota(context.Context, *api.DeleteComputeQuotaRequest) error {
	return notServed("DeleteComputeQuota", schedulerWhy)
}
