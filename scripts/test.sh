#!/usr/bin/env bash
# The test command: formatting, vet, every test (real servers, real SDK clients, the real
# binary), end-to-end tests on real namespaces, and a short fuzzing run of the request decoder.
# Every stage runs even when an earlier one fails, so one run shows everything that is wrong;
# the summary at the end lists each stage and the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# It takes no arguments: a --help must not start a run of 11-40 minutes.
if [ $# -gt 0 ]; then
  echo "usage: sudo ./scripts/test.sh   (no arguments; HALE_E2E_PARALLEL, HALE_TEST_LOGS, HALE_FUZZTIME and" >&2
  echo "HALE_ROBUSTNESS_DURATION in the environment change it: docs/testing.md)" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "test: run as root (sudo ./scripts/test.sh): the end-to-end tests create network namespaces, veths and bind mounts" >&2
  exit 1
fi
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
# The Kubernetes tools (docs/kubernetes.md) build from the upstream Go modules once per machine:
# 20-23 minutes of both CPUs on a fresh one, then cached. The build starts first and runs beside
# the set-up, whose package downloads and image build wait mostly on the network and the disk;
# its output is shown in its stage. Cached, it only links the binaries into bin/k8s.
k8s_log=$(mktemp -t hale-k8s-tools.XXXXXX)
./scripts/k8s-tools.sh >"$k8s_log" 2>&1 &
k8s_pid=$!
trap 'kill "$k8s_pid" 2>/dev/null; rm -f "$k8s_log"' EXIT
t0=$SECONDS
./scripts/setup.sh || { echo "test: set-up failed; nothing was tested" >&2; exit 1; }
setup_s=$((SECONDS - t0))
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}" # quiet go-nvml's headers

bold="" plain=""
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; fi
# Each test stage's go test events (JSON) are kept here for a look after the run.
logs=${HALE_TEST_LOGS:-$(mktemp -d -t hale-test.XXXXXX)}
mkdir -p "$logs"
passed=() failed=() times=()
# stage NAME COMMAND...: runs one stage, records its result and its time.
stage() {
  local name=$1; shift
  printf '\n%s== %s%s\n' "$bold" "$name" "$plain"
  local t0=$SECONDS
  if "$@"; then
    passed+=("$name ($((SECONDS - t0)) s)")
  else
    failed+=("$name ($((SECONDS - t0)) s)")
    printf '%s== %s FAILED%s\n' "$bold" "$name" "$plain"
  fi
  times+=("$(printf '%6d s  %s' $((SECONDS - t0)) "$name")")
}

# beside FUNCTION...: runs stages (functions, titled in stage_title) in the background, one
# after another, beside the stages that follow (the end-to-end tests spend most of their time
# waiting); collect shows each one's output, result and time once they are done.
beside_names=()
beside() {
  beside_names=("$@")
  (
    for i in "${!beside_names[@]}"; do
      t0=$SECONDS
      rc=0
      "${beside_names[$i]}" >"$logs/beside-$i.out" 2>&1 || rc=$?
      echo "$rc $((SECONDS - t0))" >"$logs/beside-$i.rc"
    done
  ) &
  beside_pid=$!
}
collect() {
  wait "$beside_pid"
  local i rc secs name
  for i in "${!beside_names[@]}"; do
    name=${stage_title[${beside_names[$i]}]}
    printf '\n%s== %s (beside the stages above)%s\n' "$bold" "$name" "$plain"
    cat "$logs/beside-$i.out"
    read -r rc secs <"$logs/beside-$i.rc" || { rc=1 secs=0; }
    if [ "$rc" -eq 0 ]; then passed+=("$name ($secs s)"); else failed+=("$name ($secs s)"); printf '%s== %s FAILED%s\n' "$bold" "$name" "$plain"; fi
    times+=("$(printf '%6d s  %s (beside)' "$secs" "$name")")
  done
}
declare -A stage_title

gofmt_check() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  [ -z "$unformatted" ] && return 0
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; return 1
}

