// Package lifecycle prepares what HyperPod hands a node before its lifecycle scripts run: the
// script bundle fetched from LifeCycleConfig.SourceS3Uri and /opt/ml/config/resource_config.json
// listing every node of the cluster (research hyperpod-api-slurm.md §2.2-2.3). The Slurm roles'
// provisioning_parameters.json is the Slurm orchestrator's (slurmconf.BuildProvisioningParameters).
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Source fetches a lifecycle script bundle: every object under an s3:// prefix, keyed by its
// path relative to the prefix.
type Source interface {
	Fetch(ctx context.Context, uri string) (map[string][]byte, error)
}

// MaxBundleBytes bounds a bundle, since it travels to every node in one message.
const MaxBundleBytes = 32 << 20

// ParseS3URI splits s3://bucket/prefix (https://host/bucket/prefix is accepted too, as the
// model's S3Uri pattern allows).
func ParseS3URI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		if r, ok2 := strings.CutPrefix(uri, "https://"); ok2 {
			_, rest, _ = strings.Cut(r, "/")
			ok = true
		}
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("lifecycle: %q is not an s3://bucket/prefix URI", uri)
	}
	return bucket, strings.Trim(prefix, "/"), nil
}

// DirSource serves buckets from local directories: s3://bucket/prefix is Root/bucket/prefix.
// It is the default object store of a hale server (DATA_DIR/s3).
type DirSource struct {
	Root string
}

// Fetch reads every file under the prefix's directory.
func (d DirSource) Fetch(ctx context.Context, uri string) (map[string][]byte, error) {
	bucket, prefix, err := ParseS3URI(uri)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(d.Root, bucket, filepath.FromSlash(prefix))
	if !strings.HasPrefix(filepath.Clean(dir), filepath.Clean(d.Root)+string(filepath.Separator)) {
		return nil, fmt.Errorf("lifecycle: %s leaves the object store", uri)
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("lifecycle: %s does not exist: put the lifecycle scripts in %s (the server's object store maps s3://BUCKET/PREFIX to %s/BUCKET/PREFIX)", uri, dir, d.Root)
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("lifecycle: %s is a file, not a prefix", uri)
	}
	files := map[string][]byte{}
	total := 0
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += len(b); total > MaxBundleBytes {
			return fmt.Errorf("lifecycle: %s holds more than %d bytes", uri, MaxBundleBytes)
		}
		rel, _ := filepath.Rel(dir, p)
		files[path.Clean(filepath.ToSlash(rel))] = b
		return nil
	})
	return files, err
}
