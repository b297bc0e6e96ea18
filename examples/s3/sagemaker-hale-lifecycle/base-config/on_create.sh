#!/bin/bash
# on_create.sh: the OnCreate entry point of examples/cluster.json, in HyperPod's layout.
# HyperPod (and hale) run it as root on every new node, with SAGEMAKER_RESOURCE_CONFIG_PATH
# pointing at resource_config.json, which lists every node of the cluster.
set -euo pipefail

LOG_FILE=/var/log/provision/provisioning.log
mkdir -p "$(dirname "$LOG_FILE")"
exec > >(tee -a "$LOG_FILE") 2>&1

RESOURCE_CONFIG="${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}"
PROVISIONING_PARAMETERS=/opt/ml/config/provisioning_parameters.json
echo "[on_create] $(date -u +%FT%TZ) on $(hostname), resource config $RESOURCE_CONFIG"

if [ ! -f "$RESOURCE_CONFIG" ]; then
  echo "[on_create] no resource config: nothing to do"
  exit 0
fi

# Who am I? Find this node in resource_config.json by its address, as the sample
# lifecycle_script.py does, and learn its group and role.
python3 - "$RESOURCE_CONFIG" "$PROVISIONING_PARAMETERS" <<'PY'
import json, socket, sys
rc = json.load(open(sys.argv[1]))
try:
    pp = json.load(open(sys.argv[2]))
except FileNotFoundError:
    pp = {}
ips = set(socket.gethostbyname_ex(socket.gethostname())[2])
import subprocess
ips |= set(subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split())
me = None
for g in rc["InstanceGroups"]:
    for i in g["Instances"]:
        if i["CustomerIpAddress"] in ips:
            me = (g["Name"], i)
if me is None:
    sys.exit("[on_create] this node is not in resource_config.json")
group, inst = me
role = "compute"
if group == pp.get("controller_group"):
    role = "controller"
elif group == pp.get("login_group"):
    role = "login"
total = sum(len(g["Instances"]) for g in rc["InstanceGroups"])
print(f"[on_create] cluster {rc['ClusterConfig']['ClusterName']}: I am {inst['InstanceName']} "
      f"({inst['InstanceId']}, {inst['CustomerIpAddress']}), group {group}, role {role}; {total} nodes in all")
PY
echo "[on_create] done"
