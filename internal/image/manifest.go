package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Status is where an image is in its life, as EC2's image states: Building (mmdebstrap runs),
// Available (usable as a group's ImageId), Failed (the build did not finish; Reason says why),
// Deleting (refused to new clusters while its users are checked and its files removed).
type Status string

// The statuses of an image.
const (
	StatusBuilding  Status = "Building"
	StatusAvailable Status = "Available"
	StatusFailed    Status = "Failed"
	StatusDeleting  Status = "Deleting"
)

// Manifest describes one image: DATA_DIR/images/<ImageId>/manifest.json, and what `hale image
// describe` prints. Sizes are bytes, durations seconds, times UTC.
type Manifest struct {
	ImageID string `json:"ImageId"`
	Name    string `json:"Name"`
	Suite   string `json:"Suite"`
	// Mirror is the Debian archive the packages came from.
	Mirror string `json:"Mirror"`
	// Packages are the packages asked for (Spec.AllPackages); Installed is every package in
	// the root with its version, as dpkg-query reports it inside the root.
	Packages  []string          `json:"Packages"`
	NoPyTorch bool              `json:"NoPyTorch,omitempty"`
	Installed map[string]string `json:"Installed,omitempty"`
	// SizeBytes is the root's regular files' apparent size, hard links counted once.
	SizeBytes int64 `json:"SizeBytes,omitempty"`
	// ContentHash is "sha256:" over the root's tree: every path in lexical order with its type,
	// permissions and owner, a file's content, a link's target, a device's number (not times,
	// so a copy of a root has its hash).
	ContentHash string `json:"ContentHash,omitempty"`
	// SpecKey is Spec.Key; ArchiveRelease is "sha256:" of the suite's InRelease file when the
	// build started (the archive's state). A build whose SpecKey and ArchiveRelease match an
	// Available image copies that image's root instead of running mmdebstrap (CopiedFrom).
	SpecKey        string `json:"SpecKey"`
	ArchiveRelease string `json:"ArchiveRelease,omitempty"`
	CopiedFrom     string `json:"CopiedFrom,omitempty"`
	// CachedRoot is the image cache's root (Cache) the build copied, when the registry had no
	// such image but the cache, which other servers' builds fill too, had its root.
	CachedRoot string `json:"CachedRoot,omitempty"`
	// ReleaseExpired, when set, is the Valid-Until date (RFC 3339) the suite's InRelease had
	// passed when the build started: apt was told to accept it (a frozen snapshot of the
	// archive serves such files), so nothing vouched that the packages were the newest.
	ReleaseExpired string `json:"ReleaseExpired,omitempty"`
	// BuildSeconds is how long the build took, from its start to the manifest.
	BuildSeconds float64   `json:"BuildSeconds,omitempty"`
	CreatedAt    time.Time `json:"CreatedAt"`
	Status       Status    `json:"Status"`
	Reason       string    `json:"Reason,omitempty"`
}

// manifestFile is the manifest's name in an image's directory; rootDir the root file system's.
const (
	manifestFile = "manifest.json"
	rootDir      = "rootfs"
	logFile      = "build.log"
)

// readManifest reads dir's manifest.json.
func readManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, manifestFile), err)
	}
	return &m, nil
}

// write stores m as dir's manifest.json, atomically (a crash leaves the old or the new one).
func (m *Manifest) write(dir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, manifestFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, manifestFile))
}
