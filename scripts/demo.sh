#!/usr/bin/env bash
# hale's demo, as far as hale goes today (run as root: nodes are Linux namespaces):
#   1. `hale up examples/cluster.json` brings a 4-node cluster (controller, login, two compute
#      groups) to InService: every node a network/UTS/mount namespace running `hale agent`,
#      which runs the HyperPod-style lifecycle scripts of examples/s3/.
#   2. Slurm runs on it: sinfo, srun and sbatch from the login node. A shell on a worker shows
#      the HyperPod files; the API is driven with the hale CLI, the
#      AWS SDK for Go and (if installed) the AWS CLI: describe, tags, events, logs, a broken
#      CreateCluster file, scale-up, a node replacement that keeps its address.
#   3. The main job: examples/train, a PyTorch DDP training on two GPU nodes started with
#      srun --auto-resume=1, loses a GPU mid-run (hale debug inject-fault --xid 79): hale detects
#      it, drains and replaces the node, auto-resume retries the step on the repaired job, and
#      the training finishes from its last checkpoint. A timeline says when each stage happened.
#      Then the same training with a run policy (examples/train/policy.yaml) has a rank stopped
#      mid-run (a hang no node check sees): srun finds it and restarts the step in place.
#   4. `hale down` tears it all down; nothing is left on the machine.
# `./scripts/demo.sh eks` runs the Kubernetes demo instead (HyperPod on EKS: scripts/demo-eks.sh),
# `./scripts/demo.sh eks --own-machines` that on SSH hosts through the static provider.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = eks ]; then
  exec ./scripts/demo-eks.sh "${@:2}"
