package deviceplugin

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1beta1 "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet is the kubelet's Registration service on kubelet.sock: it records what
// registers. (The real kubelet's side is TestEksGPUs.)
type fakeKubelet struct {
	v1beta1.UnimplementedRegistrationServer
	got chan *v1beta1.RegisterRequest
	srv *grpc.Server
}

func (k *fakeKubelet) Register(_ context.Context, r *v1beta1.RegisterRequest) (*v1beta1.Empty, error) {
	k.got <- r
	return &v1beta1.Empty{}, nil
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	path := filepath.Join(dir, "kubelet.sock")
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{got: make(chan *v1beta1.RegisterRequest, 4), srv: grpc.NewServer()}
	v1beta1.RegisterRegistrationServer(k.srv, k)
	go k.srv.Serve(l)
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) registration(t *testing.T) *v1beta1.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register with the kubelet")
		return nil
	}
}

// The plugin registers nvidia.com/gpu with the kubelet, lists the GPUs with their health and
// sends the list again when one turns Unhealthy, gives a container its GPUs' device files and
// NVIDIA_VISIBLE_DEVICES, and registers again with a restarted kubelet.
func TestPluginServesTheKubelet(t *testing.T) {
	dir, err := os.MkdirTemp("", "dp") // short: a Unix socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var mu sync.Mutex
	devs := []Device{{ID: "GPU-a", Index: 0, Paths: []string{"/dev/nvidia0"}, Healthy: true}, {ID: "GPU-b", Index: 1, Paths: []string{"/dev/nvidia1"}, Healthy: true}}
	p := New(Config{Dir: dir, Shared: []string{"/dev/nvidiactl"}, Poll: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Devices: func() []Device { mu.Lock(); defer mu.Unlock(); return append([]Device(nil), devs...) }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx) // before the kubelet: it waits for kubelet.sock
	k := startKubelet(t, dir)
	r := k.registration(t)
	if r.Version != v1beta1.Version || r.ResourceName != "nvidia.com/gpu" || r.Endpoint != SocketName {
		t.Fatalf("registration %+v", r)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := v1beta1.NewDevicePluginClient(conn)
	stream, err := c.ListAndWatch(ctx, &v1beta1.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	health := func() map[string]string {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, d := range resp.Devices {
			out[d.ID] = d.Health
		}
		return out
	}
	if h := health(); len(h) != 2 || h["GPU-a"] != v1beta1.Healthy || h["GPU-b"] != v1beta1.Healthy {
		t.Fatalf("first list %v", h)
	}
	mu.Lock()
	devs[1].Healthy = false
	mu.Unlock()
	p.Notify()
	if h := health(); h["GPU-a"] != v1beta1.Healthy || h["GPU-b"] != v1beta1.Unhealthy {
		t.Fatalf("after GPU-b failed: %v", h)
	}

	a, err := c.Allocate(ctx, &v1beta1.AllocateRequest{ContainerRequests: []*v1beta1.ContainerAllocateRequest{{DevicesIds: []string{"GPU-a", "GPU-b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	cr := a.ContainerResponses[0]
	var paths []string
	for _, d := range cr.Devices {
		paths = append(paths, d.HostPath+">"+d.ContainerPath+":"+d.Permissions)
	}
	want := []string{"/dev/nvidia0>/dev/nvidia0:rw", "/dev/nvidia1>/dev/nvidia1:rw", "/dev/nvidiactl>/dev/nvidiactl:rw"}
	if len(paths) != 3 || paths[0] != want[0] || paths[1] != want[1] || paths[2] != want[2] || cr.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a,GPU-b" {
		t.Fatalf("allocation: %v %v", paths, cr.Envs)
	}
	if _, err := c.Allocate(ctx, &v1beta1.AllocateRequest{ContainerRequests: []*v1beta1.ContainerAllocateRequest{{DevicesIds: []string{"GPU-z"}}}}); err == nil {
		t.Error("a GPU the node does not have was allocated")
	}

	// A kubelet starting removes the plugins' sockets and makes its own anew.
	k.srv.Stop()
	os.Remove(filepath.Join(dir, SocketName))
	k = startKubelet(t, dir)
	if r := k.registration(t); r.ResourceName != "nvidia.com/gpu" {
		t.Fatalf("registration with the restarted kubelet %+v", r)
	}
}
