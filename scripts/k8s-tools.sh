#!/usr/bin/env bash
# Builds the Kubernetes control plane hale runs for its Eks clusters (tools/k8s: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, kwok; tools/kubeflow: the Kubeflow
# training operator) from the Go module proxy, once per machine: the binaries are cached under ${HALE_K8S_CACHE:-~/.cache/hale-k8s}/<key>, the key
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
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl ./etcd sigs.k8s.io/kwok/cmd/kwok)
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok training-operator)
# The Kubeflow training operator (PyTorchJob, kubeflow.org/v1) is built from tools/kubeflow, a
# module of its own (it has its own Kubernetes libraries), with its CRD from the same module.
TFOP=github.com/kubeflow/training-operator/cmd/training-operator.v1
# kwok's stages: what its simulated kubelets do (nodes Ready with a lease heartbeat, pods Ready,
# completed and deleted), from the kwok module itself.
STAGES=(node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready
  pod/fast/pod-complete pod/fast/pod-delete)

key=$( (cat tools/k8s/go.mod tools/k8s/go.sum tools/kubeflow/go.mod tools/kubeflow/go.sum; echo "$LDF ${TOOLS[*]} ${STAGES[*]} $TFOP") | sha256sum | cut -c1-16)
cache=${HALE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hale-k8s}/$key

cached() {
  for b in "${BINS[@]}"; do [ -x "$cache/$b" ] || return 1; done
  [ -s "$cache/kwok-stages.yaml" ] && [ -s "$cache/pytorchjobs-crd.yaml" ]
}

if [ "${1:-}" = --check ]; then
  cached
  exit
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
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
  # Earlier versions' binaries are not needed again.
  find "$(dirname "$cache")" -mindepth 1 -maxdepth 1 -type d ! -name "$key" ! -name "$key.tmp" -exec rm -rf {} +
  echo "k8s-tools: built in $((SECONDS - start)) s"
fi
mkdir -p bin/k8s
for b in "${BINS[@]}" kwok-stages.yaml pytorchjobs-crd.yaml; do ln -sfn "$cache/$b" "bin/k8s/$b"; done
ln -sfn "$cache/kubectl" bin/kubectl
echo "k8s-tools: Kubernetes $KVER in bin/k8s and bin/kubectl (cached in $cache)"
