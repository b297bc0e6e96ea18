#!/usr/bin/env bash
# The test command: formatting, vet, every test (real servers, real SDK clients, the real
# binary), and a short fuzzing run of the request decoder.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
go vet ./...
go test -count=1 ./...
# The fuzz target also runs its seed corpus in the line above; this explores beyond it briefly.
# Minimizing each new interesting input (60s by default) would eat the whole short run.
go test -run '^$' -fuzz FuzzDecodeInput -fuzztime "${HALE_FUZZTIME:-15s}" -fuzzminimizetime 1s ./api
echo "all tests passed"
