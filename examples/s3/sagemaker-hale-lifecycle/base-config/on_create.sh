#!/bin/bash
# on_create.sh: the OnCreate entry point of examples/cluster.json, laid out as HyperPod's sample
# base-config is (awsome-distributed-training): it logs to /var/log/provision/provisioning.log,
# finds resource_config.json through SAGEMAKER_RESOURCE_CONFIG_PATH, and hands over to
# lifecycle_script.py with the resource config and the provisioning parameters.
set -euo pipefail

LOG_FILE=/var/log/provision/provisioning.log
mkdir -p "$(dirname "$LOG_FILE")"
exec > >(tee -a "$LOG_FILE") 2>&1

RESOURCE_CONFIG="${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}"
echo "[on_create] $(date -u +%FT%TZ) on $(hostname), resource config $RESOURCE_CONFIG"
if [ ! -f "$RESOURCE_CONFIG" ]; then
  echo "[on_create] no resource config: a vanilla node, nothing to do"
  exit 0
fi

# provisioning_parameters.json: the bundle's own when it has one (legacy configuration), else the
# one HyperPod (and hale) derive from the instance groups' SlurmConfig.
PARAMS=provisioning_parameters.json
[ -f "$PARAMS" ] || PARAMS=/opt/ml/config/provisioning_parameters.json

python3 -u lifecycle_script.py -rc "$RESOURCE_CONFIG" -pp "$PARAMS"
echo "[on_create] done"
