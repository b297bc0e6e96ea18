# What scripts/demo.sh and scripts/demo-eks.sh share (sourced, from the repository root, after
# the set-up): the data directory and its teardown, printing steps and commands, starting
# `hale up` and ending with a check that the host is as before.

HALE="$PWD/bin/hale"

# What the host has before the demo, to show it has the same after: nodes make their mount
# points (/fsx, /opt/ml, ...) and devices (/dev/nvidia0) in their own mount namespaces only, and
# write /etc and /var/lib (/var/lib/kubelet) in their own copies of them.
host_paths() { ls -d /fsx /opt/ml /opt/sagemaker_cluster /opt/sagemaker /opt/slurm /opt/dlami /var/lib/hale-agent /var/lib/kubelet /dev/nvidia* 2>/dev/null || true; }
host_before=$(host_paths)
data=$(mktemp -d /tmp/hale-demo.XXXXXX)
up_pid=""
cleanup() {
  rc=$?
  if [ "$rc" -ne 0 ] && [ -f "$data/up.log" ]; then
    echo "demo: failed (exit $rc); the server's last lines:" >&2
    tail -20 "$data/up.log" >&2
  fi
  if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
    kill -INT "$up_pid" 2>/dev/null || true # hale up tears the cluster down on Ctrl-C
    wait "$up_pid" 2>/dev/null || true
  fi
  if [ -n "${on_cleanup:-}" ]; then "$on_cleanup" || true; fi # what the demo set up besides hale
  rm -rf "$data"
}
trap cleanup EXIT

bold="" plain=""
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
# run prints a command quoted so that it can be pasted as printed, then runs it.
run() { printf '$'; printf ' %q' "$@"; printf '\n'; "$@"; }
export HALE_DATA_DIR="$data"

# free_port ADDRESS prints a TCP port free on ADDRESS.
free_port() { python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"; }

# up FILE BRIDGE SUBNET SECONDS [FLAG...] starts `hale up FILE [FLAG...]` in the background, on a
# port, bridge and subnet of its own (so the demo never meets another hale server; BRIDGE "-":
# no local provider, as with --provider static), waits up to SECONDS for the cluster to be
# InService and prints what hale up said until then.
up() {
  local local_flags=()
  [ "$2" = - ] || local_flags=(--local-bridge "$2" --local-subnet "$3")
  "$HALE" up "$1" --data-dir "$data" --listen "127.0.0.1:$(free_port 127.0.0.1)" \
    "${local_flags[@]}" "${@:5}" >"$data/up.log" 2>&1 &
  up_pid=$!
  for _ in $(seq $(($4 * 10))); do
    grep -qs "is InService with" "$data/up.log" && break
    if ! kill -0 "$up_pid" 2>/dev/null; then cat "$data/up.log"; exit 1; fi
    sleep 0.1
  done
  grep -q "is InService with" "$data/up.log" || { cat "$data/up.log"; echo "demo: the cluster did not come up" >&2; exit 1; }
  sed -n '1,/^Ctrl-C here/p' "$data/up.log"
}

# down NAME deletes the cluster (hale up exits) and checks that no namespace is left and the
# host's paths are as they were.
down() {
  step "hale down"
  run "$HALE" down --cluster-name "$1"
  wait "$up_pid" || true
  up_pid=""
  tail -3 "$data/up.log"
  # This demo's nodes' namespaces (hale-<instance id>, every instance hale up reported, the
  # replaced ones too); another hale run on the machine has its own.
  local left ids
  ids=$(grep -o 'i-[0-9a-f]\{17\}' "$data/up.log" | sort -u | sed 's/^/hale-/')
  left=$(ip netns list | awk '{print $1}' | grep -cxF -f <(echo "$ids") || true)
  echo "namespaces left: $left (of the $(echo "$ids" | wc -l) instances this demo had)"
  [ "$left" -eq 0 ] || exit 1
  if [ "$(host_paths)" = "$host_before" ]; then
    echo "host paths nodes use (/fsx, /opt/ml, /opt/sagemaker_cluster, /var/lib/kubelet, /dev/nvidia0, ...): as before the demo"
  else
    echo "demo: the host changed: before: [$host_before] after: [$(host_paths)]" >&2; exit 1
  fi
  step "Demo finished"
}
