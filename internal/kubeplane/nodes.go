package kubeplane

import (
	"errors"
	"net"

	"github.com/haleproject/hale/internal/nodestack"
)

// ErrNoNodeAddress: the control plane listens on loopback only (Config.Address empty), where no
// node's kubelet reaches it.
var ErrNoNodeAddress = errors.New("kubeplane: the API server listens on loopback only: real kubelets need Config.Address")

// NodeCredentials issues what one real kubelet and its kube-proxy need from the control plane
// for Node name, whose InternalIP is ip and whose host name is hostname: where the API server is
// (the Config.Address it listens on), the CA that signs everything, a client certificate for
// its Node (user system:node:<name>, group system:nodes, which the Node authorizer and the
// NodeRestriction admission plugin key on), a serving certificate for its own endpoint (port
// 10250: kubectl logs, exec), kube-proxy's (user system:kube-proxy, which the bootstrap role
// system:node-proxier is bound to), the pods' network and the registry. Each call issues new ones, valid as
// long as the CA.
func (cp *ControlPlane) NodeCredentials(name string, ip net.IP, hostname string) (*nodestack.Credentials, error) {
	if cp.cfg.Address == "" {
		return nil, ErrNoNodeAddress
	}
	c := &nodestack.Credentials{Server: cp.server, CA: cp.pki.caPEM, ClusterCIDR: ClusterCIDR, Registry: cp.registry}
	var err error
	if c.ClientCert, c.ClientKey, err = cp.pki.issuePEM("system:node:"+name, []string{"system:nodes"}, nil, nil); err != nil {
		return nil, err
	}
	dns := []string{name}
	if hostname != "" {
		dns = append(dns, hostname)
	}
	if c.ServingCert, c.ServingKey, err = cp.pki.issuePEM("system:node:"+name, []string{"system:nodes"}, []net.IP{ip}, dns); err != nil {
		return nil, err
	}
	if c.ProxyCert, c.ProxyKey, err = cp.pki.issuePEM("system:kube-proxy", nil, nil, nil); err != nil {
		return nil, err
	}
	return c, nil
}
