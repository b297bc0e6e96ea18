#!/usr/bin/env bash
# hale's demo, as far as hale goes today: start a server with an embedded store, then drive the
# SageMaker cluster API with the hale CLI, the AWS SDK for Go and (if installed) the AWS CLI.
# Everything runs on loopback in a temporary directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh >/dev/null
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
HALE="$PWD/bin/hale"

data=$(mktemp -d /tmp/hale-demo.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$data"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "Start hale server (data in $data)"
"$HALE" server --data-dir "$data" --listen 127.0.0.1:0 >"$data/server.log" 2>&1 &
server_pid=$!
export HALE_DATA_DIR="$data"
for _ in $(seq 100); do
  [ -f "$data/config" ] && "$HALE" list-clusters >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$data/server.log"; exit 1; }
  sleep 0.1
done
sed -n 's/^time=[^ ]* //p' "$data/server.log"
endpoint=$(sed -n 's/^endpoint_url *= *//p' "$data/config")
echo "endpoint: $endpoint; AWS profile [hale] in $data/credentials and $data/config"

step "Create a cluster with the hale CLI from a CreateCluster JSON file"
run "$HALE" create-cluster --cli-input-json file://examples/cluster.json
arn=$("$HALE" describe-cluster --cluster-name demo | sed -n 's/.*"ClusterArn": "\(.*\)".*/\1/p' | head -1)

step "Create another from the same file with the AWS SDK for Go (examples/sdk-create-cluster)"
AWS_SHARED_CREDENTIALS_FILE="$data/credentials" AWS_CONFIG_FILE="$data/config" \
  run go run ./examples/sdk-create-cluster -file examples/cluster.json -name demo-sdk

step "List and describe"
run "$HALE" list-clusters --output table
run "$HALE" describe-cluster --cluster-name demo
run "$HALE" list-cluster-events --cluster-name demo --output table

step "Tag the cluster"
run "$HALE" add-tags --resource-arn "$arn" --tags Key=owner,Value=demo Key=cost-center,Value=42
run "$HALE" list-tags --resource-arn "$arn"

step "A broken CreateCluster file gets a ValidationException that names each member"
set +e
"$HALE" create-cluster --cli-input-json file://examples/broken-cluster.json
rc=$?
set -e
[ "$rc" -eq 254 ] || { echo "expected the service error exit status 254, got $rc" >&2; exit 1; }

if command -v aws >/dev/null 2>&1; then
  step "The AWS CLI works against the same server"
  AWS_SHARED_CREDENTIALS_FILE="$data/credentials" AWS_CONFIG_FILE="$data/config" \
    run aws --profile hale sagemaker list-clusters --output table
fi

step "Delete both clusters"
run "$HALE" delete-cluster --cluster-name demo
run "$HALE" delete-cluster --cluster-name demo-sdk
for _ in $(seq 100); do
  n=$("$HALE" list-clusters | grep -c '"ClusterArn"' || true)
  [ "$n" -eq 0 ] && break
  sleep 0.1
done
[ "$n" -eq 0 ] || { echo "clusters still listed after DeleteCluster" >&2; exit 1; }
set +e
"$HALE" describe-cluster --cluster-name demo
rc=$?
set -e
[ "$rc" -eq 254 ] || { echo "describe-cluster of a deleted cluster should fail with ResourceNotFound" >&2; exit 1; }

step "Demo finished: the server stops and $data is removed"
