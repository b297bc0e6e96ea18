package lifecycle

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Source fetches bundles from an S3-compatible object store through the AWS SDK's S3 client
// (MinIO, Ceph RGW, AWS S3 itself): every object under the URI's prefix.
type S3Source struct {
	Client *s3.Client
}

// NewS3Source returns an S3Source for an endpoint ("" for AWS itself), with path-style
// addressing, which S3-compatible stores expect.
func NewS3Source(cfg aws.Config, endpoint string) S3Source {
	return S3Source{Client: s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = true
	})}
}

// Fetch lists the prefix and reads every object.
func (s S3Source) Fetch(ctx context.Context, uri string) (map[string][]byte, error) {
	bucket, prefix, err := ParseS3URI(uri)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		prefix += "/"
	}
	files := map[string][]byte{}
	total := 0
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("lifecycle: listing %s: %w", uri, err)
		}
		for _, obj := range page.Contents {
			key := aws.ToString(obj.Key)
			if strings.HasSuffix(key, "/") {
				continue // a "directory" placeholder
			}
			out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: obj.Key})
			if err != nil {
				return nil, fmt.Errorf("lifecycle: reading s3://%s/%s: %w", bucket, key, err)
			}
			b, err := io.ReadAll(io.LimitReader(out.Body, MaxBundleBytes+1))
			out.Body.Close()
			if err != nil {
				return nil, err
			}
			if total += len(b); total > MaxBundleBytes {
				return nil, fmt.Errorf("lifecycle: %s holds more than %d bytes", uri, MaxBundleBytes)
			}
			files[path.Clean(strings.TrimPrefix(key, prefix))] = b
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("lifecycle: %s holds no objects", uri)
	}
	return files, nil
}
