package nodestack

// ResetScript is the shell that takes off a machine what the node stack left there once the
// agent and the daemons it supervised are gone (the static provider's Terminate of an Eks host,
// as `kubeadm reset` does for kubeadm's): kube-proxy's rules (its own --cleanup), the pods'
// processes (in the kubelet's kubepods cgroups) and containerd's shims, the mounts and state of
// the kubelet and containerd, the pod network's bridge, egress table and routes, the binaries
// and image archives, containerd's empty /opt/containerd (its opt plugin's, made at start), and
// the empty kubepods cgroups.
const ResetScript = `if [ -x ` + BinDir + `/kube-proxy ]; then ` + BinDir + `/kube-proxy --cleanup >/dev/null 2>&1 || true; fi
pkill -KILL -f '^` + BinDir + `/' 2>/dev/null || true
for f in $(find /sys/fs/cgroup -path '*kubepods*' -name cgroup.procs 2>/dev/null); do xargs -r kill -KILL < "$f" 2>/dev/null || true; done
awk '$2 ~ "^/(var/lib/kubelet|var/lib/containerd|run/containerd|run/netns)/" { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
find /sys/fs/cgroup -depth -type d -path '*kubepods*' -exec rmdir {} \; 2>/dev/null || true
rm -rf /var/lib/kubelet /etc/kubernetes /etc/containerd /etc/cni /var/lib/cni /run/containerd ` + BinDir + ` ` + ImagesDir + `
find /var/lib/containerd -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null || true
rmdir /opt/containerd/bin /opt/containerd/lib /opt/containerd 2>/dev/null || true
ip link del cni0 2>/dev/null || true
nft delete table ip hale-pod-egress 2>/dev/null || true
ip route flush proto ` + PodRouteProto + ` 2>/dev/null || true
`

// PodRouteProto is the routing protocol number of the routes to other nodes' pod networks
// (hale's own: 186), so that they are told from the machine's other routes.
const PodRouteProto = "186"