# gotest NAME FORMAT GO-TEST-ARGS...: go test through gotestsum (tools/gotestsum), which shows
# the results in FORMAT (pkgname-and-test-fails: a line a package and what failed; testname: a
# line a test, with its time), writes go test's events to $logs/NAME.json and then lists the
# 10 slowest tests of the stage. The end-to-end tests log their own time at their end ("e2e
# turn:", test/e2e/schedule_test.go), without the wait for a turn that go test's time counts.
gotest() {
  local name=$1 format=$2; shift 2
  local rc=0
  bin/gotestsum --format "$format" --jsonfile "$logs/$name.json" -- "$@" || rc=$?
  if grep -q '"Output":"    [a-z_]*_test.go:[0-9]*: e2e turn: ' "$logs/$name.json"; then
    echo "-- the 10 slowest tests by their own time, with the suites of TestSlurmVersions, which take turns of their own ($logs/$name.json has every event):"
    python3 - "$logs/$name.json" <<'PY'
import json, re, sys
own = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    m = re.search(r"e2e turn: ([0-9.]+)s, after ([0-9.]+)s", e.get("Output") or "")
    if m and e.get("Test"):
        own[(e["Package"], e["Test"])] = (float(m.group(1)), float(m.group(2)))
for (pkg, test), (took, waited) in sorted(own.items(), key=lambda kv: -kv[1][0])[:10]:
    print(f"{pkg} {test} {took:.2f}s (after {waited:.0f}s waiting for a turn)")
PY
  else
    echo "-- the 10 slowest tests, subtests left out ($logs/$name.json has every event):"
    bin/gotestsum tool slowest --jsonfile "$logs/$name.json" --threshold 1ms | awk '$2 !~ /\//' | head -10
  fi
  return $rc
}

k8s_tools() {
  local rc=0
  wait "$k8s_pid" || rc=$?
  cat "$k8s_log"
  return $rc
}
stage "Kubernetes tools (built once per machine, beside the set-up)" k8s_tools
(cd tools/gotestsum && go build -o ../../bin/gotestsum gotest.tools/gotestsum) || { echo "test: could not build gotestsum" >&2; exit 1; }
stage "gofmt" gofmt_check
# One vet over every file: the union of the tags sees the end-to-end, Kubernetes and
# robustness files with the rest.
stage "go vet" go vet -tags "e2e kube robustness" ./...
# The unit and integration tiers, with the real Kubernetes control plane's tests (kube:
# kube-apiserver, etcd, the controller manager and the scheduler; hale server's registration),
# then the fuzz target: its seed corpus runs in go test; this explores beyond it briefly
# (minimizing each new interesting input, 60s by default, would eat the whole short run). Both
# run beside the end-to-end tests.
# Test binaries are linked without DWARF (-ldflags=-w): stack traces need only the symbol
# table, and each of the ~50 links takes about 40 % less CPU (internal/server's: 13.7 -> 8.5 CPU
# seconds). -ldflags changes only the link, so the compiled packages stay in the build cache.
nodwarf=-ldflags=-w
unit_tests() { gotest unit pkgname-and-test-fails -count=1 "$nodwarf" -tags kube ./...; }
stage_title[unit_tests]="go test ./..."
fuzz() { go test "$nodwarf" -run '^$' -fuzz FuzzDecodeInput -fuzztime "${HALE_FUZZTIME:-15s}" -fuzzminimizetime 1s ./api; }
stage_title[fuzz]="fuzz FuzzDecodeInput"
beside unit_tests fuzz
# End to end on real namespaces, agents, Slurm, lifecycle scripts and Kubernetes (root), side by
# side: each test has its own server, data directory, bridge and /24 (docs/testing.md), and
# most of a test's time is spent waiting on daemons, so HALE_E2E_PARALLEL of them run at once.
# The robustness suite (TestRobustness: a random schedule of faults for HALE_ROBUSTNESS_DURATION,
# 2m by default; the seed it prints replays a failure with scripts/robustness.sh, see
# docs/reliability.md) runs among them, on a machine as busy as a real control plane's can be.
# The tests' own gate (test/e2e/schedule_test.go) starts the longest of the last run first,
# HALE_E2E_PARALLEL at a time; go test's -parallel is above the number of tests so it never
# picks in that gate's place.
export HALE_E2E_PARALLEL=${HALE_E2E_PARALLEL:-4}
stage "end-to-end tests, robustness" gotest e2e testname -count=1 "$nodwarf" -timeout 40m -parallel 100 -tags "e2e kube robustness" ./test/e2e
collect

echo
echo "${bold}== summary${plain} ($SECONDS s in all, of which the set-up $setup_s s; the tests' events are in $logs)"
for t in "${times[@]}"; do echo "$t"; done
for s in "${passed[@]}"; do echo "  passed  $s"; done
for s in "${failed[@]}"; do echo "  FAILED  $s"; done
echo "${#passed[@]} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]
