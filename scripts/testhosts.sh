#!/usr/bin/env bash
# A test bed of SSH hosts on this machine, for hale's static provider (docs/own-machines.md).
#
#   scripts/testhosts.sh up N [--instance-type T] [--out FILE] [--containers] [--shared DIR]
#                                                                 create N hosts, write a hosts file
#   scripts/testhosts.sh down                                     remove every test host
#   scripts/testhosts.sh list                                     one line per host
#   scripts/testhosts.sh poweroff I | poweron I                    host I loses power, gets it back
#
# Each host is what a small Linux server looks like to hale, reached only over SSH:
#   - a network namespace halehost-<i> on its own bridge (haleth0, 10.223.0.0/24; this machine is
#     10.223.0.1), address 10.223.0.<10+i>, no route out;
#   - its own UTS, PID and mount namespaces: hostname testhost-<i>, a PID 1 of its own (the
#     host's "init", below), and overlays over /etc, /opt, /usr, /var, /root and /home whose
#     upper layers are the host's own (/root's lower layer is Debian's /etc/skel, not this
#     machine's /root), so what is installed on one host is on no other and not
#     on this machine; fresh /run and /tmp; a /dev/kmsg of its own (a file: the host's kernel
#     log, which `hale debug inject-fault` appends to) and a kernel boot id of its own;
#   - Debian's OpenSSH sshd with its own ed25519 host key, root login by key only. The test bed's
#     client key is STATE/id_ed25519; each host's public key is in STATE/known_hosts.
# With --containers a host can also run a container runtime and a kubelet (an Eks node), as a
# machine of its own would, without changing this machine (what hale's local provider gives its
# Eks nodes, docs/own-machines.md): cgroups of its own (a cgroup in each of this machine's cgroup
# v1 hierarchies, a cgroup namespace rooted there and fresh cgroup file systems), read-only
# values over the /proc/sys entries a kubelet sets at start (kernel.panic_on_oops and the rest
# are this machine's), a shared root mount, and /var/lib/containerd off the overlay (overlayfs
# cannot be containerd's snapshotter on overlayfs). `down` removes the cgroups.
# With --shared DIR, DIR (a directory of this machine) is every host's /mnt: a file system the
# hosts share, as the NFS or Lustre mount a lifecycle script makes on real machines.
# `reboot` on a host is a real restart of that host: its init kills every process on it, gives
# it a new boot id, empties /run, /tmp and its kernel log, and starts sshd again (the host's own
# files stay, as on a disk). Nothing starts hale's agent again: hale's supervision does.
# A number of seconds in a host's /etc/hale-testhost-post-seconds makes its reboots take that much
# longer, down the whole time, as a real server's firmware does before the OS starts.
#
# Needs root, iproute2, util-linux and openssh-server (scripts/setup.sh installs it and keeps
# the machine's own sshd off). STATE is $HALE_TESTHOSTS_DIR, default /srv/hale-testhosts (not
# under a directory the hosts overlay); a second test bed beside the first (the e2e tests') sets
# HALE_TESTHOSTS_BRIDGE, HALE_TESTHOSTS_NET (the /24's first three octets) and
# HALE_TESTHOSTS_NETNS (the namespaces' prefix) too.
set -euo pipefail

STATE=${HALE_TESTHOSTS_DIR:-/srv/hale-testhosts}
BRIDGE=${HALE_TESTHOSTS_BRIDGE:-haleth0}
NET=${HALE_TESTHOSTS_NET:-10.223.0}
NS=${HALE_TESTHOSTS_NETNS:-halehost}
OVERLAYS=(etc opt usr var root home)

die() { echo "testhosts: $*" >&2; exit 1; }
# The hosts outlive this script: they must not hold what it was given (a flock's lock file, a
# pipe to a caller that waits for its end), so every descriptor above 2 is closed here.
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
done
[ "$(id -u)" -eq 0 ] || die "needs root (network and mount namespaces)"
[ -x /usr/sbin/sshd ] || die "sshd not found: install openssh-server (scripts/setup.sh does, without starting it)"

