#!/usr/bin/env python3
"""Watches an Eks cluster through kubectl while a node fails, and prints the timeline.

Polls the Nodes and the job's pods (kubectl get -o json, about every 0.1 s) from the moment of
the injection until every pod of the job is Running on nodes other than the faulty one, and
prints when each stage was first seen: the Node labelled UnschedulablePending*, cordoned and
tainted; the job's pod gone from it; the old Node deleted; a new Node Ready and Schedulable;
the job's pods Running elsewhere; with RESUME_POD, the first line of that pod's log that says
the training resumed from a checkpoint (train.py's "resumed from step N"). Exits 1, naming the
stage, if one is not seen within the time limit.

    eks-timeline.py NODE JOB_LABEL_SELECTOR INJECTED_AT_EPOCH_FILE [TIMEOUT_S [RESUME_POD]]

The injection time is read from a file the demo writes just before it injects the fault, so the
watcher can start first.
"""
import json
import os
import re
import subprocess
import sys
import time

HEALTH = "sagemaker.amazonaws.com/node-health-status"


def kubectl(*args):
    out = subprocess.run([os.environ.get("KUBECTL", "kubectl"), *args, "-o", "json"],
                         capture_output=True, text=True, check=False)
    return json.loads(out.stdout) if out.returncode == 0 else {"items": []}


def main():
    node, selector, t0_file = sys.argv[1], sys.argv[2], sys.argv[3]
    limit = float(sys.argv[4]) if len(sys.argv) > 4 else 180
    resume_pod = sys.argv[5] if len(sys.argv) > 5 else None
    stages = [
        "Node labelled UnschedulablePending*, cordoned, tainted",
        "the job's pod gone from the node",
        "the old Node deleted (replacement)",
        "a new Node Ready and Schedulable",
        "the job's pods Running on healthy nodes",
    ]
    if resume_pod:
        stages.append("training resumed from its checkpoint (%s's log)" % resume_pod)
    seen = {}
    start = time.time()
    t0 = None
    known = None  # the Nodes before the fault
    while len(seen) < len(stages) and time.time() - start < limit:
        if t0 is None and os.path.exists(t0_file) and os.path.getsize(t0_file) > 0:
            t0 = float(open(t0_file).read())
        nodes = {n["metadata"]["name"]: n for n in kubectl("get", "nodes")["items"]}
        pods = kubectl("get", "pods", "-l", selector)["items"]
        now = time.time()
        if known is None:
            known = set(nodes)
        if t0 is None:
            time.sleep(0.05)
            continue
        n = nodes.get(node)

        def mark(i):
            seen.setdefault(i, now - t0)

        if n is not None and n["metadata"]["labels"].get(HEALTH, "").startswith("UnschedulablePending") \
                and n["spec"].get("unschedulable") and any(t["key"] == HEALTH for t in n["spec"].get("taints", [])):
            mark(0)
        if 0 in seen and not any(p["spec"].get("nodeName") == node for p in pods):
            mark(1)
        if n is None and 0 in seen:
            mark(2)
        for name, m in nodes.items():
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in m["status"].get("conditions", []))
            if name not in known and ready and m["metadata"]["labels"].get(HEALTH) == "Schedulable" \
                    and not m["spec"].get("unschedulable"):
                mark(3)
        running = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName") != node
                   and p["metadata"].get("deletionTimestamp") is None]
        if 1 in seen and pods and len(running) == len(pods):
            mark(4)
        if resume_pod and 4 in seen and 5 not in seen:
            out = subprocess.run([os.environ.get("KUBECTL", "kubectl"), "logs", resume_pod],
                                 capture_output=True, text=True, check=False).stdout
            m = re.search(r"resumed from step (\d+)", out)
            if m:
                mark(5)
                stages[5] = "training resumed from its checkpoint of step %s (%s's log)" % (m.group(1), resume_pod)
        time.sleep(0.1)
    print("  +0.00s  Xid 79 written into %s's kernel log" % node)
    for i, text in sorted(enumerate(stages), key=lambda s: seen.get(s[0], 1e9)):
        at = seen.get(i)
        print("  %s  %s" % ("+%.2fs" % at if at is not None else "  never", text))
    missing = [stages[i] for i in range(len(stages)) if i not in seen]
    if missing:
        print("eks-timeline: not seen within %.0f s: %s" % (limit, "; ".join(missing)), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
