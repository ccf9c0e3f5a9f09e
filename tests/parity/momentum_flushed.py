#!/usr/bin/env python3
"""momentum_flushed.py: a generated program stores a subnormal momentum as
zero (runtime/optimizer_state.h), where PyTorch's formula leaves it stuck.

A net of 4 inputs whose first input is nonzero in the first training sample
alone trains one sample a step, in file order, 300 steps: the weights of that
input get one gradient, then zeros, and their momentum decays by 0.6 a step,
past float's subnormal range by step 200, where 0.6 times the smallest
subnormal rounds back to it. Checked in each run's checkpoint:
  - SGD (momentum 0.6) and Adam (betas 0.6, 0.999; eps 1e-8): that momentum
    is exactly zero, and no optimizer tensor holds a subnormal;
  - Adam with eps 1e-14 (below the 1e-12 under which ddpc keeps it): that
    momentum stays subnormal, as PyTorch's formula leaves it.
Prints one line a case, "... ok" or "... FAILED: why"; exits 1 on a failure.
Uses the ddpc of $DDPC, else build/ddpc."""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from torch_ref import read_safetensors  # noqa: E402

STEPS = 300
SAMPLES = 400
FLT_MIN = 2.0 ** -126

NET = """net flush
input 1x2x2
flatten
linear 4->2
loss cross_entropy
train {{ batch 1; epochs 1; optimizer {optimizer} }}
"""
CASES = (  # (name, optimizer, momentum tensor, flushed)
    ("SGD, momentum 0.6", "sgd lr=0.01 momentum=0.6", "momentum_buffer", True),
    ("Adam, eps 1e-8", "adam lr=1e-3 betas=0.6,0.999 eps=1e-8", "exp_avg", True),
    ("Adam, eps 1e-14", "adam lr=1e-3 betas=0.6,0.999 eps=1e-14", "exp_avg", False),
)


def write_idx(directory, prefix):
    """SAMPLES 2x2 images whose pixel 0 is 255 in sample 0 alone; labels 0, 1, 0..."""
    images = bytearray()
    for s in range(SAMPLES):
        images += bytes([255 if s == 0 else 0, 40 + s % 200, 90, 200 - s % 150])
    with open(os.path.join(directory, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, SAMPLES, 2, 2) + images)
    with open(os.path.join(directory, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, SAMPLES) + bytes(s % 2 for s in range(SAMPLES)))


def check(tensors, slot, flushed):
    """Says "ok", or "FAILED: why", of the momentum tensors SLOT of a checkpoint's TENSORS."""
    first_input = [float(v) for v in tensors["optim.linear1.weight." + slot][:, 0]]  # linear1.weight is 2 x 4
    if flushed:
        subnormal = [n for n, t in tensors.items() if n.startswith("optim.") and
                     any(v != 0.0 and abs(v) < FLT_MIN for v in t.ravel().tolist())]
        if any(v != 0.0 for v in first_input):
            return "FAILED: the first input's %s is %r, not 0" % (slot, first_input)
        if subnormal:
            return "FAILED: subnormal values in %s" % ", ".join(subnormal)
        return "ok"
    if not all(v != 0.0 and abs(v) < FLT_MIN for v in first_input):
        return "FAILED: the first input's %s is %r, where PyTorch's formula leaves subnormals" % (slot, first_input)
    return "ok"


def main():
    ddpc = os.environ.get("DDPC", "build/ddpc")
    failed = False
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "data")
        os.mkdir(data)
        write_idx(data, "train")
        write_idx(data, "t10k")
        for i, (name, optimizer, slot, flushed) in enumerate(CASES):
            net, program, save = (os.path.join(d, "%s%d" % (kind, i)) for kind in ("net", "prog", "save"))
            with open(net + ".net", "w") as f:
                f.write(NET.format(optimizer=optimizer))
            subprocess.run([ddpc, net + ".net", "--target", "cpu", "-o", program], check=True,
                           stdout=subprocess.DEVNULL)
            subprocess.run([program, "--data", data, "--no-shuffle", "--max-steps", str(STEPS), "--save", save,
                            "--quiet"], check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
            checkpoint = os.path.join(save, "checkpoint-flush-%09d.safetensors" % STEPS)
            verdict = check(read_safetensors(checkpoint)[0], slot, flushed)
            print("%s: %s" % (name, verdict))
            failed = failed or verdict != "ok"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
