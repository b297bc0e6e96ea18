package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"

	"github.com/haleproject/hale/internal/provider"
)

// Pod networks between nodes (provider.PodRoutes): every node of an Eks cluster with real
// kubelets has a pod CIDR of its own behind its CNI bridge, and the nodes share one L2 bridge
// (the provider's), so a route "that CIDR via that node's address" in every other node's network
// namespace and in the host's is all it takes (what kindnet and flannel's host-gw do with a
// daemon on each node; hale owns the namespaces, so it sets them from outside). The host's routes
// carry the pods' answers from the API server and hale's server back to them. Every route hale
// sets has its own protocol number, so that a route no longer wanted is found and removed, and
// nothing else's is touched.

// podRouteProto tags hale's pod routes (ip route ... proto 186).
const podRouteProto = "186"

// RoutePods implements provider.PodRoutes: routes are the cluster's nodes' pod CIDRs; each
// instance's namespace gets the others', and the host all of them, through the bridge.
func (p *Provider) RoutePods(ctx context.Context, clusterID string, routes []provider.PodRoute) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := p.records()
	if err != nil {
		return err
	}
	byID := map[string]*record{}
	for _, r := range rs {
		if r.ClusterID == clusterID {
			byID[r.ID] = r
		}
	}
	for _, rt := range routes {
		if _, err := netip.ParsePrefix(rt.CIDR); err != nil {
			return fmt.Errorf("pod route of %s: %w", rt.InstanceID, err)
		}
	}
	for id, r := range byID {
		if !netnsExists(r.Netns) {
			continue
		}
		var want []provider.PodRoute
		for _, rt := range routes {
			if rt.InstanceID != id {
				want = append(want, rt)
			}
		}
		if err := syncRoutes([]string{"-n", r.Netns}, "eth0", want); err != nil {
			return fmt.Errorf("pod routes in %s: %w", id, err)
		}
	}
	// The host: this cluster's routes, and those of the provider's other clusters as they are.
	var host []provider.PodRoute
	current, err := listRoutes(nil)
	if err != nil {
		return err
	}
	for _, c := range current {
		if owner := p.addressOwner(c.Via); owner != "" && byID[owner] == nil {
			host = append(host, c) // another cluster's
		}
	}
	return syncRoutes(nil, p.cfg.Bridge, append(host, routes...))
}

// syncRoutes makes hale's pod routes of one network namespace (ipArgs: "-n NS", or none for
// the host's) what want says, through device dev.
func syncRoutes(ipArgs []string, dev string, want []provider.PodRoute) error {
	have, err := listRoutes(ipArgs)
	if err != nil {
		return err
	}
	for _, h := range have {
		if !slices.ContainsFunc(want, func(w provider.PodRoute) bool { return w.CIDR == h.CIDR && w.Via == h.Via }) {
			if err := ip(append(append([]string{}, ipArgs...), "route", "del", h.CIDR, "proto", podRouteProto)...); err != nil {
				return err
			}
		}
	}
	for _, w := range want {
		if slices.ContainsFunc(have, func(h provider.PodRoute) bool { return w.CIDR == h.CIDR && w.Via == h.Via }) {
			continue
		}
		if err := ip(append(append([]string{}, ipArgs...), "route", "replace", w.CIDR, "via", w.Via, "dev", dev, "proto", podRouteProto)...); err != nil {
			return err
		}
	}
	return nil
}

// listRoutes lists hale's pod routes of a network namespace.
func listRoutes(ipArgs []string) ([]provider.PodRoute, error) {
	out, err := exec.Command("ip", append(append([]string{"-j"}, ipArgs...), "route", "show", "proto", podRouteProto)...).Output()
	if err != nil {
		return nil, fmt.Errorf("ip route show: %w", err)
	}
	var rows []struct {
		Dst     string `json:"dst"`
		Gateway string `json:"gateway"`
	}
	if len(out) > 0 {
		if err := json.Unmarshal(out, &rows); err != nil {
			return nil, fmt.Errorf("ip -j route show: %w", err)
		}
	}
	var rs []provider.PodRoute
	for _, r := range rows {
		rs = append(rs, provider.PodRoute{CIDR: r.Dst, Via: r.Gateway})
	}
	return rs, nil
}

// dropHostRoutes removes the host's pod routes through a node that is going.
func (p *Provider) dropHostRoutes(r *record) {
	have, err := listRoutes(nil)
	if err != nil {
		return
	}
	for _, h := range have {
		if h.Via == r.IP {
			ip("route", "del", h.CIDR, "proto", podRouteProto)
		}
	}
}
