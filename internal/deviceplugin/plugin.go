// Package deviceplugin serves a node's GPUs to its kubelet as the extended resource
// nvidia.com/gpu, through the kubelet's device plugin API (k8s.io/kubelet's
// pkg/apis/deviceplugin/v1beta1; Kubernetes' "Device Plugins" page): the plugin serves gRPC on a
// Unix socket in the kubelet's device plugin directory, registers it with the kubelet's
// Registration service (kubelet.sock there), streams the devices and their health
// (ListAndWatch), and tells the runtime which device files and environment a container that
// was given some gets (Allocate). This is what NVIDIA's k8s-device-plugin does on a machine;
// hale's agent runs this one instead because hale's health monitors, not NVML alone, decide
// that a GPU is unhealthy (a Xid hale acts on, a device gone), and because the local
// provider's GPUs are simulated device files NVML cannot see.
package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1beta1 "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ResourceName is the extended resource the GPUs are: NVIDIA's, so that the manifests written
// for EKS (limits: nvidia.com/gpu: 8) run unchanged.
const ResourceName = "nvidia.com/gpu"

// KubeletDir is the kubelet's device plugin directory on a node (v1beta1.DevicePluginPath).
const KubeletDir = "/var/lib/kubelet/device-plugins"

// SocketName is the plugin's socket in the device plugin directory.
const SocketName = "hale-gpu.sock"

// Device is one GPU as the kubelet sees it: its ID (the GPU's UUID, as NVIDIA's plugin names
// them), the device files a container given it needs, and whether it is healthy.
type Device struct {
	ID      string
	Index   int
	Paths   []string // the GPU's device file (/dev/nvidia0)
	Healthy bool
}

// Config is a plugin's: where the kubelet's sockets are, the GPUs now (called on every change
// and every Poll), and the device files every GPU container also needs (/dev/nvidiactl).
type Config struct {
	Dir     string // the kubelet's device plugin directory (v1beta1.DevicePluginPath)
	Devices func() []Device
	Shared  []string
	Log     *slog.Logger
	// Poll is how often the devices are read again and the kubelet's socket looked at (0: 1 s).
	Poll time.Duration
}

// Plugin is a running device plugin.
type Plugin struct {
	v1beta1.UnimplementedDevicePluginServer
	cfg     Config
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when Notify is called
}

// New returns a plugin; Run serves it.
func New(cfg Config) *Plugin {
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	return &Plugin{cfg: cfg, changed: make(chan struct{})}
}

// Notify tells the plugin the devices may have changed (a finding on a GPU): ListAndWatch
// sends the list again at once instead of at the next poll.
func (p *Plugin) Notify() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *Plugin) changes() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Run serves the plugin until ctx ends: it waits for the kubelet's socket, serves its own,
// registers, and does it again whenever the kubelet restarts (a kubelet removes every socket
// in the directory but its own when it starts, so the plugin's socket vanishing, or the
// kubelet's being made anew, means a new kubelet that knows no plugin).
func (p *Plugin) Run(ctx context.Context) {
	kubelet := filepath.Join(p.cfg.Dir, "kubelet.sock")
	for ctx.Err() == nil {
		ks, err := os.Stat(kubelet)
		if err != nil {
			sleep(ctx, p.cfg.Poll)
			continue
		}
		srv, err := p.serve()
		if err == nil {
			err = p.register(ctx, kubelet)
		}
		if err != nil {
			p.cfg.Log.Warn("GPU device plugin: serving the kubelet", "error", err)
			if srv != nil {
				srv.Stop()
			}
			sleep(ctx, p.cfg.Poll)
			continue
		}
		p.cfg.Log.Info("GPU device plugin registered with the kubelet", "resource", ResourceName, "socket", filepath.Join(p.cfg.Dir, SocketName))
		for ctx.Err() == nil {
			sleep(ctx, p.cfg.Poll)
			now, err := os.Stat(kubelet)
			if _, mine := os.Stat(filepath.Join(p.cfg.Dir, SocketName)); mine != nil || err != nil || !os.SameFile(ks, now) {
				break
			}
		}
		srv.Stop()
	}
}

// serve listens on the plugin's socket, replacing one an earlier agent left.
func (p *Plugin) serve() (*grpc.Server, error) {
	path := filepath.Join(p.cfg.Dir, SocketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	v1beta1.RegisterDevicePluginServer(srv, p)
	go srv.Serve(l)
	return srv, nil
}

// register tells the kubelet the plugin's socket and resource.
func (p *Plugin) register(ctx context.Context, kubelet string) error {
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = v1beta1.NewRegistrationClient(conn).Register(ctx, &v1beta1.RegisterRequest{Version: v1beta1.Version,
		Endpoint: SocketName, ResourceName: ResourceName, Options: &v1beta1.DevicePluginOptions{}})
	if err != nil {
		return fmt.Errorf("registering with %s: %w", kubelet, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// GetDevicePluginOptions implements v1beta1.DevicePluginServer: no pre-start call, no
// preferred allocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *v1beta1.Empty) (*v1beta1.DevicePluginOptions, error) {
	return &v1beta1.DevicePluginOptions{}, nil
}

// ListAndWatch implements v1beta1.DevicePluginServer: the GPUs and their health, sent again
// whenever they change (the kubelet takes an Unhealthy device out of the Node's allocatable).
func (p *Plugin) ListAndWatch(_ *v1beta1.Empty, stream v1beta1.DevicePlugin_ListAndWatchServer) error {
	var last []*v1beta1.Device
	for {
		changed := p.changes()
		devs := kubeletDevices(p.cfg.Devices())
		if last == nil || !slices.EqualFunc(devs, last, func(a, b *v1beta1.Device) bool { return a.ID == b.ID && a.Health == b.Health }) {
			if err := stream.Send(&v1beta1.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
			for _, d := range devs {
				if d.Health != v1beta1.Healthy {
					p.cfg.Log.Info("GPU device plugin: a GPU reported Unhealthy to the kubelet", "id", d.ID)
				}
			}
			last = devs
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		case <-time.After(p.cfg.Poll):
		}
	}
}

func kubeletDevices(ds []Device) []*v1beta1.Device {
	out := []*v1beta1.Device{}
	for _, d := range ds {
		h := v1beta1.Healthy
		if !d.Healthy {
			h = v1beta1.Unhealthy
		}
		out = append(out, &v1beta1.Device{ID: d.ID, Health: h})
	}
	return out
}

// Allocate implements v1beta1.DevicePluginServer: a container given GPUs gets their device
// files and the driver's shared ones, and NVIDIA_VISIBLE_DEVICES naming them (what NVIDIA's
// container toolkit reads).
func (p *Plugin) Allocate(_ context.Context, req *v1beta1.AllocateRequest) (*v1beta1.AllocateResponse, error) {
	byID := map[string]Device{}
	for _, d := range p.cfg.Devices() {
		byID[d.ID] = d
	}
	resp := &v1beta1.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		var specs []*v1beta1.DeviceSpec
		for _, id := range c.DevicesIds {
			d, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("allocate: no GPU %s on this node", id)
			}
			for _, path := range d.Paths {
				specs = append(specs, &v1beta1.DeviceSpec{ContainerPath: path, HostPath: path, Permissions: "rw"})
			}
		}
		for _, path := range p.cfg.Shared {
			specs = append(specs, &v1beta1.DeviceSpec{ContainerPath: path, HostPath: path, Permissions: "rw"})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &v1beta1.ContainerAllocateResponse{Devices: specs,
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")}})
	}
	return resp, nil
}
