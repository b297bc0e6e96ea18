#!/usr/bin/env bash
# hale's Kubernetes demo, HyperPod on EKS (run as root: `sudo ./scripts/demo.sh eks`):
#   1. `hale up examples/eks-cluster.json --kubelets real` starts a real Kubernetes control plane
#      (built from the upstream modules by scripts/k8s-tools.sh, once per machine), an image
#      registry, and a 4-node Eks cluster on it; every node runs AWS's own EKS OnCreate script,
#      then a real kubelet, containerd and kube-proxy, and joins as a Node
#      hyperpod-<instance id> with HyperPod's labels.
#   2. kubectl (after `hale update-kubeconfig`): the Nodes and their labels; hale's PyTorch
#      image in the cluster's registry; a PyTorchJob that trains for real (PyTorch DDP over gloo
#      in containers on 2 nodes, checkpoints on /fsx) with HyperPod's job auto-resume, and an
#      inference Deployment serving the model behind a Service, asked by a client pod.
#   3. A GPU of the node under the job's worker falls off the bus (Xid 79): hale labels the Node
#      UnschedulablePendingReplacement, taints and cordons it, evicts its pods, restarts the job
#      on healthy nodes, where it resumes from its last checkpoint, and replaces the instance.
#      A timeline says when each stage was seen; the job completes; the Service kept answering.
#   4. `hale down` tears it all down; nothing is left on the machine.
# `./scripts/demo.sh eks --own-machines` runs the same on four SSH hosts of a test bed of its own
# (scripts/testhosts.sh: each a server of its own to hale, sharing a directory as their /mnt, the
# pods' /fsx) through the static provider: hale copies the node stack to three hosts over SSH,
# and the Xid 79's replacement takes the fourth, a spare, while the faulty host is quarantined.
set -euo pipefail
cd "$(dirname "$0")/.."
own=""
case "${1:-}" in
  "") ;;
  --own-machines) own=1 ;;
  *) echo "usage: $0 [--own-machines]" >&2; exit 2 ;;
esac
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

if [ -z "$own" ]; then
  cluster=eks-demo nodes=4 fsx=/fsx
  step "hale up examples/eks-cluster.json --kubelets real (data in $data)"
  up examples/eks-cluster.json hale-eksdemo0 10.228.0.0/16 240 --kubelets real
else
  # A test bed of its own (not the tests' /srv/hale-testhosts on haleth0): its bridge, subnet
  # and namespaces' names are the demo's.
  export HALE_TESTHOSTS_DIR=/srv/hale-demo-hosts HALE_TESTHOSTS_BRIDGE=haledemo0 HALE_TESTHOSTS_NET=10.226.0 HALE_TESTHOSTS_NETNS=haledemo
  hosts_down() { scripts/testhosts.sh down >/dev/null; }
  on_cleanup=hosts_down
  cluster=own-eks nodes=3 fsx=/mnt shared="$data/fsx"
  mkdir -p "$shared"
  step "Four SSH hosts (scripts/testhosts.sh up 4 --containers --shared $shared): each a machine of its own to hale, their /mnt shared"
  run scripts/testhosts.sh up 4 --containers --shared "$shared"
  agent="$HALE_TESTHOSTS_NET.1:$(free_port "$HALE_TESTHOSTS_NET.1")"
  step "hale up examples/static-eks-cluster.json --provider static (data in $data): 3 hosts and a spare"
  up examples/static-eks-cluster.json - - 300 --provider static --hosts "$HALE_TESTHOSTS_DIR/hosts.json" \
    --known-hosts "$HALE_TESTHOSTS_DIR/known_hosts" --agent-listen "$agent" --kubelets real
fi

step "kubectl: every instance is a Node hyperpod-<instance id>, registered by its own kubelet, with HyperPod's labels"
export KUBECONFIG="$data/kubeconfig"
run "$HALE" update-kubeconfig --cluster-name "$cluster"
echo "(kubectl is $(command -v kubectl), $(kubectl version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])'), the control plane's version)"
run kubectl get nodes -o wide
run kubectl get nodes -L "$labels"
first=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
echo "HyperPod's labels on $first (kubectl get node $first -o json):"
kubectl get node "$first" -o json | python3 -c 'import json,sys; [print("  %s=%s" % kv) for kv in sorted(json.load(sys.stdin)["metadata"]["labels"].items()) if "sagemaker" in kv[0] or "instance-type" in kv[0]]'

if [ -z "$own" ]; then
  step "AWS's EKS OnCreate (examples/s3/sagemaker-hale-lifecycle/eks-base-config, unmodified) ran on every node"
  run "$HALE" exec --cluster-name "$cluster" --node-id "$first" -- sh -c \
    'ls -ld /var/lib/kubelet; grep -E "^(Disk for|Unsupported OS|Creating symbolic|\[INFO\] OS|\[stop\])" /var/log/provision/provisioning.log'
  echo "(the node's /etc and /var/lib are its own: the host has $(ls -d /var/lib/kubelet 2>/dev/null || echo 'no /var/lib/kubelet'))"
else
  step "On a host: the OnCreate (eks-own-config), and the node stack hale copied and started"
  run "$HALE" exec --cluster-name "$cluster" --node-id "$first" -- sh -c \
    'hostname; grep on_create /var/log/provision/provisioning.log; ls /opt/hale/k8s; ps -eo pid,args | grep -E "/opt/hale/k8s/(kubelet|containerd|kube-proxy) " | grep -v grep | cut -c1-100'
