package controller_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/harness"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/service"
	"github.com/haleproject/hale/internal/store"
)

// fakeImages is a registry with the images in roots (id -> root file system); broken ones are
// usable when validated but fail when a node is to boot from them (deleted in between).
type fakeImages struct {
	roots  map[string]string
	broken map[string]bool
}

func (f fakeImages) Usable(id string) error {
	if id == "default" || f.roots[id] != "" {
		return nil
	}
	return errors.New("no such image")
}

func (f fakeImages) Root(id string) (string, error) {
	if id == image.Default && f.roots[id] == "" {
		return "", fmt.Errorf("%w in /var/lib/hale/images/default", image.ErrNoDefault)
	}
	if f.broken[id] || f.roots[id] == "" {
		return "", fmt.Errorf("image %s is gone", id)
	}
	return f.roots[id], nil
}

// Each node is launched with its group's image: the id, and its root file system from the
// registry; a default group's nodes get the default image's root, or none (the provider's own)
// with a Warn event when the default image is not built; an image that cannot boot fails its
// nodes with a message naming it.
func TestLaunchBootsTheGroupsImage(t *testing.T) {
	h := newHarness(t)
	imgs := fakeImages{roots: map[string]string{"ami-0123456789abcdef0": "/images/ami-0123456789abcdef0/rootfs",
		"ami-0fedcba9876543210": "/images/gone/rootfs", "ami-0aaaaaaaaaaaaaaaa": "/images/ami-0aaaaaaaaaaaaaaaa/rootfs",
		"default": "/var/lib/hale/images/default/rootfs"},
		broken: map[string]bool{"ami-0fedcba9876543210": true}}
	h.Svc = service.New(h.Store, service.Config{Provider: "fake", Capabilities: h.M.Capabilities(), Now: h.Clock.Now, Images: imgs})
	h.Configure = func(c *controller.Config) { c.ImageRoot = imgs.Root }
	h.Start()

	img, plain := harness.Spec("img", 2), harness.Spec("plain", 1)
	img.ImageId = new("ami-0123456789abcdef0")
	id := h.Create("c", img, plain)
	h.Until(id, 20, "InService", func() bool { return h.Status(id) == api.ClusterStatusInService })
	for _, n := range h.Nodes(id) {
		got := h.M.Live[n.InstanceID].Spec
		switch n.GroupName {
		case "img":
			if got.ImageID != "ami-0123456789abcdef0" || got.ImageRoot != "/images/ami-0123456789abcdef0/rootfs" {
				t.Errorf("%s launched with image %q root %q", n.LogicalID, got.ImageID, got.ImageRoot)
			}
		case "plain":
			if got.ImageRoot != "/var/lib/hale/images/default/rootfs" || (got.ImageID != "default" && got.ImageID != "") {
				t.Errorf("%s (default image) launched with image %q root %q", n.LogicalID, got.ImageID, got.ImageRoot)
			}
		}
	}
	if ev := h.Events(id); strings.Contains(ev, "host's root") {
		t.Errorf("a warning of the host's root with the default image built:\n%s", ev)
	}

	// The default image not built: its nodes run on the provider's own root, and say so.
	delete(imgs.roots, image.Default)
	hostRoot := h.Create("hostroot", harness.Spec("plain", 1))
	h.Until(hostRoot, 20, "InService", func() bool { return h.Status(hostRoot) == api.ClusterStatusInService })
	n := h.Nodes(hostRoot)[0]
	if got := h.M.Live[n.InstanceID].Spec; got.ImageRoot != "" {
		t.Errorf("node of a default group without the default image launched on root %q", got.ImageRoot)
	}
	if warns := strings.Join(h.eventsAt(hostRoot, api.ClusterEventLevelWarn), "\n"); !strings.Contains(warns, n.InstanceID+" runs on the host's root file system") ||
		!strings.Contains(warns, "not built") {
		t.Errorf("Warn events of a node on the host's root: %q", warns)
	}

	broken := harness.Spec("broken", 1)
	broken.ImageId = new("ami-0fedcba9876543210")
	bad := h.Create("bad", broken)
	h.Until(bad, 20, "a failed node", func() bool {
		ns := h.Nodes(bad)
		return len(ns) == 1 && ns[0].Details.Phase == store.PhaseFailed
	})
	if n := h.Nodes(bad)[0]; !strings.Contains(n.StatusMessage, "ami-0fedcba9876543210") || h.M.Live[n.InstanceID] != nil {
		t.Errorf("node of a broken image: %q, launched %v", n.StatusMessage, h.M.Live[n.InstanceID] != nil)
	}

	// UpdateClusterSoftware onto another image: every node is replaced by one booting from it.
	before := map[string]string{}
	for _, n := range h.Nodes(id) {
		before[n.LogicalID] = n.InstanceID
	}
	if _, err := h.Svc.UpdateClusterSoftware(context.Background(), &api.UpdateClusterSoftwareRequest{ClusterName: new("c"),
		ImageId: new("ami-0aaaaaaaaaaaaaaaa")}); err != nil {
		t.Fatal(err)
	}
	h.Until(id, 60, "every node re-imaged", func() bool {
		for _, n := range h.Nodes(id) {
			if n.InstanceID == before[n.LogicalID] {
				return false
			}
		}
		return h.Running(id, 3)()
	})
	for _, n := range h.Nodes(id) {
		if got := h.M.Live[n.InstanceID].Spec; got.ImageRoot != "/images/ami-0aaaaaaaaaaaaaaaa/rootfs" {
			t.Errorf("%s re-imaged onto root %q", n.LogicalID, got.ImageRoot)
		}
	}
}
