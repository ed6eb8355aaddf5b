#!/usr/bin/env python3
"""Times PyTorch training steps, for gpuwatch's overhead check on a GPU
(tests/gpu/run.sh runs it with and without gpuwatch, interleaved).

Two models, one process:
  transformer  6 encoder layers, d_model 512, batch 32 x 256 tokens, bf16
               autocast, AdamW: about 18 ms on an H200, most of it the host
               launching kernels (about 1 TFLOP of work per step)
  mlp          4 small linear layers, batch 64: a launch-bound step of about a
               millisecond, where per-launch costs show most
Each step is synchronised (torch.cuda.synchronize) and timed on the host; the
first --warmup steps are dropped. Prints one JSON object per model:
  {"model": "transformer", "steps": 200, "median_ms": ..., "mean_ms": ..., "p90_ms": ...}
"""

import argparse
import json
import statistics
import time

import torch
from torch import nn


def transformer():
    layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=6).cuda()
    x = torch.randn(32, 256, 512, device="cuda")
    return model, x


def mlp():
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
    x = torch.randn(64, 256, device="cuda")
    return model, x


def time_steps(build, steps, warmup):
    torch.manual_seed(0)
    model, x = build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"steps": steps, "median_ms": statistics.median(times),
            "mean_ms": statistics.fmean(times), "p90_ms": times[int(0.9 * (len(times) - 1))]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--models", default="transformer,mlp")
    args = ap.parse_args()
    builders = {"transformer": transformer, "mlp": mlp}
    for name in args.models.split(","):
        r = time_steps(builders[name], args.steps, args.warmup)
        print(json.dumps({"model": name, **r}), flush=True)


if __name__ == "__main__":
    main()
