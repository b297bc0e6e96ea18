package controller

import (
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// identityHeld is why node n's host answers as another machine than the one its provider
// knows (provider.IdentityWatcher), "" when it does not or the provider cannot tell.
func (r *round) identityHeld(n *store.Node) string {
	if w, ok := r.c.cfg.Provider.(provider.IdentityWatcher); ok {
		return w.IdentityProblem(n.InstanceID)
	}
	return ""
}

// holdForIdentity keeps a node whose host came back from a reboot as another machine: a
// changed SSH host key is a reinstall or an attack, which only a person can tell apart, and
// neither is a fault of the hardware. So the node is not failed when its reboot budget ends,
// nor replaced or its host quarantined; an Error event names both keys at once, and the node
// is back as soon as the provider reaches the host again (the operator accepted the new key).
//
// When the provider reaches the host again, the hold ends and the reboot budget starts anew:
// the time held is no part of the host's boot.
func (r *round) holdForIdentity(n *store.Node) error {
	why := r.identityHeld(n)
	if why == n.Details.IdentityHeld {
		return nil
	}
	if why == "" {
		n.Details.IdentityHeld, n.Details.RebootAt = "", r.now
		if err := r.tx.UpdateNode(n); err != nil {
			return err
		}
		return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s (host %s) answers with a host key hale accepts again: its hold ends, and its reboot budget starts again.", n.InstanceID, n.Details.PrivateDNSHostname)
	}
	n.Details.IdentityHeld = why
	if err := r.tx.UpdateNode(n); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelError, "Instance %s (host %s, group %s) came back from its reboot answering as another machine: %s. "+
		"hale holds it for you: it is not failed, replaced or quarantined for this. If the host was reinstalled, accept its new key "+
		"(ssh-keygen -R ADDRESS -f KNOWN_HOSTS, then add the new key or run the server with --accept-new-host-keys); hale then finds it back by itself. "+
		"If it was not, find out who answers at its address.", n.InstanceID, n.Details.PrivateDNSHostname, n.GroupName, why)
}
