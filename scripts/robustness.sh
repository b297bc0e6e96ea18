#!/usr/bin/env bash
# The robustness suite (test/e2e/robustness_test.go): the real hale server and agents on real
# Slurm through a random schedule of faults (server kills and outages, the server dying at
# failpoints of a create, a scale, a software update and a repair, agent stalls and kills, cut
# links, slurmctld killed), checking after each that no healthy node was harmed and a broken
# one was repaired once. Root. The seed is printed; pass it back to replay a failure:
#   sudo HALE_ROBUSTNESS_SEED=123 ./scripts/robustness.sh
#   sudo HALE_ROBUSTNESS_DURATION=20m HALE_ROBUSTNESS_MAX_OUTAGE=60s ./scripts/robustness.sh
#   sudo HALE_ROBUSTNESS_FAULTS=scale,Software ./scripts/robustness.sh   (only the faults so named)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  echo "usage: sudo [HALE_ROBUSTNESS_SEED=N] [HALE_ROBUSTNESS_DURATION=2m] [HALE_ROBUSTNESS_MAX_OUTAGE=D] [HALE_ROBUSTNESS_FAULTS=a,b] ./scripts/robustness.sh   (no arguments: docs/reliability.md)" >&2
  exit 2
fi
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
duration=${HALE_ROBUSTNESS_DURATION:-2m}
export HALE_ROBUSTNESS_DURATION=$duration
# go test's own limit: the schedule, plus the cluster's creation and deletion. The duration is
# Go's: whole numbers of h, m and s (2m, 1m30s, 1h).
rest=$duration secs=0
while [[ $rest =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
  n=${BASH_REMATCH[1]} rest=${BASH_REMATCH[3]}
  case ${BASH_REMATCH[2]} in
    h) secs=$(( secs + 10#$n * 3600 )) ;;
    m) secs=$(( secs + 10#$n * 60 )) ;;
    s) secs=$(( secs + 10#$n )) ;;
  esac
done
if [[ -n $rest || $secs -eq 0 ]]; then
  echo "robustness: HALE_ROBUSTNESS_DURATION=$duration: give whole numbers of h, m and s, such as 2m, 1m30s or 1h" >&2
  exit 2
fi
limit=$(( secs + 600 ))
exec go test -count=1 -tags 'e2e robustness' -run '^TestRobustness$' -timeout "${limit}s" -v ./test/e2e
