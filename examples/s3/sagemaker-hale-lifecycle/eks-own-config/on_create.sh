#!/bin/bash
# on_create.sh for an Eks cluster on your own machines (examples/static-eks-cluster.json): hale
# installs and starts the node stack (containerd, the kubelet, kube-proxy) after this script, so
# it only prepares what is the machine's own. AWS's eks-base-config waits a minute for HyperPod's
# volume at /opt/sagemaker, which own machines do not have.
set -euo pipefail
LOG_FILE=/var/log/provision/provisioning.log
mkdir -p "$(dirname "$LOG_FILE")"
exec > >(tee -a "$LOG_FILE") 2>&1
echo "[on_create] $(date -u +%FT%TZ) on $(hostname): an own machine joins the Eks cluster"
# The cluster's shared file system, for checkpoints: mount yours here (NFS, Lustre), as
# HyperPod users do in their scripts. The test bed's hosts (scripts/testhosts.sh up --shared DIR)
# have it at /mnt already.
if mountpoint -q /mnt; then
  echo "[on_create] shared file system at /mnt: $(findmnt -no SOURCE /mnt)"
else
  echo "[on_create] no shared file system at /mnt: mount one here for jobs that checkpoint"
fi
echo "[on_create] done"
