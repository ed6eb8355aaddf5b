#!/usr/bin/env python3
"""A PyTorch training loop that leaks device memory, for gpuwatch.

Every step keeps a reference to the step's hidden activations (8 MiB) "for
later analysis" without moving them off the GPU, so device memory grows by
8 MiB per step until the loop ends. Run it under gpuwatch, marking each step:

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 gpuwatch run -- python3 examples/torch_leak.py
    gpuwatch report gpuwatch.<pid>.json

and the report names the line that allocates what is kept (in Model.forward)
as a site growing by 8 MiB per mark. docs/pytorch.md shows the report and how
to read it under each of PyTorch's allocator modes. `--fix` keeps a copy on the
host instead, and the growth disappears.

Needs PyTorch with CUDA (built for the CUDA major version gpuwatch's CUPTI
comes from) and a GPU, or gpuwatch's CUDA simulator with `--no-blas`, which
replaces the two linear layers by elementwise ones of the same shapes (the
simulator cannot run cuBLAS: tests/sim/README.md). Without gpuwatch it runs
unchanged.
"""

import argparse
import os
import sys

import torch

try:
    import gpuwatch  # on PYTHONPATH under `gpuwatch run`
except ImportError:  # run without it: the package of this repository (python/)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import gpuwatch


class Elementwise(torch.nn.Module):
    """A linear layer's shapes without its matrix product (--no-blas): each
    output is an input, repeated to the output's width, scaled and shifted."""

    def __init__(self, inputs, outputs):
        super().__init__()
        self.inputs, self.outputs = inputs, outputs
        self.weight = torch.nn.Parameter(torch.randn(outputs) / inputs ** 0.5)
        self.bias = torch.nn.Parameter(torch.zeros(outputs))

    def forward(self, x):
        repeats = -(-self.outputs // self.inputs)
        return x.repeat(1, repeats)[:, :self.outputs] * self.weight + self.bias


class Model(torch.nn.Module):
    def __init__(self, blas=True):
        super().__init__()
        layer = torch.nn.Linear if blas else Elementwise
        self.fc1 = layer(1024, 4096)
        self.fc2 = layer(4096, 10)

    def forward(self, x):
        z = self.fc1(x)
        h = torch.relu(z)  # 512 x 4096 floats: 8 MiB, kept by the loop below
        return self.fc2(h), h


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fix", action="store_true", help="keep the activations on the host")
    parser.add_argument("--no-blas", action="store_true",
                        help="elementwise layers in place of linear ones (no cuBLAS)")
    args = parser.parse_args()

    device = torch.device("cuda")
    torch.manual_seed(0)
    model = Model(blas=not args.no_blas).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    activations = []
    for step in range(args.steps):
        x = torch.randn(512, 1024, device=device)
        target = torch.randint(0, 10, (512,), device=device)
        logits, hidden = model(x)
        loss = torch.nn.functional.cross_entropy(logits, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if args.fix:
            activations.append(hidden.detach().cpu())
        else:
            activations.append(hidden)  # the leak: 8 MiB of device memory per step
        gpuwatch.mark("step")  # a no-op without gpuwatch

    torch.cuda.synchronize()
    print("torch_leak: %d steps, %d activations kept, %.1f MiB allocated by PyTorch; %s" %
          (args.steps, len(activations), torch.cuda.memory_allocated() / 2**20,
           "gpuwatch is attached" if gpuwatch.attached() else "gpuwatch is not loaded"))


if __name__ == "__main__":
    main()
