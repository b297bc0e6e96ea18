package kubeplane

import (
	"errors"
	"net"
)

// NodeCredentials is what one real kubelet needs from the control plane: where the API server
// is (the Config.Address it listens on), the CA that signs everything, a client certificate for
// its Node (user system:node:<name>, group system:nodes, which the Node authorizer and the
// NodeRestriction admission plugin key on) and a serving certificate for its own endpoint
// (port 10250: kubectl logs, exec, port-forward), all PEM.
type NodeCredentials struct {
	Server                  string
	CA                      []byte
	ClientCert, ClientKey   []byte
	ServingCert, ServingKey []byte
	// ProxyCert and ProxyKey are the node's kube-proxy's (user system:kube-proxy, which the
	// bootstrap role system:node-proxier is bound to).
	ProxyCert, ProxyKey []byte
	// ClusterCIDR is the pods' network (kube-proxy tells pods' traffic by it).
	ClusterCIDR string
}

// ErrNoNodeAddress: the control plane listens on loopback only (Config.Address empty), where no
// node's kubelet reaches it.
var ErrNoNodeAddress = errors.New("kubeplane: the API server listens on loopback only: real kubelets need Config.Address")

// NodeCredentials issues the credentials of the kubelet of Node name, whose InternalIP is ip and
// whose host name is hostname. Each call issues new ones, valid as long as the CA.
func (cp *ControlPlane) NodeCredentials(name string, ip net.IP, hostname string) (*NodeCredentials, error) {
	if cp.cfg.Address == "" {
		return nil, ErrNoNodeAddress
	}
	c := &NodeCredentials{Server: cp.server, CA: cp.pki.caPEM, ClusterCIDR: ClusterCIDR}
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
