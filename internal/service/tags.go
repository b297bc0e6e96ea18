package service

import (
	"context"
	"errors"
	"regexp"
	"sort"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// MaxTags is how many tags a resource may carry (SageMaker's limit, TagList max 50).
const MaxTags = 50

var clusterARNPattern = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:([a-z0-9\-]*):([0-9]{12}):cluster/([a-z0-9]{12})$`)

// taggable resolves a ResourceArn to the cluster it names. hale's only taggable resources are
// clusters; any other ARN, or a cluster that does not exist, is a ValidationException, as
// SageMaker answers for tags on a missing resource.
func (s *Service) taggable(ctx context.Context, tx store.Tx, arn, action string) (*store.Cluster, error) {
	m := clusterARNPattern.FindStringSubmatch(arn)
	if m == nil {
		return nil, invalid("1 validation error detected: Value '%s' at 'resourceArn' failed to satisfy constraint: hale can tag only clusters (arn:aws:sagemaker:<region>:<account>:cluster/<id>)", arn)
	}
	c, err := tx.ClusterByID(m[3])
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.ARN != arn) {
		return nil, invalid("1 validation error detected: Value '%s' at 'resourceArn' failed to satisfy constraint: resource does not exist", arn)
	}
	if err != nil {
		return nil, err
	}
	if err := authorizeCluster(ctx, action, c.Name, arn); err != nil {
		return nil, err
	}
	return c, nil
}

// AddTags adds or overwrites tags on a cluster. Errors: ValidationException (unknown resource,
// duplicate keys, more than 50 tags in all).
func (s *Service) AddTags(ctx context.Context, in *api.AddTagsInput) (*api.AddTagsOutput, error) {
	if err := api.CheckTags(in.Tags); err != nil {
		return nil, err
	}
	var out *api.AddTagsOutput
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		if _, err := s.taggable(ctx, tx, in.GetResourceArn(), "AddTags"); err != nil {
			return "", err
		}
		if err := tx.PutTags(in.GetResourceArn(), in.Tags); err != nil {
			return "", err
		}
		all, err := tx.Tags(in.GetResourceArn())
		if err != nil {
			return "", err
		}
		if len(all) > MaxTags {
			return "", invalid("1 validation error detected: Value at 'tags' failed to satisfy constraint: the resource would have %d tags; the limit is %d", len(all), MaxTags)
		}
		out = &api.AddTagsOutput{Tags: in.Tags}
		return "", nil
	})
	return out, err
}

// ListTags returns a cluster's tags sorted by key, MaxResults (at least 50) per page.
// Errors: ValidationException (unknown resource).
func (s *Service) ListTags(ctx context.Context, in *api.ListTagsInput) (*api.ListTagsOutput, error) {
	out := &api.ListTagsOutput{Tags: []api.Tag{}}
	limit := pageSize(in.MaxResults, MaxTags)
	err := s.read(ctx, func(tx store.Tx) error {
		if _, err := s.taggable(ctx, tx, in.GetResourceArn(), "ListTags"); err != nil {
			return err
		}
		all, err := tx.Tags(in.GetResourceArn())
		if err != nil {
			return err
		}
		digest := queryDigest("ListTags", in.GetResourceArn())
		start := 0
		if in.NextToken != nil && *in.NextToken != "" {
			var after string
			if err := decodeToken(*in.NextToken, digest, &after); err != nil {
				return err
			}
			start = sort.Search(len(all), func(i int) bool { return all[i].GetKey() > after })
		}
		end := min(start+limit, len(all))
		out.Tags = append(out.Tags, all[start:end]...)
		if end < len(all) {
			out.NextToken = new(encodeToken(digest, all[end-1].GetKey()))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteTags removes tag keys from a cluster; keys it does not have are ignored.
// Errors: ValidationException (unknown resource).
func (s *Service) DeleteTags(ctx context.Context, in *api.DeleteTagsInput) (*api.DeleteTagsOutput, error) {
	err := s.write(ctx, func(tx store.Tx) (string, error) {
		if _, err := s.taggable(ctx, tx, in.GetResourceArn(), "DeleteTags"); err != nil {
			return "", err
		}
		return "", tx.DeleteTags(in.GetResourceArn(), in.TagKeys)
	})
	if err != nil {
		return nil, err
	}
	return &api.DeleteTagsOutput{}, nil
}
