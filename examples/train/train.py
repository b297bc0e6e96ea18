"""A data-parallel PyTorch training job for hale clusters (DDP over gloo, on CPU).

Every rank builds the same small model, trains on deterministic synthetic data (a fixed linear
target with noise, drawn from a generator seeded by step and rank, so a re-run computes exactly
the same steps), and averages gradients with DistributedDataParallel. Rank 0 saves a checkpoint
to shared storage every --ckpt-every steps, atomically (write a temporary file, then rename),
and every rank loads the latest checkpoint when it starts: a step that auto-resume runs again
carries on from there.

Run one task per node under srun (SLURM_PROCID, SLURM_NTASKS and SLURM_JOB_NODELIST say who is
who; the first node of the job is the rendezvous):

    srun --auto-resume=1 -N2 --ntasks-per-node=1 /usr/bin/python3 train.py --ckpt-dir /fsx/ckpt/run1
"""

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist


def log(rank, msg):
    if rank == 0:
        now = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
        print(f"{now} [train] {msg}", flush=True)


def master_addr():
    nodes = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if os.environ.get("MASTER_ADDR"):
        return os.environ["MASTER_ADDR"]
    out = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


def latest_checkpoint(ckpt_dir):
    path = os.path.join(ckpt_dir, "latest.pt")
    return path if os.path.exists(path) else None


def save_checkpoint(ckpt_dir, step, model, opt, loss):
    os.makedirs(ckpt_dir, exist_ok=True)
    tmp = os.path.join(ckpt_dir, f".latest.pt.{os.getpid()}")
    torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict(), "loss": loss}, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(ckpt_dir, "latest.pt"))


def batch(step, rank, size, dim):
    g = torch.Generator().manual_seed(1_000_003 * step + rank)
    x = torch.randn(size, dim, generator=g)
    w = torch.linspace(-1.0, 1.0, dim).unsqueeze(1)
    y = x @ w + 0.01 * torch.randn(size, 1, generator=g)
    return x, y


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ckpt-dir", required=True, help="checkpoint directory on shared storage (/fsx/...)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--port", type=int, default=29500)
    # This model's step takes milliseconds on a CPU with OpenBLAS, a real model's takes far
    # longer on a GPU: a demo or test that breaks a node mid-run paces the steps (sleeping out
    # the rest of each) so that the fault still lands mid-run on any machine.
    p.add_argument("--step-seconds", type=float, default=0.0, help="the least time a step takes (sleeping for the rest)")
    args = p.parse_args()

    # SIGTERM ends the run at once (exit 143, as a shell reports it): Kubernetes stops a pod's
    # container with it, and Python as a container's PID 1 would otherwise ignore it and keep
    # serving the rendezvous for the whole grace period (30 s), where a restarted job's workers
    # would join it and wait for its end. The last checkpoint is what a resumed run starts from.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    rank = int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")))
    world = int(os.environ.get("SLURM_NTASKS", os.environ.get("WORLD_SIZE", "1")))
    os.environ.setdefault("MASTER_ADDR", master_addr())
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    # The rendezvous is tried again for up to a minute when it cannot reach the master: a job
    # restarted on Kubernetes gets a new master pod under the same Service name, and for a
    # moment (the endpoints' update, slower on a busy machine) the name may still give the old
    # pod's address ("No route to host"); failing then would cost a container restart and its
    # back-off (10 s, then 20 s, ...).
    deadline = time.time() + 60
    while True:
        try:
            dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
            break
        except RuntimeError as e:
            if time.time() > deadline:
                raise
            print(f"rank {rank}: rendezvous with {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} failed ({e}); trying again",
                  file=sys.stderr, flush=True)
            time.sleep(1)

    model = torch.nn.Sequential(torch.nn.Linear(args.dim, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    start, loss = 0, float("nan")
    ckpt = latest_checkpoint(args.ckpt_dir)
    if ckpt:
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        loss = state["loss"]
        log(rank, f"resumed from step {start} (checkpoint {ckpt}, loss {state['loss']:.6f})")
    else:
        log(rank, "no checkpoint: starting at step 0")
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if "SLURM_JOB_ID" in os.environ:
        log(rank, f"world size {world} on {os.environ.get('SLURM_JOB_NODELIST', '?')}, job {os.environ['SLURM_JOB_ID']}")
    else:  # a PyTorchJob's pod
        log(rank, f"world size {world}, master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}, this pod {socket.gethostname()}")

    t0 = time.time()
    for step in range(start + 1, args.steps + 1):
        began = time.monotonic()
        x, y = batch(step, rank, args.batch, args.dim)
        opt.zero_grad()
        l = torch.nn.functional.mse_loss(ddp(x), y)
        l.backward()
        opt.step()
        lt = l.detach().clone()
        dist.all_reduce(lt)
        loss = lt.item() / world
        log(rank, f"step {step} loss {loss:.6f}")
        if step % args.ckpt_every == 0 and rank == 0:
            save_checkpoint(args.ckpt_dir, step, model, opt, loss)
            log(rank, f"checkpoint saved at step {step}")
        if args.step_seconds > 0:
            time.sleep(max(0.0, args.step_seconds - (time.monotonic() - began)))
    dist.barrier()
    log(rank, f"finished {args.steps} step{'' if args.steps == 1 else 's'} ({args.steps - start} in this run, {time.time() - t0:.1f}s); final loss {loss:.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
