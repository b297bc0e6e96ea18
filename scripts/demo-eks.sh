#!/usr/bin/env bash
# hale's Kubernetes demo, HyperPod on EKS (run as root: `sudo ./scripts/demo.sh eks`):
#   1. `hale up examples/eks-cluster.json` starts a real Kubernetes control plane (built from
#      the upstream modules by scripts/k8s-tools.sh, once per machine) and a 4-node Eks cluster
#      on it; every node runs AWS's own EKS OnCreate script and joins as a Node
#      hyperpod-<instance id> with HyperPod's labels (kwok plays the kubelets: pods on local
#      nodes run no process).
#   2. kubectl (after `hale update-kubeconfig`): the Nodes and their labels; a PyTorchJob with
#      HyperPod's job auto-resume and an inference Deployment.
#   3. A GPU of the node under the job's worker falls off the bus (Xid 79): hale labels the Node
#      UnschedulablePendingReplacement, taints and cordons it, evicts its pods, restarts the job
#      on healthy nodes and replaces the instance. A timeline says when each stage was seen.
#   4. `hale down` tears it all down; nothing is left on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: run as root (sudo ./scripts/demo.sh eks): the local provider creates network namespaces" >&2
  exit 1
fi
./scripts/setup.sh
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
# The control plane's binaries: 20-23 minutes the first time on a new machine, then cached.
./scripts/k8s-tools.sh
. scripts/demo-common.sh
# kubectl is bin/kubectl, the control plane's own version (scripts/k8s-tools.sh built it).
export PATH="$PWD/bin:$PATH"
labels=sagemaker.amazonaws.com/node-health-status,sagemaker.amazonaws.com/instance-group-name,node.kubernetes.io/instance-type,team

step "hale up examples/eks-cluster.json (data in $data)"
up examples/eks-cluster.json hale-eksdemo0 10.228.0.0/16 180

step "kubectl: every instance is a Node hyperpod-<instance id>, with HyperPod's labels"
export KUBECONFIG="$data/kubeconfig"
run "$HALE" update-kubeconfig --cluster-name eks-demo
echo "(kubectl is $(command -v kubectl), $(kubectl version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])'), the control plane's version)"
run kubectl get nodes -L "$labels"
first=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
echo "HyperPod's labels on $first (kubectl get node $first -o json):"
kubectl get node "$first" -o json | python3 -c 'import json,sys; [print("  %s=%s" % kv) for kv in sorted(json.load(sys.stdin)["metadata"]["labels"].items()) if "sagemaker" in kv[0] or "instance-type" in kv[0]]'

step "AWS's EKS OnCreate (examples/s3/sagemaker-hale-lifecycle/eks-base-config, unmodified) ran on every node"
run "$HALE" exec --cluster-name eks-demo --node-id "$first" -- sh -c \
  'ls -ld /var/lib/kubelet; grep -E "^(Disk for|Unsupported OS|Creating symbolic|\[INFO\] OS|\[stop\])" /var/log/provision/provisioning.log'
echo "(the node's /etc and /var/lib are its own: the host has $(ls -d /var/lib/kubelet 2>/dev/null || echo 'no /var/lib/kubelet'))"

step "A PyTorchJob with HyperPod's job auto-resume, and an inference Deployment"
run kubectl apply -f examples/eks/pytorchjob.yaml -f examples/eks/inference.yaml
for _ in $(seq 300); do
  [ "$(kubectl get pods -l 'app in (llama-pretrain,llama-serve)' --field-selector status.phase=Running -o name | wc -l)" -eq 4 ] && break
  sleep 0.1
done
run kubectl get pods -o wide

node=$(kubectl get pod llama-pretrain-worker-0 -o jsonpath='{.spec.nodeName}')
step "A GPU of $node (under the job's worker) falls off the bus (Xid 79)"
python3 scripts/eks-timeline.py "$node" app=llama-pretrain "$data/t0" 180 >"$data/timeline.txt" 2>&1 &
watch_pid=$!
sleep 0.5 # the watcher has read the Nodes as they were
date +%s.%N >"$data/t0"
run "$HALE" debug inject-fault --cluster-name eks-demo --node-id "$node" --xid 79
wait "$watch_pid" || { cat "$data/timeline.txt"; echo "demo: a stage of the repair was not seen" >&2; exit 1; }

step "Timeline, as kubectl saw it"
cat "$data/timeline.txt"

step "After: four Schedulable Nodes, the job and the Deployment Running on them"
run kubectl get nodes -L sagemaker.amazonaws.com/node-health-status
run kubectl get pods -o wide
run kubectl get events --field-selector involvedObject.name=llama-pretrain --sort-by=.lastTimestamp

down eks-demo