fi

reg=$(sed -n 's/^Image registry at \([0-9.:]*\):.*/\1/p' "$data/up.log" | head -1)
step "The cluster's image registry ($reg): nothing is pulled from the internet"
for _ in $(seq 1200); do
  [ "$(grep -c 'msg="image pushed"' "$data/server.log" 2>/dev/null || true)" -ge 2 ] && break
  sleep 0.1
done
grep 'msg="image pushed"' "$data/server.log" | sed 's/.*image=\([^ ]*\).*seconds=\([0-9.]*\).*/  pushed \1 (\2 s)/'
run curl -s "http://$reg/v2/_catalog"
echo "(a node's containerd pulls registry.hale.internal/<repository>:<tag> from $reg: /etc/containerd/certs.d/registry.hale.internal/hosts.toml)"

# manifest FILE prints the example manifest FILE, its shared file system the hosts' /mnt on own
# machines (the pods still see it as /fsx).
manifest() {
  if [ -z "$own" ]; then cat "$1"; else sed 's#hostPath: {path: /fsx,#hostPath: {path: /mnt,#' "$1"; fi
}
step "The training script and the model server on the cluster's shared $fsx; the PyTorch image on every node"
for f in examples/train/train.py examples/eks/serve.py examples/eks/ask.py; do
  run "$HALE" exec --cluster-name "$cluster" --node-id "$first" -- sh -c "mkdir -p $fsx/train && cat > $fsx/train/$(basename $f)" <"$f"
done
run kubectl apply -f examples/eks/prepull.yaml
run kubectl rollout status daemonset/pytorch-prepull --timeout 600s

step "A PyTorchJob that trains (DDP over gloo, master and worker on 2 nodes), and an inference Deployment"
[ -z "$own" ] || echo "(the manifests' hostPath /fsx is the hosts' shared /mnt here: sed 's#path: /fsx,#path: /mnt,#')"
manifest examples/eks/pytorchjob-train.yaml >"$data/pytorchjob-train.yaml"
manifest examples/eks/inference.yaml >"$data/inference.yaml"
manifest examples/eks/ask.yaml >"$data/ask.yaml"
run kubectl apply -f "$data/pytorchjob-train.yaml" -f "$data/inference.yaml"
for _ in $(seq 2400); do
  kubectl logs train-master-0 2>/dev/null | grep -q 'checkpoint saved at step 100$' && break
  sleep 0.1
done
run kubectl get pods -o wide
echo "kubectl logs train-master-0 (the loss falls):"
kubectl logs train-master-0 | grep -E 'world size|step (1|2|3|50|100) loss|no checkpoint' | sed 's/^/  /'
run kubectl rollout status deployment/llama-serve --timeout 120s
# The client pod asks the Service twice a second through the fault and the replacement, beside
# the job's master (a node that stays healthy), and logs what failed.
run kubectl apply -f "$data/ask.yaml"
kubectl wait --for=condition=Ready pod/ask --timeout 60s >/dev/null
sleep 2
echo "kubectl logs ask (a client pod asking the llama-serve Service):"
kubectl logs ask | tail -2 | sed 's/^/  /'

node=$(kubectl get pod train-worker-0 -o jsonpath='{.spec.nodeName}')
step "A GPU of $node (under the job's worker) falls off the bus (Xid 79)"
[ -z "$own" ] || echo "(the test hosts have no GPU: hale reads the driver's Xid 79 line in the host's kernel log as on a GPU server)"
KUBECTL=kubectl python3 scripts/eks-timeline.py "$node" app=train "$data/t0" 240 train-master-0 >"$data/timeline.txt" 2>&1 &
watch_pid=$!
sleep 0.5 # the watcher has read the Nodes as they were
date +%s.%N >"$data/t0"
run "$HALE" debug inject-fault --cluster-name "$cluster" --node-id "$node" --xid 79
wait "$watch_pid" || { cat "$data/timeline.txt"; echo "demo: a stage of the repair was not seen" >&2; exit 1; }

step "Timeline, as kubectl saw it"
cat "$data/timeline.txt"

step "The job resumed from its checkpoint and completes"
echo "kubectl logs train-master-0 (the new master):"
kubectl logs train-master-0 | grep -E 'resumed from|world size' | sed 's/^/  /'
run kubectl wait --for=condition=Succeeded pytorchjob/train --timeout 600s
kubectl logs train-master-0 | tail -1 | sed 's/^/  /'
run kubectl get pytorchjob train
run kubectl get events --field-selector involvedObject.name=train --sort-by=.lastTimestamp

step "The inference Service kept answering through the replacement"
kubectl logs ask | grep -E 'no answer' | sed 's/^/  /' || true
kubectl logs ask | grep -E ' ok=' | tail -1 | sed 's/^/  /'
echo "(ok: answered; failed: a request the evicted replica was serving when its node was drained, if any)"

step "After: $nodes Schedulable Nodes"
run kubectl get nodes -L sagemaker.amazonaws.com/node-health-status
run kubectl get pods -o wide
if [ -n "$own" ]; then
  step "The hosts: the faulty one Quarantined, the spare in use"
  run "$HALE" hosts list
fi

down "$cluster"
