#!/usr/bin/env bash
# Installs what hale needs on a fresh Debian 12 machine and builds bin/hale.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_go="1.26"
if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  else
    echo "setup: Go $need_go or newer is required (https://go.dev/dl/); install it to /usr/local/go" >&2
    exit 1
  fi
fi
have=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need_go" "$have" | sort -V | head -1)" != "$need_go" ]; then
  echo "setup: Go $have is too old; hale needs Go $need_go or newer" >&2
  exit 1
fi

# Debian packages hale uses at run time or in tests: iproute2 (ip: bridges, veths, network
# namespaces) and util-linux (nsenter, unshare) for the local provider, python3 for the example
# lifecycle scripts, slurm-wlm (slurmctld, slurmd, srun, sbatch, scontrol) and munge for the
# Slurm that runs on every cluster, gcc and libc6-dev for cgo (the agent reads NVIDIA's NVML
# through NVIDIA's go-nvml, which loads the driver's library at run time when there is one),
# python3-torch (PyTorch 1.13, CPU, gloo: examples/train, the demo's training and its tests;
# about 840 MB and a few minutes the first time). The store is pure-Go SQLite.
apt_packages=(ca-certificates iproute2 util-linux python3 slurm-wlm munge gcc libc6-dev python3-torch)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
# Debian starts munged and the Slurm daemons of the host where systemd runs; hale runs its own
# in each node's namespaces and needs none on the host (they would not get in the way: each node
# binds its own /etc/slurm, /etc/munge and /run/munge).

go mod download
# go-nvml's headers mark some NVML calls deprecated; hale does not use them.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
mkdir -p bin
go build -o bin/hale ./cmd/hale
echo "setup: built bin/hale ($(go env GOVERSION))"
