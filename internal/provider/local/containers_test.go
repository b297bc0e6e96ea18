package local

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// hostCgroups finds this process's own cgroup in every cgroup v1 hierarchy: each directory it
// names lists this process in its cgroup.procs.
func TestHostCgroups(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/cpu"); err != nil {
		t.Skip("no cgroup v1 hierarchy here")
	}
	cgs, err := hostCgroups()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, cg := range cgs {
		names[cg.Name] = true
		b, err := os.ReadFile(filepath.Join(cg.Dir, "cgroup.procs"))
		if err != nil || !slices.Contains(strings.Fields(string(b)), strconv.Itoa(os.Getpid())) {
			t.Errorf("%s (%s): this process is not in its cgroup.procs (%v)", cg.Dir, cg.Options, err)
		}
		if strings.HasPrefix(cg.Options, "name=") || (cg.Name == "systemd" && cg.Options != "none,name=systemd") {
			t.Errorf("a named hierarchy's options %q: want none,name=...", cg.Options)
		}
	}
	if !names["memory"] || names["unified"] {
		t.Errorf("hierarchies %v: want memory among them and no unified (v2)", names)
	}
}

// A node with containers gets the kubelet's kernel settings as read-only files over /proc/sys,
// an empty /dev/kmsg, containerd's directory on the host's file system and the node stack's
// binaries (where its kubelet link points), read-only; without the node stack it is refused.
func TestContainerBinds(t *testing.T) {
	stack := t.TempDir()
	bin := filepath.Join(stack, "v1.2.3")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "kubelet"), nil, 0o755)
	links := filepath.Join(stack, "k8s")
	os.MkdirAll(links, 0o755)
	if err := os.Symlink(filepath.Join(bin, "kubelet"), filepath.Join(links, "kubelet")); err != nil {
		t.Fatal(err)
	}
	p := &Provider{cfg: Config{Root: t.TempDir(), NodeStack: links, NodeImages: "/var/cache/images"}}
	r := &record{ID: "i-0123456789abcdef0"}
	binds, err := p.containerBinds(r)
	if err != nil {
		t.Fatal(err)
	}
	byTarget := map[string]Bind{}
	for _, b := range binds {
		byTarget[b.Target] = b
	}
	for path, v := range kubeletSysctls {
		b, ok := byTarget["/proc/sys/"+path]
		if !ok || !b.ReadOnly {
			t.Errorf("/proc/sys/%s: %+v", path, b)
			continue
		}
		if got, _ := os.ReadFile(b.Source); string(got) != v+"\n" {
			t.Errorf("/proc/sys/%s reads %q, want %s", path, got, v)
		}
	}
	if b := byTarget["/dev/kmsg"]; !b.ReadOnly {
		t.Errorf("/dev/kmsg: %+v", b)
	}
	if b := byTarget["/var/lib/containerd"]; b.ReadOnly || !strings.HasPrefix(b.Source, p.dir(r.ID)) {
		t.Errorf("containerd's directory: %+v", b)
	}
	if b := byTarget[NodeStackDir]; b.Source != bin || !b.ReadOnly {
		t.Errorf("the node stack: %+v, want %s read-only", b, bin)
	}
	if b := byTarget[NodeImagesDir]; b.Source != "/var/cache/images" {
		t.Errorf("the node images: %+v", b)
	}
	p.cfg.NodeStack = ""
	if _, err := p.containerBinds(r); err == nil || !strings.Contains(err.Error(), "node stack") {
		t.Errorf("without the node stack: %v", err)
	}
}

// A node with containers starts in its cgroups: the command moves itself into each cgroup's
// procs, then runs unshare with --cgroup added.
func TestJoinCgroups(t *testing.T) {
	argv := NodeCommand("hale-i-1", "/usr/bin/hale", "/s.json", []string{"/usr/bin/hale", "agent"})
	got := joinCgroups([]Cgroup{{Dir: "/sys/fs/cgroup/cpu/hale/i-1"}, {Dir: "/sys/fs/cgroup/memory/hale/i-1"}}, withFlag(argv, "unshare", "--cgroup"))
	want := append([]string{"sh", "-c", joinCgroupsScript, "sh", "/sys/fs/cgroup/cpu/hale/i-1/cgroup.procs", "/sys/fs/cgroup/memory/hale/i-1/cgroup.procs", "--",
		"nsenter", "--net=/run/netns/hale-i-1", "--", "unshare", "--cgroup"}, argv[4:]...)
	if !slices.Equal(got, want) {
		t.Errorf("joinCgroups:\n got %q\nwant %q", got, want)
	}
	if w := withFlag([]string{"a", "b"}, "nsenter", "--cgroup"); !slices.Equal(w, []string{"a", "b"}) {
		t.Errorf("withFlag without the command: %q", w)
	}
}
