package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"

	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/provider"
)

// Pod networks between nodes (provider.PodRoutes): every node of an Eks cluster with real
// kubelets has a pod CIDR of its own behind its CNI bridge, and the nodes share one L2 bridge
// (the provider's), so a route "that CIDR via that node's address" in every other node's network
// namespace is all it takes (what kindnet and flannel's host-gw do with a daemon on each node;
// hale owns the namespaces, so it sets them from outside). The host gets none: pods' traffic to
// it leaves their node with the node's address (nodestack's pod egress table), and the host's
// routing table is every hale's on the machine, whose clusters' pod CIDRs are the same. Every
// route hale sets has its own protocol number, so that a route no longer wanted is found and
// removed, and nothing else's is touched.

// podRouteProto tags hale's pod routes (ip route ... proto 186).
const podRouteProto = nodestack.PodRouteProto

// RoutePods implements provider.PodRoutes: routes are the cluster's nodes' pod CIDRs; each
// instance's namespace gets the others', through the bridge.
func (p *Provider) RoutePods(ctx context.Context, clusterID string, routes []provider.PodRoute) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := p.records()
	if err != nil {
		return err
	}
	for _, rt := range routes {
		if _, err := netip.ParsePrefix(rt.CIDR); err != nil {
			return fmt.Errorf("pod route of %s: %w", rt.InstanceID, err)
		}
	}
	for _, r := range rs {
		if r.ClusterID != clusterID || !netnsExists(r.Netns) {
			continue
		}
		var want []provider.PodRoute
		for _, rt := range routes {
			if rt.InstanceID != r.ID {
				want = append(want, rt)
			}
		}
		if err := syncRoutes([]string{"-n", r.Netns}, "eth0", want); err != nil {
			return fmt.Errorf("pod routes in %s: %w", r.ID, err)
		}
	}
	return nil
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
