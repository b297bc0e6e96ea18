#!/usr/bin/env bash
# The test command: formatting, vet, every test (real servers, real SDK clients, the real
# binary), end-to-end tests on real namespaces, and a short fuzzing run of the request decoder.
# Every stage runs even when an earlier one fails, so one run shows everything that is wrong;
# the summary at the end lists each stage and the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "test: run as root (sudo ./scripts/test.sh): the end-to-end tests create network namespaces, veths and bind mounts" >&2
  exit 1
fi
./scripts/setup.sh || { echo "test: set-up failed; nothing was tested" >&2; exit 1; }
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}" # quiet go-nvml's headers

bold="" plain=""
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; fi
passed=() failed=()
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
}

gofmt_check() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  [ -z "$unformatted" ] && return 0
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; return 1
}

# Kubernetes for Eks clusters (docs/kubernetes.md): built from the upstream Go modules once per
# machine (10-20 minutes the first time, then cached), before hale's own builds want both cores.
stage "Kubernetes tools (built once per machine)" ./scripts/k8s-tools.sh
stage "gofmt" gofmt_check
stage "go vet" go vet ./...
stage "go vet (e2e)" go vet -tags e2e ./test/e2e
stage "go vet (kube)" go vet -tags "e2e kube" ./internal/kubeplane ./internal/server ./internal/orchestrator/eks ./test/e2e
stage "go test ./..." go test -count=1 ./...
# End to end on real namespaces, agents, Slurm and lifecycle scripts (root). The suite took
# 587 s of go test's default 10-minute limit before the image build test (about 45 s) joined it.
stage "end-to-end tests" go test -count=1 -timeout 30m -tags e2e ./test/e2e
# The real Kubernetes control plane (kube-apiserver, etcd, controller manager, scheduler, kwok),
# its registration, and an Eks cluster on the local provider.
stage "Kubernetes tests" go test -count=1 -tags "e2e kube" -run 'ControlPlane|WithoutBinaries|KubernetesControlPlanes|TestEks|TestUpEks' \
  ./internal/kubeplane ./internal/server ./test/e2e
# The robustness suite: a random schedule of faults for a bounded time (HALE_ROBUSTNESS_DURATION,
# 2m by default; the seed it prints replays a failure, see docs/reliability.md).
stage "robustness" ./scripts/robustness.sh
# The fuzz target also runs its seed corpus in go test; this explores beyond it briefly.
# Minimizing each new interesting input (60s by default) would eat the whole short run.
stage "fuzz FuzzDecodeInput" go test -run '^$' -fuzz FuzzDecodeInput -fuzztime "${HALE_FUZZTIME:-15s}" -fuzzminimizetime 1s ./api

echo
echo "${bold}== summary${plain}"
for s in "${passed[@]}"; do echo "  passed  $s"; done
for s in "${failed[@]}"; do echo "  FAILED  $s"; done
echo "${#passed[@]} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]
