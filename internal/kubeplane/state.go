package kubeplane

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// portFile keeps the API server's port in Config.Dir, so that a restart serves at the same
// address and the kubeconfigs written for it (hale update-kubeconfig's) keep working.
const portFile = "apiserver-port"

// stablePort returns the API server's port of the previous start in dir when it is free on
// host and not among taken (the other ports this start chose), and otherwise fresh (a free
// port), recording what it returns.
func stablePort(dir, host string, fresh int, taken []int) int {
	port := fresh
	if b, err := os.ReadFile(filepath.Join(dir, portFile)); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && p < 65536 && !slices.Contains(taken, p) {
			if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
				l.Close()
				port = p
			}
		}
	}
	os.WriteFile(filepath.Join(dir, portFile), []byte(strconv.Itoa(port)+"\n"), 0o600)
	return port
}

// Reset stops the control plane and removes its objects (etcd's data: every Node, workload and
// Secret), keeping its PKI, its port and its registry's images, so that the next Start serves
// an empty cluster at the same address with the same credentials. hale up does it when it
// tears down the cluster it started, so that no workload of it is found by the next run (an
// earlier run's PyTorchJob would have been scheduled onto the next cluster's nodes).
func (cp *ControlPlane) Reset() error {
	cp.Stop()
	return os.RemoveAll(filepath.Join(cp.cfg.Dir, "etcd"))
}