elif [ $# -gt 0 ]; then
  echo "usage: $0 [eks [--own-machines]]   (no argument: the Slurm demo; eks: the Kubernetes one)" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: run as root (sudo ./scripts/demo.sh): the local provider creates network namespaces" >&2
  exit 1
fi
# The first time, the set-up installs Debian's Slurm, munge and PyTorch (a few minutes): it says
# what and why, with apt's progress.
./scripts/setup.sh
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
. scripts/demo-common.sh

step "hale up examples/cluster.json (data in $data)"
up examples/cluster.json hale-demo0 10.229.0.0/16 30

step "Every node is Running"
run "$HALE" list-cluster-nodes --cluster-name demo --output table
worker=$("$HALE" list-cluster-nodes --cluster-name demo --output text | awk '$2 == "gpu" {print $3}')

step "A shell on worker $worker shows the HyperPod files"
run "$HALE" exec --cluster-name demo --node-id "$worker" -- sh -c \
  'hostname; echo; cat /opt/ml/config/resource_config.json | head -24; echo ...; echo; cat /opt/ml/config/provisioning_parameters.json; echo; tail -3 /var/log/provision/provisioning.log; echo; df -h /fsx | tail -1'

login=$("$HALE" list-cluster-nodes --cluster-name demo --output text | awk '$2 == "login" {print $3}')
step "Slurm, from the login node $login: sinfo, srun -N2 hostname, a GPU job, an sbatch job on /fsx"
run "$HALE" exec --cluster-name demo --node-id "$login" -- sinfo
run "$HALE" exec --cluster-name demo --node-id "$login" -- srun -N2 hostname
run "$HALE" exec --cluster-name demo --node-id "$login" -- srun -p gpu --gres=gpu:1 sh -c 'echo "$(hostname): CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'
run "$HALE" exec --cluster-name demo --node-id "$login" -- sh -c \
  'printf "#!/bin/bash\n#SBATCH -N 2 -o /fsx/hello-%%j.out\nsrun hostname\n" > /fsx/hello.sh && id=$(sbatch --parsable /fsx/hello.sh) && echo "job $id submitted" &&
   for i in $(seq 100); do [ -s /fsx/hello-$id.out ] && ! squeue -h -j $id | grep -q . && break; sleep 0.1; done; cat /fsx/hello-$id.out'

step "Logs: every node's lifecycle output and what the creation did, per host"
run "$HALE" logs --cluster-name demo
stream=$("$HALE" logs --cluster-name demo | awk '$1 ~ /^demo-/ {print $1}')
run "$HALE" logs --cluster-name demo --log-stream-name "$stream"

step "The API: events, tags, a broken file"
run "$HALE" list-cluster-events --cluster-name demo --max-results 5 --output table
arn=$("$HALE" describe-cluster --cluster-name demo | sed -n 's/.*"ClusterArn": "\(.*\)".*/\1/p' | head -1)
run "$HALE" add-tags --resource-arn "$arn" --tags Key=owner,Value=demo
echo "examples/broken-cluster.json breaks two rules; the next two commands are expected to fail with SageMaker's errors:"
set +e
run "$HALE" create-cluster --cli-input-json file://examples/broken-cluster.json
rc=$?
set -e
[ "$rc" -eq 254 ] || { echo "expected the service error exit status 254, got $rc" >&2; exit 1; }
echo "(expected: exit status $rc, a ValidationException naming the fields)"
AWS_SHARED_CREDENTIALS_FILE="$data/credentials" AWS_CONFIG_FILE="$data/config" \
  run go run ./examples/sdk-create-cluster -file examples/broken-cluster.json -name sdk-demo 2>&1 | grep -v '^exit status' || true
echo "(expected: the Go SDK gets the same typed error)"
if command -v aws >/dev/null 2>&1; then
  AWS_SHARED_CREDENTIALS_FILE="$data/credentials" AWS_CONFIG_FILE="$data/config" \
    run aws --profile hale sagemaker list-clusters --output table
fi

step "Scale the gpu group from 1 to 2 nodes"
run "$HALE" update-cluster --cluster-name demo --instance-groups \
  '[{"InstanceGroupName":"gpu","InstanceCount":2,"ExecutionRole":"arn:aws:iam::123456789012:role/HyperPodRole"}]'
for _ in $(seq 200); do
  "$HALE" describe-cluster --cluster-name demo | grep -q '"ClusterStatus": "InService"' && break
  sleep 0.1
done
run "$HALE" list-cluster-nodes --cluster-name demo --instance-group-name-contains gpu --output table
# The new node is in slurm.conf on every node, slurmctld knows it, and its slurmd registered.
for _ in $(seq 100); do
  [ "$("$HALE" exec --cluster-name demo --node-id "$login" -- sinfo -h -p gpu -t idle -o %D)" = 2 ] && break
  sleep 0.1
done
run "$HALE" exec --cluster-name demo --node-id "$login" -- sinfo

step "Replace $worker: a new instance id, the same address and logical id"
run "$HALE" batch-replace-cluster-nodes --cluster-name demo --node-ids "$worker"
for _ in $(seq 200); do
  n=$("$HALE" list-cluster-nodes --cluster-name demo --output text | grep -cx $'INSTANCESTATUS\tRunning' || true)
  [ "$n" -eq 5 ] && ! "$HALE" list-cluster-nodes --cluster-name demo --output text | grep -q "$worker" && break
  sleep 0.1
done
run "$HALE" list-cluster-nodes --cluster-name demo --include-node-logical-ids --instance-group-name-contains gpu --output table
for _ in $(seq 100); do
  [ "$("$HALE" exec --cluster-name demo --node-id "$login" -- sinfo -h -p gpu -t idle -o %D)" = 2 ] && break
  sleep 0.1
done
run "$HALE" exec --cluster-name demo --node-id "$login" -- sinfo -N -p gpu

step "Training: examples/train (PyTorch DDP over gloo on gpu-1 and gpu-2) with srun --auto-resume=1, checkpoints on /fsx"
X="$HALE exec --cluster-name demo --node-id $login --"
# The node has a root of its own (hale's default image), without this checkout: the files go
# through hale exec's standard input, as one would copy them onto a cluster's shared storage.
for f in train.py train.sbatch; do
  run $X sh -c "mkdir -p /fsx/train && cat > /fsx/train/$f" < "examples/train/$f"
done
run $X grep -n srun /fsx/train/train.sbatch
job=$($X sh -c 'cd /fsx && TRAIN_ARGS="--steps 600 --ckpt-every 25 --step-seconds 0.05" sbatch --parsable -p gpu /fsx/train/train.sbatch')
echo "submitted job $job: 600 steps of at least 50 ms, a checkpoint every 25, output in /fsx/train-$job.out"
out="/fsx/train-$job.out"
echo "waiting for step 200 (the job starts PyTorch on two nodes first):"
for i in $(seq 600); do
  $X grep -q "step 200 " "$out" 2>/dev/null && break
  [ $((i % 25)) -eq 0 ] && echo "  $($X sh -c "grep -o 'step [0-9]*' $out 2>/dev/null | tail -1" || true) ($($X squeue -h -j "$job" -o %T 2>/dev/null))"
  sleep 0.2
done
$X grep -q "step 200 " "$out" || { $X cat "$out"; echo "demo: the training did not reach step 200" >&2; exit 1; }
$X tail -3 "$out"

step "A GPU of one of job $job's nodes (not its batch host) falls off the bus (Xid 79) mid-run: hale drains and replaces the node, auto-resume retries the step"
t0=$(date +%s.%N)
run "$HALE" debug inject-fault --cluster-name demo --job "$job" --xid 79 | tee "$data/inject.log" | cut -c1-200
for _ in $(seq 900); do
  [ -z "$($X squeue -h -j "$job" 2>/dev/null)" ] && break
  sleep 0.2
done
state=$($X scontrol show job -o "$job" | tr ' ' '\n' | sed -n 's/^JobState=//p')
$X cat "$out" >"$data/train.out"
echo "job $job: $state"
grep -E '\[Auto Resume\]|resumed from|finished|no checkpoint' "$data/train.out" | cut -c1-200
[ "$state" = COMPLETED ] || { tail -20 "$data/train.out"; echo "demo: the training job ended $state" >&2; exit 1; }

step "Timeline: fault to finish"
python3 scripts/timeline.py "$t0" "$data/inject.log" "$data/train.out"
run "$HALE" exec --cluster-name demo --node-id "$login" -- sinfo -N -p gpu

step "A rank stops mid-run (a hang: every node check passes): srun --run-policy finds it and restarts the step in place"
run $X sh -c "cat > /fsx/train/policy.yaml" < examples/train/policy.yaml
run $X sed -n '/^logMonitoringConfiguration/,$p' /fsx/train/policy.yaml
job=$($X sh -c 'cd /fsx && RUN_POLICY=/fsx/train/policy.yaml TRAIN_ARGS="--steps 400 --ckpt-every 25 --step-seconds 0.05" sbatch --parsable -p gpu /fsx/train/train.sbatch')
out="/fsx/train-$job.out"
echo "submitted job $job with RUN_POLICY=/fsx/train/policy.yaml; waiting for step 100:"
for _ in $(seq 600); do
  $X grep -q "step 100 " "$out" 2>/dev/null && break
  sleep 0.2
done
$X grep -q "step 100 " "$out" || { $X cat "$out"; echo "demo: the training did not reach step 100" >&2; exit 1; }
run "$HALE" debug inject-fault --cluster-name demo --job "$job" --stop-job | cut -c1-200
for _ in $(seq 900); do
  [ -z "$($X squeue -h -j "$job" 2>/dev/null)" ] && break
  sleep 0.2
done
state=$($X scontrol show job -o "$job" | tr ' ' '\n' | sed -n 's/^JobState=//p')
$X cat "$out" >"$data/hang.out"
echo "job $job: $state"
grep -E '\[Auto Resume\]|resumed from|finished' "$data/hang.out" | cut -c1-400
[ "$state" = COMPLETED ] && grep -q 'Restarting the step in place' "$data/hang.out" ||
  { tail -20 "$data/hang.out"; echo "demo: the hung job was not restarted in place and finished ($state)" >&2; exit 1; }
echo "the restart is an event (hale list-cluster-events):"
"$HALE" list-cluster-events --cluster-name demo --max-results 20 --output text | grep -F 'Run policy' | cut -c1-240

step "An application error (Xid 13) is recorded and needs nothing"
run "$HALE" debug inject-fault --cluster-name demo --node-id gpu-1 --xid 13

step "hale diagnose: the same classifier, offline, over any machine's kernel log"
printf '%s\n' "Apr  9 01:21:38 gpu-7 kernel: NVRM: Xid (PCI:0000:a1:00): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate." \
  "Apr  9 01:21:39 gpu-7 kernel: NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error detected on link 6" >"$data/messages"
run "$HALE" diagnose "$data/messages" || true

down demo
