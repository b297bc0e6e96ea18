"""Serves the model examples/train/train.py trains, over HTTP (for examples/eks/inference.yaml).

It loads the latest checkpoint from --ckpt-dir (the cluster's shared /fsx), and again whenever
a newer one appears, so it serves what the training job last saved; with none yet, the model's
initial weights. Endpoints:

    GET /healthz            200 "ok" (the readiness probe)
    GET /predict?seed=N     the model's output for a deterministic input drawn from seed N, as
                            JSON with the checkpoint's step and the pod that answered
"""

import argparse
import json
import os
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import torch


class Model:
    def __init__(self, ckpt_dir, dim, hidden):
        self.path = os.path.join(ckpt_dir, "latest.pt")
        self.dim = dim
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
        self.step, self.mtime = 0, None
        self.lock = threading.Lock()

    def refresh(self):
        try:
            mtime = os.stat(self.path).st_mtime
        except FileNotFoundError:
            return
        if mtime == self.mtime:
            return
        state = torch.load(self.path)
        with self.lock:
            self.net.load_state_dict(state["model"])
            self.step, self.mtime = state["step"], mtime

    def predict(self, seed):
        self.refresh()
        x = torch.randn(1, self.dim, generator=torch.Generator().manual_seed(seed))
        with self.lock, torch.no_grad():
            return self.net(x).item(), self.step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    args = p.parse_args()
    # SIGTERM (the kubelet stopping the pod) ends it at once: Python as a container's PID 1
    # would ignore it and hold the node's drain for the whole grace period (30 s).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    torch.set_num_threads(1)
    model = Model(args.ckpt_dir, args.dim, args.hidden)
    host = socket.gethostname()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            u = urlparse(self.path)
            if u.path == "/healthz":
                body, code = b"ok\n", 200
            elif u.path == "/predict":
                seed = int(parse_qs(u.query).get("seed", ["0"])[0])
                y, step = model.predict(seed)
                body, code = (json.dumps({"prediction": y, "checkpoint_step": step, "served_by": host}) + "\n").encode(), 200
            else:
                body, code = b"not found\n", 404
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    print(f"serving the model of {args.ckpt_dir} on port {args.port}", flush=True)
    ThreadingHTTPServer(("", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
