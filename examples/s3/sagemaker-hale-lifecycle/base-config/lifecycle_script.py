#!/usr/bin/env python3
"""lifecycle_script.py: what HyperPod's sample lifecycle script does first: find this node in
resource_config.json by its address, learn its instance group and role from
provisioning_parameters.json, wait until slurm.conf names the controller's address (HyperPod's
sample waits the same way before it starts slurmd), and set the node up for that role. hale
writes slurm.conf and the munge key before the scripts run and starts slurmctld or slurmd after
them; this example records the role in /opt/ml/config/node_role."""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

# HyperPod's image keeps Slurm's configuration in /opt/slurm/etc; Debian's slurm-wlm (a host
# of your own, docs/own-machines.md) in /etc/slurm, where hale writes it.
SLURM_CONF = "/opt/slurm/etc/slurm.conf" if os.path.isdir("/opt/slurm/etc") else "/etc/slurm/slurm.conf"


def wait_for_slurm_conf(controller_ip, timeout=60):
    """Waits until slurm.conf names the controller's address (SlurmctldHost=<host>(<ip>))."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(SLURM_CONF) as f:
                if any(line.startswith("SlurmctldHost=") and f"({controller_ip})" in line for line in f):
                    return True
        except FileNotFoundError:
            pass
        time.sleep(1)
    return False


def my_addresses():
    addrs = set(subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split())
    try:
        addrs |= set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    return addrs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-rc", "--resource-config", required=True)
    ap.add_argument("-pp", "--provisioning-parameters", required=True)
    args = ap.parse_args()

    rc = json.load(open(args.resource_config))
    try:
        pp = json.load(open(args.provisioning_parameters))
    except FileNotFoundError:
        pp = {}

    me = None
    addrs = my_addresses()
    for group in rc["InstanceGroups"]:
        for inst in group["Instances"]:
            if inst["CustomerIpAddress"] in addrs:
                me = (group["Name"], inst)
    if me is None:
        sys.exit(f"[lifecycle] none of {sorted(addrs)} is in {args.resource_config}")
    group, inst = me

    role = "compute"
    if group == pp.get("controller_group"):
        role = "controller"
    elif group == pp.get("login_group"):
        role = "login"
    controllers = [i["CustomerIpAddress"] for g in rc["InstanceGroups"] if g["Name"] == pp.get("controller_group") for i in g["Instances"]]
    total = sum(len(g["Instances"]) for g in rc["InstanceGroups"])
    print(f"[lifecycle] cluster {rc['ClusterConfig']['ClusterName']}: I am {inst['InstanceName']} "
          f"({inst['InstanceId']}, {inst['CustomerIpAddress']}), group {group}, role {role}; "
          f"controller at {','.join(controllers) or 'none'}; {total} node{'' if total == 1 else 's'} in all")
    if pp.get("workload_manager") == "slurm" and controllers:
        if not wait_for_slurm_conf(controllers[0]):
            sys.exit(f"[lifecycle] {SLURM_CONF} does not name the controller {controllers[0]} after 60 s")
        print(f"[lifecycle] {SLURM_CONF} names the controller {controllers[0]}; munge key present: "
              f"{os.path.exists('/etc/munge/munge.key')}")
    with open("/opt/ml/config/node_role", "w") as f:
        f.write(role + "\n")


if __name__ == "__main__":
    main()
