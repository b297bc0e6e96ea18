#!/usr/bin/env bash
# Builds the Kubernetes control plane hale runs for its Eks clusters (tools/k8s: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, kwok; tools/kubeflow: the Kubeflow
# training operator) and the node stack of its real kubelets (tools/k8s: kubelet, kube-proxy;
# tools/noderuntime: containerd, runc, the CNI plugins; Kubernetes' pause; tools/coredns: CoreDNS;
# tools/registry: the CNCF distribution registry the nodes pull images from; tools/kueue: Kueue,
# cached apart) from the Go module proxy, once per machine: the binaries are cached under ${HALE_K8S_CACHE:-~/.cache/hale-k8s}/<key>, the key
# being a hash of tools/k8s/go.mod, go.sum and this script's build flags, and linked into
# bin/k8s/ (kubectl also as bin/kubectl). A cold build takes 20-23 minutes on 2 cores
# (docs/kubernetes.md); a cached one, no time.
#
#   scripts/k8s-tools.sh          build or reuse, then link; prints the cache directory
#   scripts/k8s-tools.sh --check  exit 0 when the binaries are cached, 1 when not
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

KVER=v1.37.2 # k8s.io/kubernetes in tools/k8s/go.mod
# Never vary the compile flags: -trimpath, -race or -gcflags change Go's build-cache keys, and a
# change means a cold build again. Only -ldflags may change (a relink).
LDF="-s -w -X k8s.io/component-base/version.gitVersion=$KVER -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitVersion=$KVER \
-X k8s.io/component-base/version.gitTreeState=clean"
TOOLS=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl ./etcd sigs.k8s.io/kwok/cmd/kwok
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
# The node stack of an Eks node with a real kubelet (issue 28), from tools/noderuntime: containerd
# and its shim, ctr, the reference CNI plugins (pure Go), and runc (cgo: seccomp, linked
# statically so that it needs nothing from the node's image); the pause container's program is
# Kubernetes' own pause.c, from the same module zip, compiled as upstream's Makefile does.
NODERT=(github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
  github.com/containerd/containerd/v2/cmd/ctr github.com/containernetworking/plugins/plugins/main/bridge
  github.com/containernetworking/plugins/plugins/main/loopback github.com/containernetworking/plugins/plugins/ipam/host-local
  github.com/containernetworking/plugins/plugins/meta/portmap)
RUNC=github.com/opencontainers/runc
# Cluster DNS for those nodes' pods: CoreDNS, from tools/coredns (pure Go).
COREDNS=github.com/coredns/coredns
# The OCI registry those nodes pull their images from (nothing is pulled from the internet):
# distribution's, from tools/registry (pure Go).
REGISTRY=github.com/distribution/distribution/v3/cmd/registry
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok training-operator kubelet kube-proxy
  containerd containerd-shim-runc-v2 ctr runc pause coredns registry)
CNI=(bridge loopback host-local portmap)
# The Kubeflow training operator (PyTorchJob, kubeflow.org/v1) is built from tools/kubeflow, a
# module of its own (it has its own Kubernetes libraries), with its CRD from the same module.
TFOP=github.com/kubeflow/training-operator/cmd/training-operator.v1
# kwok's stages: what its simulated kubelets do (nodes Ready with a lease heartbeat, pods Ready,
# completed and deleted), from the kwok module itself.
STAGES=(node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready
  pod/fast/pod-complete pod/fast/pod-delete)

key=$( (cat tools/k8s/go.mod tools/k8s/go.sum tools/kubeflow/go.mod tools/kubeflow/go.sum tools/noderuntime/go.mod tools/noderuntime/go.sum
  cat tools/coredns/go.mod tools/coredns/go.sum tools/registry/go.mod tools/registry/go.sum
  echo "$LDF ${TOOLS[*]} ${STAGES[*]} $TFOP ${NODERT[*]} $RUNC $COREDNS $REGISTRY") | sha256sum | cut -c1-16)
cache=${HALE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hale-k8s}/$key

cached() {
  for b in "${BINS[@]}"; do [ -x "$cache/$b" ] || return 1; done
  for b in "${CNI[@]}"; do [ -x "$cache/cni/$b" ] || return 1; done
  [ -s "$cache/kwok-stages.yaml" ] && [ -s "$cache/pytorchjobs-crd.yaml" ]
}

if [ "${1:-}" = --check ] && ! cached; then
  exit 1
fi

