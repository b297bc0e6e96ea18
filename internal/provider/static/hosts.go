// Package static is the provider for machines that already exist (docs/own-machines.md): an
// inventory of hosts reached over SSH, with spares and quarantine. This file holds the
// inventory file and its checks.
package static

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/haleproject/hale/api"
)

// DefaultPort and DefaultUser are a host's SSH port and user when its entry names none.
const (
	DefaultPort = 22
	DefaultUser = "root"
)

// Inventory is a hosts file: the machines hale may use, in JSON or YAML (the same fields).
//
//	Hosts:
//	- Address: 10.0.0.11            # IP address or DNS name, unique in the file (whatever the port)
//	  Port: 22                      # SSH port (default 22)
//	  User: root                    # SSH user (default root; it needs root or passwordless sudo)
//	  KeyFile: keys/id_ed25519      # private key, relative to the hosts file's directory
//	  InstanceType: ml.p5.48xlarge  # the instance type the host stands for (optional)
//	  Labels: {rack: r12}           # free labels, Kubernetes' label syntax (optional)
type Inventory struct {
	Hosts []Host `json:"Hosts"`
}

// Host is one machine of an inventory.
type Host struct {
	Address      string            `json:"Address"`
	Port         int               `json:"Port,omitempty"`
	User         string            `json:"User,omitempty"`
	KeyFile      string            `json:"KeyFile"`
	InstanceType string            `json:"InstanceType,omitempty"`
	Labels       map[string]string `json:"Labels,omitempty"`
}

// Load reads and checks the hosts file at path: JSON or YAML, unknown fields refused. Defaults
// are filled in and KeyFile is made absolute (relative to the file's directory). The error
// names the file and every entry at fault (Validate).
func Load(path string) (*Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var inv Inventory
	if err := yaml.UnmarshalStrict(b, &inv); err != nil {
		return nil, fmt.Errorf("%s: not a hosts file: %w", path, err)
	}
	if err := inv.Validate(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &inv, nil
}

// Validate fills in defaults and checks every entry, making KeyFile absolute against dir. One
// error lists each fault, naming the entry (Hosts[i], its address): an address that is neither
// an IP address nor a DNS name, the same address twice (even with two ports: the pool, hale
// hosts return and the node's IP name a host by its address), a port out of 1-65535, an
// instance type that is not one of SageMaker's (the service model's ClusterInstanceType), a key
// file that cannot be read or is not an unencrypted SSH private key, a label Kubernetes
// refuses.
func (inv *Inventory) Validate(dir string) error {
	var errs []error
	if len(inv.Hosts) == 0 {
		return errors.New("Hosts: no hosts")
	}
	seen := map[string]int{}
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		name := fmt.Sprintf("Hosts[%d] (%s)", i, h.Address)
		bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(name+": "+format, args...)) }
		if h.Port == 0 {
			h.Port = DefaultPort
		}
		if h.User == "" {
			h.User = DefaultUser
		}
		switch {
		case h.Address == "":
			bad("Address is required")
		case net.ParseIP(h.Address) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(h.Address))) > 0:
			bad("Address %q is neither an IP address nor a DNS name", h.Address)
		}
		if h.Port < 1 || h.Port > 65535 {
			bad("Port %d is not in 1-65535", h.Port)
		}
		if h.Address != "" {
			if j, dup := seen[h.Address]; dup {
				bad("Address %s is already Hosts[%d]: a host is named by its address alone, whatever its port", h.Address, j)
			} else {
				seen[h.Address] = i
			}
		}
		if h.InstanceType != "" && !slices.Contains(api.ClusterInstanceType("").Values(), api.ClusterInstanceType(h.InstanceType)) {
			bad("InstanceType %q is not a SageMaker HyperPod instance type (ml.…)", h.InstanceType)
		}
		if err := checkKey(h, dir); err != nil {
			bad("%v", err)
		}
		keys := make([]string, 0, len(h.Labels))
		for k := range h.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if e := validation.IsQualifiedName(k); len(e) > 0 {
				bad("Labels: key %q: %s", k, strings.Join(e, "; "))
			}
			if e := validation.IsValidLabelValue(h.Labels[k]); len(e) > 0 {
				bad("Labels: %s value %q: %s", k, h.Labels[k], strings.Join(e, "; "))
			}
		}
	}
	return errors.Join(errs...)
}

// checkKey makes h.KeyFile absolute against dir and checks that it is an SSH private key hale
// can use without a passphrase.
func checkKey(h *Host, dir string) error {
	if h.KeyFile == "" {
		return errors.New("KeyFile is required (the SSH private key hale logs in with)")
	}
	if !filepath.IsAbs(h.KeyFile) {
		h.KeyFile = filepath.Join(dir, h.KeyFile)
	}
	b, err := os.ReadFile(h.KeyFile)
	if err != nil {
		return fmt.Errorf("KeyFile: %w", err)
	}
	if _, err := ssh.ParsePrivateKey(b); err != nil {
		var pass *ssh.PassphraseMissingError
		if errors.As(err, &pass) {
			return fmt.Errorf("KeyFile %s is protected by a passphrase: hale needs a key it can use unattended", h.KeyFile)
		}
		return fmt.Errorf("KeyFile %s is not an SSH private key: %v", h.KeyFile, err)
	}
	return nil
}
