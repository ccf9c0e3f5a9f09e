#!/usr/bin/python3
"""The PyTorch side of the benchmarks: trains the module of `ddpc --emit torch`
the way the DDP tutorial does, and reports samples per second.

    torch_train.py --module NET.py [--device cpu|cuda] [--steps N] [--batch B]
                   [--ranks R] [--threads T] [--data DIR] [--compile [MODE]] [--no-tf32]
                   [--cudnn-benchmark]

The training set is loaded once into tensors (no DataLoader in the timed loop),
so what is measured is forward, backward, the all-reduce and the optimizer.
DIR holds MNIST's IDX files, or CIFAR-10's binary batches in
DIR/cifar-10-batches-bin. A net's data { }
block (crops, flips, normalisation) is not applied: the program pays for it
on its loader thread, PyTorch does not, which favours PyTorch.
With --ranks R > 1, R processes on this machine train under
DistributedDataParallel (gloo on CPU, nccl on GPU) with R x B samples per step.
The first 5 steps are warm-up and not timed. --compile trains the model
through torch.compile (PyTorch 2.0 or newer) in its default mode, or in MODE
(reduce-overhead: the compiled passes replayed from CUDA graphs, what a net
this small wants on a GPU), and then the first 20 steps, which compile the
forward and backward passes, are not timed.
On a GPU PyTorch's defaults let cuDNN's convolutions use TF32 tensor cores
(torch.backends.cudnn.allow_tf32) while its matrix products stay FP32;
--no-tf32 turns TF32 off in both, for a comparison in plain FP32.
--cudnn-benchmark sets torch.backends.cudnn.benchmark: cuDNN's algorithms
timed on the first step of each shape (the warm-up) instead of taken from its
heuristics.
Prints one line (with --compile, "compile MODE" after the device; with
--no-tf32, "fp32"; with --cudnn-benchmark, "cudnn.benchmark"):
    torch: samples/s 1234.5 steps 100 batch 64 ranks 2 device cpu final_loss 0.5432
"""
import argparse
import glob
import importlib.util
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from torch_ref import load_train_set  # noqa: E402


def load_images(directory):
    """The training set's images (uint8, a row a sample) and labels: CIFAR-10's
    binary batches where DIR/cifar-10-batches-bin holds them, as the program
    reads them (a label byte, then 3072 pixel bytes, a record), else MNIST's
    IDX files (torch_ref.load_train_set)."""
    batches = sorted(glob.glob(os.path.join(directory, "cifar-10-batches-bin", "data_batch_*.bin")))
    if not batches:
        return load_train_set(directory)
    records = np.concatenate([np.fromfile(b, dtype=np.uint8).reshape(-1, 3073) for b in batches])
    return records[:, 1:], records[:, 0]


WARMUP = 5
COMPILE_WARMUP = 20  # with --compile: the first steps compile (forward, backward, and again on a recompile)


def load_module(path):
    spec = importlib.util.spec_from_file_location("net_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(rank, args):
    torch.set_num_threads(args.threads)
    if args.no_tf32:  # here, in each rank's own process (mp.spawn starts fresh ones)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    if args.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True
    if args.ranks > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo", rank=rank, world_size=args.ranks)
    device = torch.device(f"cuda:{rank}" if args.device == "cuda" else "cpu")
    mod = load_module(args.module)
    torch.manual_seed(0)
    model = mod.Net().to(device)
    if args.ranks > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank] if args.device == "cuda" else None)
    optimizer = mod.make_optimizer(model.module if args.ranks > 1 else model)
    images, labels = load_images(args.data)[:2]
    n = (len(labels) // args.ranks) * args.ranks
    x_all = torch.from_numpy(np.asarray(images[:n], dtype=np.float32) / 255.0).reshape(n, *mod.INPUT_SHAPE).to(device)
    y_all = torch.from_numpy(np.asarray(labels[:n], dtype=np.int64)).to(device)
    ids_all = torch.arange(n, device=device)
    net = model.module if args.ranks > 1 else model
    if hasattr(net, "set_dropout_context"):
        net.set_dropout_context(0, 0)
    model.train()
    # the compiled module shares the parameters the optimizer holds
    train_model = torch.compile(model, mode=args.compile) if args.compile else model
    warmup = COMPILE_WARMUP if args.compile else WARMUP
    per_rank = n // args.ranks
    start = None
    loss = torch.zeros(())
    for step in range(args.steps + warmup):
        if step == warmup:
            if args.device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        first = (rank * per_rank + step * args.batch) % (per_rank - args.batch)
        x, y, ids = (t[first:first + args.batch] for t in (x_all, y_all, ids_all))
        optimizer.zero_grad(set_to_none=True)
        out = train_model(x, ids) if hasattr(net, "set_dropout_context") else train_model(x)
        loss = mod.loss_fn(out, y)
        loss.backward()
        optimizer.step()
    if args.device == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if rank == 0:
        rate = args.steps * args.batch * args.ranks / elapsed
        print(f"torch: samples/s {rate:.1f} steps {args.steps} batch {args.batch} ranks {args.ranks} "
              f"device {args.device}{f' compile {args.compile}' if args.compile else ''}{' fp32' if args.no_tf32 else ''}"
              f"{' cudnn.benchmark' if args.cudnn_benchmark else ''} "
              f"final_loss {float(loss.detach()):.4f}",
              flush=True)
    if args.ranks > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--module", required=True)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--compile", nargs="?", const="default", metavar="MODE",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                   help=f"train through torch.compile (PyTorch 2.0 or newer) in MODE (default: its default); "
                        f"the first {COMPILE_WARMUP} steps untimed")
    p.add_argument("--no-tf32", action="store_true",
                   help="no TF32 in cuDNN's convolutions (PyTorch's default allows it) or cuBLAS's products")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="torch.backends.cudnn.benchmark: cuDNN's algorithms timed, not taken from its heuristics")
    args = p.parse_args()
    if args.compile and not hasattr(torch, "compile"):
        p.error(f"--compile needs torch.compile (PyTorch 2.0 or newer); this is PyTorch {torch.__version__}")
    if args.ranks > 1:
        mp.spawn(run, args=(args,), nprocs=args.ranks, join=True)
    else:
        run(0, args)


if __name__ == "__main__":
    main()
