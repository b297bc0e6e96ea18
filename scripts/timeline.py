#!/usr/bin/env python3
"""Prints the demo's fault-to-finish timeline and checks every stage happened.

Reads `hale debug inject-fault` output (steps timed from the injection), the job's output
([Auto Resume] and [train] lines stamped HH:MM:SS.mmm) and the wall-clock time of the
injection. Exits 1, naming the stage, if one is missing.

    timeline.py INJECTED_AT_EPOCH INJECT_LOG JOB_OUTPUT
"""
import datetime
import re
import sys


def main():
    t0, inject_log, job_out = float(sys.argv[1]), open(sys.argv[2]).read(), open(sys.argv[3]).read()
    day = datetime.datetime.fromtimestamp(t0).date()
    events = []  # (seconds after the injection, stage, text)

    def add(at, stage, text):
        events.append((at, stage, text))

    detected_at = None
    for m in re.finditer(r"^\[\s*([\d.]+)s\] (.*)$", inject_log, re.M):
        at, text = float(m.group(1)), m.group(2)
        if text.startswith("Health:") and detected_at is None:
            detected_at = at
        if text.startswith("injected"):
            add(at, "fault injected", text.split(": wrote to")[0] + ": Xid " + re.search(r"Xid \(PCI:[^)]*\): (\d+)", text).group(1))
        elif text.startswith("Health:"):
            add(at, "detected", text.split(". Evidence:")[0])
        elif "is being replaced by" in text:
            add(at, "replaced", text.split(";")[0])
        elif text.startswith("Repair ") and " done " in text:
            add(at, "back in service", text.split(". Timeline")[0])

    # The repair's own timeline (offsets from the detection) says when Slurm drained the node.
    for m in re.finditer(r"^\s+\+([\d.]+)s (drained in Slurm.*)$", inject_log, re.M):
        if detected_at is not None:
            add(detected_at + float(m.group(1)), "drained", m.group(2))

    def stamp(hms):
        t = datetime.datetime.combine(day, datetime.datetime.strptime(hms, "%H:%M:%S.%f").time()).timestamp()
        return t - t0

    last_step_before = None
    for line in job_out.splitlines():
        m = re.match(r"^(\d\d:\d\d:\d\d\.\d{3}) (\[Auto Resume\]|\[train\]) (.*)$", line)
        if not m:
            continue
        at, who, text = stamp(m.group(1)), m.group(2), m.group(3)
        if who == "[train]":
            s = re.match(r"step (\d+) ", text)
            if s and at < 0:
                last_step_before = int(s.group(1))
            if text.startswith("resumed from step"):
                add(at, "resumed", text)
            elif text.startswith("finished"):
                add(at, "finished", text)
        elif at >= 0:
            text = re.sub(r"^Info: JobID: \d+ StepID: \S+ ", "", text)
            if "ResumeAction=" in text or "Retrying step" in text or "Requeueing" in text or "Expansion complete" in text or "shrink job" in text:
                add(at, "step retried" if ("Retrying step" in text or "Requeueing" in text) else "auto-resume", text)
    events.sort(key=lambda e: e[0])
    print(f"  {'':>8}  training at step {last_step_before} when the fault hit")
    for at, stage, text in events:
        print(f"  {at:+8.2f}s {stage:<16} {text}")
    missing = [s for s in ("fault injected", "detected", "drained", "replaced", "step retried", "resumed", "finished")
               if not any(e[1] == s for e in events)]
    if missing:
        print("timeline: missing stage(s): " + ", ".join(missing), file=sys.stderr)
        return 1
    resumed = next(e for e in events if e[1] == "resumed")
    step = int(re.search(r"resumed from step (\d+)", resumed[2]).group(1))
    loss = re.search(r"final loss ([\d.]+)", next(e for e in events if e[1] == "finished")[2]).group(1)
    print(f"\n  training resumed {resumed[0]:.1f}s after the fault, from step {step}"
          + (f" ({last_step_before - step} step{'' if last_step_before - step == 1 else 's'} recomputed)"
             if last_step_before is not None else "")
          + f"; final loss {loss}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
