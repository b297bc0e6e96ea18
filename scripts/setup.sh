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

# Debian packages hale uses at run time or in tests, each with why. The store is pure-Go SQLite.
declare -A why=(
  [ca-certificates]="TLS roots for the Go module proxy"
  [iproute2]="ip: the local provider's bridge, veths and network namespaces"
  [util-linux]="nsenter and unshare: the nodes' namespaces"
  [procps]="ps: finding a hung job's stopped ranks (run policies) and the tests' process checks"
  [python3]="the example lifecycle scripts"
  [slurm-wlm]="Slurm (slurmctld, slurmd, srun, sbatch, scontrol) on every cluster"
  [munge]="Slurm's authentication"
  [gcc]="cgo: the agent reads NVIDIA's NVML through go-nvml"
  [libc6-dev]="cgo"
  [python3-torch]="PyTorch (CPU, gloo) for examples/train, the demo's training; about 840 MB"
  [slurmdbd]="Slurm accounting (sacct): slurmdbd on each cluster's controller node"
  [mariadb-server]="slurmdbd's database, run inside each controller node (never the host's)"
  [openssh-server]="sshd for scripts/testhosts.sh, the test bed of SSH hosts (never run on the host by hale)"
  [prometheus]="a real Prometheus the tests start on loopback to scrape hale's /metrics (never run as a service)"
  [chromium]="headless Chromium: the web console's browser tests (chromedp)"
  [fonts-dejavu-core]="a font for Chromium's screenshots of the console"
  [mmdebstrap]="builds node images (hale image build) from Debian's archive"
  [libseccomp-dev]="runc's seccomp (scripts/k8s-tools.sh links it statically into the Eks nodes' runc)"
  [busybox-static]="busybox, static: the tests' small container image for real kubelets' pods (nothing can be pulled)"
  [faketime]="libfaketime: the tests shift one node's clock (its daemons are C; never loaded on the host)"
  [nftables]="nft: own machines' Eks nodes (kube-proxy, the pods' egress table); the tests compare the host's rules before and after"
  [iptables]="iptables: the CNI plugins of own machines' Eks nodes"
  [postgresql]="PostgreSQL: the store of several hale servers (--store postgres://); the tests start their own (never run as a service)"
)
# slurmdbd and mariadb-server: each cluster's controller node runs its own slurmdbd and MariaDB,
# in the node's own directories, as HyperPod's sample lifecycle scripts set them up
# (docs/slurm.md, Accounting).
apt_packages=(ca-certificates iproute2 util-linux procps python3 slurm-wlm munge gcc libc6-dev python3-torch slurmdbd mariadb-server openssh-server prometheus chromium fonts-dejavu-core mmdebstrap faketime libseccomp-dev busybox-static nftables iptables postgresql)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing Debian packages hale needs (the first time only; a few minutes on a fresh machine):"
  for p in "${missing[@]}"; do printf '  %-16s %s\n' "$p" "${why[$p]:-}"; done
  # Debian's packages start their services on install (mariadb-server makes the host a
  # database server) and enable them at boot. The host must not run a database because of hale:
  # a policy-rc.d that answers 101 keeps invoke-rc.d and deb-systemd-invoke from starting any
  # service during the install (one already there, as in containers, stays), and the database
  # services installed now (the database and Slurm's and munge's daemons) are disabled
  # afterwards (and stopped, where systemd runs).
  made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# written by hale scripts/setup.sh while it installs packages: start no service\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -q
  # apt's own progress (downloads, then unpacking and setting up) is the progress shown here.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 "${missing[@]}"
  if [ -n "$made_policy" ]; then
    rm -f /usr/sbin/policy-rc.d
    trap - EXIT
  fi
  units=()
  for p in "${missing[@]}"; do
    case "$p" in
      mariadb-server) units+=(mariadb.service) ;;
      postgresql) units+=(postgresql.service) ;;
      slurmdbd) units+=(slurmdbd.service) ;;
      # hale runs these in each node; on the host they would only fail (no configuration) at boot.
      slurm-wlm) units+=(slurmctld.service slurmd.service) ;;
      munge) units+=(munge.service) ;;
      # The test bed's hosts run their own sshd; installing it must not open the host to SSH.
      openssh-server) units+=(ssh.service ssh.socket) ;;
      # The tests start Prometheus themselves; its package would run it (and, by its
      # Recommends, node-exporter) as services.
      prometheus) units+=(prometheus.service)
        for u in prometheus-node-exporter.service prometheus-node-exporter-apt.timer prometheus-node-exporter-ipmitool-sensor.timer \
          prometheus-node-exporter-mellanox-hca-temp.timer prometheus-node-exporter-nvme.timer prometheus-node-exporter-smartmon.timer; do
          [ -e "/lib/systemd/system/$u" ] && units+=("$u")
        done ;;
    esac
  done
  if [ ${#units[@]} -gt 0 ] && command -v systemctl >/dev/null 2>&1; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now "${units[@]}" || echo "setup: could not disable ${units[*]}" >&2
    else
      systemctl --no-reload disable "${units[@]}" || echo "setup: could not disable ${units[*]}" >&2
    fi
  fi
  echo "setup: Debian packages installed"
fi
# hale runs munged and the Slurm daemons in each node's namespaces and needs none on the host
# (the host's would not get in the way: each node binds its own /etc/slurm, /etc/munge,
# /run/munge and /var/lib/mysql).

go mod download
# go-nvml's headers mark some NVML calls deprecated; hale does not use them.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
mkdir -p bin
go build -o bin/hale ./cmd/hale
echo "setup: built bin/hale ($(go env GOVERSION))"
# hale prints hints that start with `hale ...`; put it on PATH so they run as printed. A link
# of another checkout is replaced (the newest set-up wins); a file that is not a link is not ours.
if [ "$(id -u)" -eq 0 ]; then
  link=/usr/local/bin/hale
  if [ -L "$link" ] || [ ! -e "$link" ]; then
    was=$(readlink "$link" 2>/dev/null || true)
    if [ "$was" != "$PWD/bin/hale" ]; then
      ln -sfn "$PWD/bin/hale" "$link"
      echo "setup: $link -> $PWD/bin/hale${was:+ (it was $was)}"
    fi
  else
    echo "setup: $link exists and is not a link; leaving it (hale is at $PWD/bin/hale)" >&2
  fi
fi
# hale's default image: the root file system the nodes of groups with no ImageId boot from
# (docs/images.md), built once per machine in /var/lib/hale/images/default, which every hale
# server here uses. About 2.5 minutes and 2 GB (root and package cache) the first time; then
# it is only checked (and built again, about 1.5 minutes, when this hale's default packages
# changed). HALE_DEFAULT_IMAGE=DIR builds it elsewhere (hale server --default-image
# DIR), HALE_DEFAULT_IMAGE=host skips it (nodes then run on the host's root, with a warning);
# `sudo hale image build-default --rebuild` builds it again.
default_image=${HALE_DEFAULT_IMAGE:-/var/lib/hale/images/default}
if [ "$default_image" = host ]; then
  echo "setup: HALE_DEFAULT_IMAGE=host: no default image; nodes of default groups run on the host's root"
elif [ "$(id -u)" -ne 0 ]; then
  if [ -f "$default_image/manifest.json" ] && grep -q '"Status": "Available"' "$default_image/manifest.json"; then
    echo "setup: the default image in $default_image is built"
  else
    echo "setup: the default image is not built; run as root (sudo ./scripts/setup.sh, or sudo bin/hale image build-default) to build it" >&2
  fi
else
  t0=$SECONDS
  if ! bin/hale image build-default --dir "$default_image" | grep --line-buffered -v '^\(Get\|Preparing\|Unpacking\|Selecting\|Setting up\|Processing\)' ; then
    echo "setup: the default image did not build (its log: $default_image/build.log)" >&2
    exit 1
  fi
  echo "setup: default image ready in $default_image ($((SECONDS - t0)) s)"
fi
# The PyTorch container image's root (Debian's python3-torch; no Slurm): what the pods of
# examples/eks/pytorchjob-train.yaml run on Eks nodes with real kubelets, pushed by hale servers
# into their registry (docs/kubernetes.md, "Images"). Built once per machine, with the default
# image's package cache: about a minute and 1 GB the first time, then only checked.
# HALE_PYTORCH_IMAGE=none skips it (real-kubelet servers then push no PyTorch image).
pytorch_image=${HALE_PYTORCH_IMAGE:-/var/lib/hale/images/pytorch}
if [ "$pytorch_image" != none ] && [ "$(id -u)" -eq 0 ]; then
  t0=$SECONDS
  if ! bin/hale image build-pytorch --dir "$pytorch_image" | grep --line-buffered -v '^\(Get\|Preparing\|Unpacking\|Selecting\|Setting up\|Processing\)' ; then
    echo "setup: the PyTorch container image did not build (its log: $pytorch_image/build.log)" >&2
    exit 1
  fi
  echo "setup: PyTorch container image's root ready in $pytorch_image ($((SECONDS - t0)) s)"
fi
