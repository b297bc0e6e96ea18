#!/usr/bin/env bash
# The test command: formatting, vet, every test (real servers, real SDK clients, the real
# binary), and a short fuzzing run of the request decoder.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}" # quiet go-nvml's headers

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "test: run as root (sudo ./scripts/test.sh): the end-to-end tests create network namespaces, veths and bind mounts" >&2
  exit 1
fi
go vet ./...
go vet -tags e2e ./test/e2e
go test -count=1 ./...
# End to end on real namespaces, agents and lifecycle scripts (root).
go test -count=1 -tags e2e ./test/e2e
# The fuzz target also runs its seed corpus in the line above; this explores beyond it briefly.
# Minimizing each new interesting input (60s by default) would eat the whole short run.
go test -run '^$' -fuzz FuzzDecodeInput -fuzztime "${HALE_FUZZTIME:-15s}" -fuzzminimizetime 1s ./api
echo "all tests passed"