# init is each host's PID 1. It runs inside the host's namespaces; $1 is the host's directory.
init_script() {
  cat <<'EOF'
#!/bin/bash
# PID 1 of a test host (scripts/testhosts.sh).
dir=$1
set -u
for d in etc opt usr var root home; do
  lower=/$d
  # root's home is a fresh server's (Debian's /etc/skel), not this machine's: a person's shell
  # set-up there (a pyenv that rehashes under a lock) would run at every SSH command.
  [ "$d" = root ] && lower=$(dirname "$dir")/root-home
  mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/upper/$d,workdir=$dir/work/$d" "/$d"
done
if [ -f "$dir/shared" ]; then
  mount --bind "$(cat "$dir/shared")" /mnt
fi
if [ -f "$dir/cgroups" ]; then
  # A host for containers (up --containers): its own cgroup file systems, rooted at its cgroups
  # by the cgroup namespace it started in; the kubelet's kernel settings read as set; volumes'
  # mounts propagate inside the host; containerd's directory off the overlay.
  mount --make-rshared /
  mount -t tmpfs -o mode=755,nosuid,nodev,noexec cgroup_root /sys/fs/cgroup
  while IFS=$'\t' read -r _ name opts; do
    mkdir -p "/sys/fs/cgroup/$name"
    mount -t cgroup -o "$opts" cgroup "/sys/fs/cgroup/$name"
  done < "$dir/cgroups"
  for f in "$dir"/sysctl/*; do
    target=/proc/sys/$(basename "$f" | tr . /)
    mount --bind "$f" "$target" && mount -o remount,bind,ro "$target"
  done
  mkdir -p /var/lib/containerd
  mount --bind "$dir/containerd" /var/lib/containerd
fi
: > "$dir/kmsg"
: > "$dir/boot_id"
mount --bind "$dir/boot_id" /proc/sys/kernel/random/boot_id
mount --bind "$dir/kmsg" /dev/kmsg
# Nothing of the test bed's directory is visible on the host but its own files above.
mount -t tmpfs -o size=1m tmpfs "$(dirname "$dir")"
# A boot: fresh /run and /tmp, an empty kernel log, a new boot id.
fresh() {
  mountpoint -q /run && umount -l /run
  mountpoint -q /tmp && umount -l /tmp
  mount -t tmpfs -o mode=755 tmpfs /run
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mkdir -p /run/sshd /run/lock
  # What systemd-tmpfiles-setup does at a Debian boot (/run/munge, /run/slurm...).
  systemd-tmpfiles --create --boot >/dev/null 2>&1 || true
  rm -f /run/nologin  # as systemd-user-sessions does once the boot is done
  : > /dev/kmsg
  cat /proc/sys/kernel/random/uuid > /proc/sys/kernel/random/boot_id
}
fresh
# USR1: reboot. USR2: power off (everything ends; the host stays down until USR1 powers it on).
reboot=0 off=0
trap 'reboot=1' USR1
trap 'reboot=1 off=1' USR2
trap 'kill -KILL -1; exit 0' TERM
# idle waits for a signal: one sleep that a trapped signal interrupts (bash runs the trap as
# soon as wait returns), not a new sleep every second for each host of every test bed.
idle() { while [ "$reboot" = 0 ]; do sleep 1000000 & wait $! 2>/dev/null; kill $! 2>/dev/null; done; }
while :; do
  /usr/sbin/sshd -D -f /etc/ssh/sshd_config -E /var/log/sshd.log &
  reboot=0
  idle
  kill -KILL -1 2>/dev/null
  wait 2>/dev/null
  # A real server's firmware takes minutes before the OS starts (8-GPU servers: 5-15 min);
  # /etc/hale-testhost-post-seconds, when a test writes it, is this host's.
  post=$(cat /etc/hale-testhost-post-seconds 2>/dev/null || echo 0)
  [[ "$post" =~ ^[0-9]+$ ]] && sleep "$post"
  if [ "$off" = 1 ]; then
    reboot=0 off=0
    idle
    off=0
  fi
  fresh
done
EOF
}

host_dir() { echo "$STATE/host-$1"; }

up() {
  local n=$1; shift
  local itype=ml.c5.xlarge out="" containers="" shared=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --instance-type) itype=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      --containers) containers=1; shift ;;
      --shared) shared=$(realpath "$2"); [ -d "$shared" ] || die "--shared $2: not a directory"; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "N must be 1-200"
  mkdir -p "$STATE"
  chmod 700 "$STATE"
  [ -f "$STATE/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C hale-testhosts -f "$STATE/id_ed25519"
  init_script > "$STATE/init.sh"
  if [ ! -d "$STATE/root-home" ]; then
    mkdir -m 700 "$STATE/root-home"
    cp -a /etc/skel/. "$STATE/root-home/"
  fi
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add name "$BRIDGE" type bridge
    ip addr add "$NET.1/24" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up
  # Continue numbering after the hosts that exist (a second `up` adds hosts).
  local first=1
  while [ -d "$(host_dir "$first")" ]; do first=$((first + 1)); done
  local i
  for ((i = first; i < first + n; i++)); do
    make_host "$i" "$containers" "$shared"
  done
  local hosts=()
  for d in "$STATE"/host-*; do
    [ -f "$d/address" ] && hosts+=("$(cat "$d/address")")
  done
  : > "$STATE/known_hosts"
  for d in "$STATE"/host-*; do
    [ -f "$d/address" ] || continue
    echo "$(cat "$d/address") $(cut -d' ' -f1,2 "$d/upper/etc/ssh/ssh_host_ed25519_key.pub")" >> "$STATE/known_hosts"
  done
  out=${out:-$STATE/hosts.json}
  {
    echo '{"Hosts": ['
    local sep=""
    for a in "${hosts[@]}"; do
      printf '%s  {"Address": "%s", "User": "root", "KeyFile": "%s", "InstanceType": "%s"}' "$sep" "$a" "$STATE/id_ed25519" "$itype"
      sep=$',\n'
    done
    printf '\n]}\n'
  } > "$out"
  # Wait for every sshd to answer.
  for a in "${hosts[@]}"; do
    local ok=""
    for _ in $(seq 1 100); do
      if (exec 3<>"/dev/tcp/$a/22") 2>/dev/null; then ok=1; break; fi
      sleep 0.1
    done
    [ -n "$ok" ] || die "sshd of $a does not answer"
  done
  echo "testhosts: ${#hosts[@]} hosts up (${hosts[0]} to ${hosts[${#hosts[@]}-1]}); hosts file $out; known_hosts $STATE/known_hosts; key $STATE/id_ed25519"
}

# host_cgroups prints this process's cgroup v1 hierarchies, one per line: mount point, the
# options that mount the hierarchy again (its controllers, or none,name=X), and this process's
# cgroup in it. The unified hierarchy of a hybrid machine holds no controller a kubelet uses.
host_cgroups() {
  awk '{
    for (i = 1; i <= NF; i++) if ($i == "-") { s = i; break }
    if ($(s + 1) != "cgroup") next
    n = split($(s + 3), o, ","); c = ""
    for (j = 1; j <= n; j++) {
      if (o[j] ~ /^(rw|ro|xattr|noprefix|clone_children|cpuset_v2_mode|favordynmods)$/ || o[j] ~ /^release_agent=/) continue
      c = c (c == "" ? "" : ",") o[j]
    }
    print $5, c
  }' /proc/self/mountinfo | sort -u -k2,2 | while read -r mp ctls; do
    local path
    path=$(awk -F: -v k="$ctls" '$2 == k { print $3 }' /proc/self/cgroup)
    [ -n "$path" ] || continue
    local opts=$ctls
    case "$ctls" in name=*) opts="none,$ctls" ;; esac
    printf '%s\t%s\t%s\n' "$mp" "$opts" "$path"
  done
}

# host_containers readies host I's directory for --containers: its cgroups (recorded in
# $dir/cgroups: cgroup directory, hierarchy name, mount options), the kubelet's kernel
# settings' values and containerd's directory.
host_containers() {
  local i=$1 dir=$2 mp opts path cg
  : > "$dir/cgroups"
  while IFS=$'\t' read -r mp opts path; do
    cg="$mp${path%/}/$NS-$i"
    mkdir -p "$cg"
    if [ "$opts" = cpuset ]; then
      # A new cpuset cgroup has no CPUs or memory nodes, and refuses every process.
      cat "$(dirname "$cg")/cpuset.cpus" > "$cg/cpuset.cpus"
      cat "$(dirname "$cg")/cpuset.mems" > "$cg/cpuset.mems"
    fi
    printf '%s\t%s\t%s\n' "$cg" "$(basename "$mp")" "$opts" >> "$dir/cgroups"
  done < <(host_cgroups)
  [ -s "$dir/cgroups" ] || die "--containers needs this machine's cgroup v1 hierarchies (none is mounted)"
  # The settings the kubelet writes at start (setupKernelTunables), with the values it wants.
  mkdir -p "$dir/sysctl" "$dir/containerd"
  local kv
  for kv in vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1 \
    kernel.keys.root_maxkeys=1000000 kernel.keys.root_maxbytes=25000000; do
    echo "${kv#*=}" > "$dir/sysctl/${kv%%=*}"
    chmod 444 "$dir/sysctl/${kv%%=*}"
  done
}

# remove_cgroups removes host I's cgroups, deepest first, killing what is left in them (a
# container's processes die a moment after their host's PID namespace).
remove_cgroups() {
  local dir=$1 cg try
  [ -f "$dir/cgroups" ] || return 0
  for try in $(seq 50); do
    local left=""
    while IFS=$'\t' read -r cg _ _; do
      [ -d "$cg" ] || continue
      while read -r d; do
        xargs -r kill -KILL < "$d/cgroup.procs" 2>/dev/null || true
        rmdir "$d" 2>/dev/null || left=1
      done < <(find "$cg" -depth -type d)
    done < "$dir/cgroups"
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "testhosts: cgroups of $dir left: processes still in them" >&2
}

make_host() {
  local i=$1 containers=${2:-} shared=${3:-} dir addr ns veth
  dir=$(host_dir "$i")
  addr="$NET.$((10 + i))"
  ns="$NS-$i"
  veth="${BRIDGE}v$i"
  mkdir -p "$dir"
  for d in "${OVERLAYS[@]}"; do mkdir -p "$dir/upper/$d" "$dir/work/$d"; done
  # The host's own files, written into its upper layers before it starts.
  mkdir -p "$dir/upper/etc/ssh" "$dir/upper/root/.ssh" "$dir/upper/usr/sbin"
  ssh-keygen -q -t ed25519 -N '' -C "testhost-$i" -f "$dir/upper/etc/ssh/ssh_host_ed25519_key"
  cat > "$dir/upper/etc/ssh/sshd_config" <<EOF
# sshd of test host $i (scripts/testhosts.sh)
ListenAddress $addr
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile /run/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
  install -m 600 "$STATE/id_ed25519.pub" "$dir/upper/root/.ssh/authorized_keys"
  chmod 700 "$dir/upper/root/.ssh"
  echo "testhost-$i" > "$dir/upper/etc/hostname"
  # The test bed's reboot: ask PID 1 to restart the host (no systemd runs here).
  printf '#!/bin/sh\n# test host reboot (scripts/testhosts.sh)\nkill -USR1 1\n' > "$dir/upper/usr/sbin/reboot"
  chmod 755 "$dir/upper/usr/sbin/reboot"
  echo "$addr" > "$dir/address"
  [ -z "$shared" ] || echo "$shared" > "$dir/shared"

  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$BRIDGE" up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # PID 1 of the host: in its network namespace, with new UTS, PID and mount namespaces whose
  # mounts do not propagate back here.
  local join=() cgns=()
  if [ -n "$containers" ]; then
    host_containers "$i" "$dir"
    # PID 1 starts in the host's cgroups (each hierarchy's cgroup.procs, then --), and its
    # cgroup namespace is rooted there.
    join=(sh -c 'while [ "$1" != -- ]; do echo $$ > "$1"; shift; done; shift; exec "$@"' sh)
    while IFS=$'\t' read -r cg _ _; do join+=("$cg/cgroup.procs"); done < "$dir/cgroups"
    join+=(--)
    cgns=(--cgroup)
  fi
  setsid "${join[@]}" nsenter --net="/run/netns/$ns" -- unshare --uts --mount --pid "${cgns[@]}" --fork --mount-proc --propagation private -- \
    bash -c "hostname testhost-$i; exec bash '$STATE/init.sh' '$dir'" </dev/null >"$dir/init.log" 2>&1 &
  echo $! > "$dir/pid"
}

down() {
  [ -d "$STATE" ] || { ip link del "$BRIDGE" 2>/dev/null || true; return 0; }
  local d i
  for d in "$STATE"/host-*; do
    [ -d "$d" ] || continue
    i=${d##*/host-}
    if [ -f "$d/pid" ]; then
      # The setsid'd nsenter/unshare chain: unshare --fork waits for the host's PID 1, so
      # killing unshare's child (PID 1 inside) ends the host's whole PID namespace.
      local pid
      pid=$(cat "$d/pid")
      for c in $(pgrep -P "$pid" 2>/dev/null) ; do
        for cc in $(pgrep -P "$c" 2>/dev/null); do kill -KILL "$cc" 2>/dev/null || true; done
        kill -KILL "$c" 2>/dev/null || true
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    ip netns del "$NS-$i" 2>/dev/null || true
    ip link del "${BRIDGE}v$i" 2>/dev/null || true
    remove_cgroups "$d"
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  # Mounts lived in the hosts' own mount namespaces and went with them.
  rm -rf "$STATE"
  echo "testhosts: down"
}

# signal_host I SIG: the host's PID 1 is the child of the unshare recorded in its pid file.
signal_host() {
  local d
  d=$(host_dir "$1")
  [ -f "$d/pid" ] || die "no host $1"
  local init
  init=$(pgrep -P "$(cat "$d/pid")" | head -1)
  [ -n "$init" ] || die "host $1 is not running"
  kill "-$2" "$init"
}

list() {
  [ -d "$STATE" ] || return 0
  for d in "$STATE"/host-*; do
    [ -f "$d/address" ] && echo "${d##*/} $(cat "$d/address")"
  done
}

case "${1:-}" in
  up) shift; up "${1:-}" "${@:2}" ;;
  down) down ;;
  list) list ;;
  # A host that loses power and stays down (as a machine whose reboot never comes back), and
  # its power coming back. I is the host's number (host-I, address .10+I).
  poweroff) signal_host "${2:?host number}" USR2 ;;
  poweron) signal_host "${2:?host number}" USR1 ;;
  *) die "usage: $0 up N [--instance-type T] [--out FILE] [--containers] [--shared DIR] | down | list | poweroff I | poweron I" ;;
esac