if ! cached; then
  echo "k8s-tools: building Kubernetes $KVER, etcd and kwok from the Go module proxy into $cache"
  echo "k8s-tools: once per machine; 20-23 minutes on 2 cores, about 4 GB of Go build cache"
  start=$SECONDS
  rm -rf "$cache.tmp" && mkdir -p "$cache.tmp"
  (cd tools/k8s && go build -ldflags="$LDF" -o "$cache.tmp/" "${TOOLS[@]}")
  dir=$(cd tools/k8s && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  for s in "${STAGES[@]}"; do
    echo "---"
    cat "$dir/$s.yaml"
  done > "$cache.tmp/kwok-stages.yaml"
  (cd tools/kubeflow && go build -ldflags="-s -w" -o "$cache.tmp/training-operator" "$TFOP")
  cp "$(cd tools/kubeflow && go list -m -f '{{.Dir}}' github.com/kubeflow/training-operator)/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" \
    "$cache.tmp/pytorchjobs-crd.yaml"
  mkdir -p "$cache.tmp/cni"
  (cd tools/noderuntime && CGO_ENABLED=0 go build -tags no_btrfs -ldflags="-s -w" -o "$cache.tmp/" "${NODERT[@]}")
  for b in "${CNI[@]}"; do mv "$cache.tmp/$b" "$cache.tmp/cni/$b"; done
  # runc's seccomp needs libseccomp-dev (scripts/setup.sh installs it, perhaps beside this build).
  for _ in $(seq 180); do [ -e /usr/lib/x86_64-linux-gnu/libseccomp.a ] && break; sleep 5; done
  [ -e /usr/lib/x86_64-linux-gnu/libseccomp.a ] || { echo "k8s-tools: runc needs libseccomp-dev: run scripts/setup.sh" >&2; exit 1; }
  (cd tools/noderuntime && CGO_ENABLED=1 go build -tags "seccomp urfave_cli_no_docs" -ldflags="-s -w -extldflags -static" -o "$cache.tmp/runc" "$RUNC") 2>&1 |
    grep -v 'statically linked applications requires at runtime\|in function' || true
  [ -x "$cache.tmp/runc" ]
  (cd tools/coredns && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$cache.tmp/coredns" "$COREDNS")
  (cd tools/registry && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$cache.tmp/registry" "$REGISTRY")
  gcc -Os -Wall -Werror -static -DVERSION=3.10.2 -o "$cache.tmp/pause" \
    "$(cd tools/k8s && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
  # Earlier versions' binaries are not needed again.
  find "$(dirname "$cache")" -mindepth 1 -maxdepth 1 -type d ! -name "$key" ! -name "$key.tmp" -exec rm -rf {} +
  echo "k8s-tools: built in $((SECONDS - start)) s"
fi

# Kueue (task governance, internal/governance), from tools/kueue, a module of its own (its own
# Kubernetes libraries), with its CRDs and webhook manifests from the same module. Cached apart,
# under its own key, so that a new Kueue does not rebuild the rest (and the rest, not Kueue):
# 6-11 minutes on 2 cores.
KUEUE=sigs.k8s.io/kueue/cmd/kueue
KUEUE_VERSION=v0.19.2 # sigs.k8s.io/kueue in tools/kueue/go.mod
KUEUE_LDF="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
kkey=$( (cat tools/kueue/go.mod tools/kueue/go.sum; echo "$KUEUE_LDF $KUEUE") | sha256sum | cut -c1-16)
kcache=${HALE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hale-k8s}-kueue/$kkey
kueue_cached() { [ -x "$kcache/kueue" ] && [ -s "$kcache/kueue-crds.yaml" ] && [ -s "$kcache/kueue-webhooks.yaml" ]; }
if [ "${1:-}" = --check ]; then
  kueue_cached
  exit
fi
if ! kueue_cached; then
  echo "k8s-tools: building Kueue $KUEUE_VERSION into $kcache (once per machine, 6-11 minutes)"
  start=$SECONDS
  rm -rf "$kcache.tmp" && mkdir -p "$kcache.tmp"
  (cd tools/kueue && go build -ldflags="$KUEUE_LDF" -o "$kcache.tmp/kueue" "$KUEUE")
  dir=$(cd tools/kueue && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components
  for f in "$dir"/crd/bases/*.yaml; do
    echo "---"
    cat "$f"
  done > "$kcache.tmp/kueue-crds.yaml"
  cp "$dir/webhook/manifests.yaml" "$kcache.tmp/kueue-webhooks.yaml"
  rm -rf "$kcache" && mv "$kcache.tmp" "$kcache"
  find "$(dirname "$kcache")" -mindepth 1 -maxdepth 1 -type d ! -name "$kkey" ! -name "$kkey.tmp" -exec rm -rf {} +
  echo "k8s-tools: Kueue built in $((SECONDS - start)) s"
fi

mkdir -p bin/k8s
for b in "${BINS[@]}" kwok-stages.yaml pytorchjobs-crd.yaml cni; do ln -sfn "$cache/$b" "bin/k8s/$b"; done
for b in kueue kueue-crds.yaml kueue-webhooks.yaml; do ln -sfn "$kcache/$b" "bin/k8s/$b"; done
ln -sfn "$cache/kubectl" bin/kubectl
echo "k8s-tools: Kubernetes $KVER in bin/k8s and bin/kubectl (cached in $cache)"
