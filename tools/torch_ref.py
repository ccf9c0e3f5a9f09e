#!/usr/bin/python3
"""The PyTorch reference run for parity tests: trains the module that
`ddpc NET.net --emit torch` writes, the way the generated program trains the
same net, and saves the weights (or one step's gradients) as safetensors.

    /usr/bin/python3 tools/torch_ref.py --module net.py --out after.safetensors
        [--init weights.safetensors] [--data DIR] [--steps K] [--batch B]
        [--epochs E] [--lr X] [--seed S] [--no-shuffle] [--dtype float32|float64]
        [--grad-only] [--perturb EPS] [--kinks-envelope REL] [--precision P] [--quiet]

It is the independent side of the comparison, so it uses PyTorch's own pieces
wherever PyTorch has them: the nn modules, F.cross_entropy, torch.optim and
its schedulers (all through the emitted module), DistributedSampler for the
sample order, ToTensor's pixel / 255. What it must share with the program is
spelled out by the flags, which mean what the program's flags mean:

  --data DIR      MNIST-format IDX files in DIR, DIR/raw, DIR/MNIST/raw or
                  DIR/FashionMNIST/raw, raw or gzipped (default: Debian's
                  Fashion-MNIST); the training set is used. Its images, 1 x
                  rows x columns, must be the net's input, or as many
                  features for a flat one: another is refused, as the
                  program refuses it
  --batch B       samples per step (default: the net's `batch`)
  --steps K       optimizer steps to take, counted from the start of training
                  (default: every step of every epoch); --max-steps K of the
                  program, so a K past the run's last step (epochs x steps
                  per epoch) stops there, as the program does. 0 writes the
                  initial weights.
  --epochs E      the run's length for the lr schedule (default: the net's)
  --lr X          the base learning rate (default: the net's)
  --seed S        sample order, dropout masks and the data { } block's crops
                  and flips (default: the net's seed)
  --no-shuffle    samples in data set order: step i of epoch e takes samples
                  i*B ... i*B+B-1. Without it, the order is DistributedSampler's
                  with one replica, reshuffled by seed + epoch, as the program's.
  --init W        start from these weights (default: PyTorch's initialisation
                  after torch.manual_seed(seed)); a file the program's --init
                  refuses (a dtype but F32 or F64, a step count but I64, a
                  NaN or an infinity) is refused in its words
  --dtype T       float32 (the program's) or float64 (to tell rounding from
                  bugs); the images are pixel / 255 in float32 either way,
                  through the net's data { } block (the module's transform)
                  in float32, then converted, so both runs see the same inputs
  --perturb EPS   multiply every float weight of the start by 1 + EPS or
                  1 - EPS (a fixed pseudo-random sign per weight) before
                  training: with EPS = 2^-24 and float64, how far float32's
                  rounding of the weights alone carries the run (the
                  envelope tools/compare_weights.py --envelope allows)
  --kinks-envelope REL  (with float64) write, instead of the run's weights,
                  element by element, the sum over the run's near-kink
                  inputs of how far each one alone moves the weights when it
                  takes the other branch. A near-kink input is a nonzero
                  ReLU or LeakyReLU input within REL of its tensor's largest
                  |x|: with REL = 2^-21, within a few float32 roundings of the
                  kink, so float32 may put it on either side, and the side
                  decides that sample's gradient through it (an exact zero
                  is a zero in float32 too, where the same terms cancel).
                  A max-pool's near-tie is a kink too: a window whose
                  largest input is above the runner-up by REL of the
                  tensor's largest |x| or less (but not 0), where float32
                  may pick either, and its flip takes the runner-up (the
                  output's value, and the gradient; pool_residual.net's
                  5-step parity run meets one at step 4 that moves its
                  conv weights 7.8e-5 of the update, which float32 on
                  AVX-512 machines flips).
                  tools/compare_weights.py --kinks allows the sum; no
                  perturbation of the weights computes it. Each input is
                  flipped alone, in a run of its own (flipped together,
                  their effects can cancel where a float32 run flips only
                  some); at most KINKS_MOST of them. The inputs found are
                  listed on stderr.
  --precision P   fp32, tf32 or bf16 (default: the module's TRAIN, else
                  fp32): as the program's --precision, the operands of every
                  Conv2d and Linear, forward and backward (input, weight and
                  output gradient), are rounded to P's significand by
                  runtime/precision.h's rule (their float32 value rounded,
                  ties to even, subnormals to zero) before the product; the
                  product, its sums and everything else keep --dtype
  --grad-only     one forward and backward pass on the first batch, no
                  optimizer step: writes each trainable parameter's gradient
                  of the batch's mean loss, under the parameter's name
  --out F         what to write: the state_dict after the last step (float
                  tensors as computed, F32 or F64; num_batches_tracked I64), or
                  the gradients; __metadata__ holds the steps and losses

Steps per epoch are ceil(N / B) (the last batch may be short, as a DataLoader
without drop_last gives it). The dropout context is (seed, epoch of the step).
Each step prints a JSON line {"step", "epoch", "loss", "lr"} unless --quiet.

The safetensors reader and writer are written from the format's spec (struct,
json, numpy): the safetensors package is not a dependency.
"""
import argparse
import gzip
import importlib.util
import json
import math
import os
import struct
import sys

import numpy as np
import torch
from torch.utils.data.distributed import DistributedSampler

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"

#
# safetensors
#

DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


class Bad(Exception):
    """A fault of the user's input: reported in one line, exit status 2."""


def read_safetensors(path, dtypes=None):
    """{name: numpy array} and the __metadata__ dict of the file PATH; Bad,
    naming PATH, for anything the format does not allow (the header is
    checked entry by entry, so a damaged file says where, not a traceback).
    DTYPES, a dict if given, gets each tensor's dtype as the file names it
    (BF16 is read as float32, so the array's own dtype does not say)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise Bad(f"{path}: {e.strerror}")
    if len(blob) < 8:
        raise Bad(f"{path}: truncated: {len(blob)} bytes, too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise Bad(f"{path}: truncated: the header length says {n} bytes, the file holds {len(blob) - 8} after it")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Bad(f"{path}: malformed header, not JSON: {e}")
    if not isinstance(header, dict):
        raise Bad(f"{path}: malformed header: a JSON {type(header).__name__}, where the format has an object "
                  "of tensors")
    data = memoryview(blob)[8 + n:]
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise Bad(f"{path}: malformed header: __metadata__ is a JSON {type(meta).__name__}, not an object")
    tensors = {name: read_tensor(path, name, info, data) for name, info in header.items()}
    if dtypes is not None:
        dtypes.update((name, info["dtype"]) for name, info in header.items())
    return tensors, meta


def is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def read_tensor(path, name, info, data):
    """The array of header entry NAME (INFO) in DATA, the bytes after the header."""
    if not isinstance(info, dict):
        raise Bad(f"{path}: tensor '{name}': a JSON {type(info).__name__}, where the format has an object "
                  "of dtype, shape and data_offsets")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or (dtype != "BF16" and dtype not in DTYPES):
        raise Bad(f"{path}: tensor '{name}' has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(is_count(d) for d in shape):
        raise Bad(f"{path}: tensor '{name}': shape {shape!r} is not a list of sizes")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(is_count(o) for o in offsets):
        raise Bad(f"{path}: tensor '{name}': data_offsets {offsets!r} is not a [begin, end] pair")
    begin, end = offsets
    size = 2 if dtype == "BF16" else np.dtype(DTYPES[dtype]).itemsize
    want = math.prod(shape) * size
    if not begin <= end <= len(data) or end - begin != want:
        raise Bad(f"{path}: tensor '{name}': data_offsets [{begin}, {end}] do not hold {dtype} {shape} "
                  f"({want} bytes, of {len(data)} after the header)")
    if dtype == "BF16":  # numpy has no bfloat16: widen the bits to float32
        bits = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(data[begin:end], dtype=np.dtype(DTYPES[dtype]).newbyteorder("<")).reshape(shape)


def write_safetensors(path, tensors, meta=None):
    """Writes {name: numpy array} to PATH (via PATH.tmp, renamed): data laid out
    largest element first, then by name, as the reference implementation does."""
    order = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k))
    header, offset, chunks = {}, 0, []
    if meta:  # first, as the reference writes it
        header["__metadata__"] = {str(k): str(v) for k, v in meta.items()}
    for name in order:
        arr = np.asarray(tensors[name])  # not ascontiguousarray: it makes a scalar 1-d
        raw = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        header[name] = {"dtype": NAMES[arr.dtype.newbyteorder("=")], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for c in chunks:
                f.write(c)
        os.replace(tmp, path)
    except OSError as e:
        raise Bad(f"{path}: cannot write it: {e.strerror}")


#
# IDX data
#

def find_idx(directory, name):
    """DIR/SUB/NAME or NAME.gz, searched as the program searches (raw first)."""
    for sub in ("", "raw", "MNIST/raw", "FashionMNIST/raw"):
        for suffix in ("", ".gz"):
            path = os.path.join(directory, sub, name + suffix)
            if os.path.isfile(path):
                return path
    return None


def read_idx(path, magic, ndim):
    try:
        with open(path, "rb") as f:
            blob = f.read()
        if blob[:2] == b"\x1f\x8b":  # gzipped, whatever the name says
            blob = gzip.decompress(blob)
    except EOFError:
        raise Bad(f"{path}: truncated: its gzip stream is cut short")
    except OSError as e:  # a damaged gzip stream's BadGzipFile has no strerror
        raise Bad(f"{path}: {e.strerror or e}")
    head = 4 + 4 * ndim
    if len(blob) < head:
        raise Bad(f"{path}: truncated IDX header")
    got, *dims = struct.unpack(">" + "I" * (1 + ndim), blob[:head])
    if got != magic:
        raise Bad(f"{path}: not an IDX file of {ndim} dimension(s) (magic {got:#010x}, expected {magic:#010x})")
    count = int(np.prod(dims, dtype=np.int64))
    if len(blob) - head != count:
        raise Bad(f"{path}: header says {dims}, file holds {len(blob) - head} bytes of data")
    return np.frombuffer(blob, dtype=np.uint8, offset=head).reshape(dims)


def load_train_set(directory):
    images = find_idx(directory, "train-images-idx3-ubyte")
    if not images:
        raise Bad(f"{directory}: no train-images-idx3-ubyte[.gz] in it, raw, MNIST/raw or FashionMNIST/raw")
    labels = os.path.join(os.path.dirname(images), "train-labels-idx1-ubyte")
    labels = labels if os.path.isfile(labels) else labels + ".gz"
    if not os.path.isfile(labels):
        raise Bad(f"{directory}: found {images} but no train-labels-idx1-ubyte[.gz] beside it")
    x = read_idx(images, 0x803, 3)
    y = read_idx(labels, 0x801, 1)
    if len(y) != len(x):
        raise Bad(f"{labels}: holds {len(y)} labels, but {images} holds {len(x)} images")
    return x, y


#
# the run
#

def load_module(path):
    """The module PATH, run. A file that is missing or not Python is named in
    one line; an exception the module's own code raises keeps its traceback,
    which is what says where in it."""
    if not os.path.isfile(path):
        raise Bad(f"{path}: {'is a directory' if os.path.isdir(path) else 'no such file'} "
                  "(--module takes the file `ddpc NET.net --emit torch` wrote)")
    spec = importlib.util.spec_from_file_location("ddpc_net", path)
    if spec is None:
        raise Bad(f"{path}: not a Python file (--module takes a .py file)")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except OSError as e:
        raise Bad(f"{path}: {e.strerror}")
    except SyntaxError as e:
        raise Bad(f"{path}:{e.lineno}: not Python: {e.msg}")
    for name in ("Net", "loss_fn", "make_optimizer", "make_scheduler", "TRAIN", "INPUT_SHAPE", "NUM_CLASSES"):
        if not hasattr(mod, name):
            raise Bad(f"{path}: has no {name}; is it a module `ddpc --emit torch` wrote?")
    return mod


STEP_COUNT_MAX = (2**63 - 1) // 4  # runtime/weights.h's DDP_STEP_COUNT_MAX


def load_weights(model, path):
    """Loads PATH into MODEL as the program's --init loads it
    (runtime/weights.c), refusing what it refuses, in its words: exactly
    the net's names and shapes; a float tensor F32, or F64 rounded to
    float (not F16, BF16 or an integer type); a step count
    (num_batches_tracked) an I64 of 0 to STEP_COUNT_MAX; and, once rounded
    to float, no NaN or infinity anywhere."""
    dtypes = {}
    tensors, _ = read_safetensors(path, dtypes)
    state = model.state_dict()
    missing = [k for k in state if k not in tensors]
    extra = [k for k in tensors if k not in state]
    if missing or extra:
        raise Bad(f"{path}: does not hold this net's weights: "
                  + (f"missing {', '.join(missing)}" if missing else "")
                  + ("; " if missing and extra else "")
                  + (f"unexpected {', '.join(extra)}" if extra else ""))
    loaded = {}
    for name, want in state.items():
        arr, floating = tensors[name], want.is_floating_point()
        if dtypes[name] not in (("F32", "F64") if floating else ("I64",)):
            raise Bad(f"{path}: tensor '{name}' has dtype {dtypes[name]}, the net expects "
                      f"{'F32' if floating else 'I64'}")
        if tuple(arr.shape) != tuple(want.shape):
            raise Bad(f"{path}: tensor '{name}' has shape {list(arr.shape)}, the net expects {list(want.shape)}")
        if not floating and not 0 <= int(arr) <= STEP_COUNT_MAX:
            raise Bad(f"{path}: tensor '{name}' is {int(arr)}, not a step count")
        with np.errstate(over="ignore"):  # an F64 beyond float's range is an infinity, refused below
            loaded[name] = torch.from_numpy(np.array(arr, dtype=np.float32 if floating else np.int64)).to(want.dtype)
    # as the program, once every tensor is read: a NaN weight trains nothing
    bad = next((name for name, t in loaded.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())),
               None)
    if bad:
        raise Bad(f"{path}: tensor '{bad}' is not finite (nan or inf, or a double beyond float's range): "
                  "weights of a diverged run")
    model.load_state_dict(loaded, strict=True)


KINKS_MOST = 64  # --kinks-envelope's runs, one per near-kink input (pool_residual.net's 5 steps meet 18)


class Kinks:
    """--kinks-envelope: forward hooks on every ReLU and LeakyReLU that
    record the nonzero inputs within REL of their tensor's largest |x| (as
    (step, module, index)), or, with FLIP set to one of them, give that input the
    other branch's output and, through autograd, its gradient; and on every
    MaxPool2d, the same of its near-ties: outputs whose window's largest
    input is above the runner-up by no more than REL of the tensor's largest
    |x| (but by something: an exact tie is one in float32 too), where float32
    may pick either (index: the output's), the flip taking the runner-up's
    value and sending the gradient there."""

    def __init__(self, rel):
        self.rel, self.step, self.found, self.flip = rel, 0, [], None

    def attach(self, model):
        for name, module in model.named_modules():
            if isinstance(module, (torch.nn.ReLU, torch.nn.LeakyReLU)):
                module.register_forward_hook(self.hook_for(name))
            elif isinstance(module, torch.nn.MaxPool2d):
                module.register_forward_hook(self.pool_hook_for(name))

    @staticmethod
    def windows(module, x):
        """Each output's window of X as (N, C, window, outputs), padded as
        MaxPool2d pads (-inf), with the pool's kernel, stride and padding."""
        k, s, pad = (module.kernel_size, module.stride, module.padding)
        if not all(isinstance(v, int) for v in (k, s, pad)) or module.dilation != 1 or module.ceil_mode:
            raise Bad(f"--kinks-envelope: a MaxPool2d of kernel {k}, stride {s}, padding {pad}, dilation "
                      f"{module.dilation}, ceil_mode {module.ceil_mode}: only square windows without dilation")
        n, c, h, w = x.shape
        padded = torch.nn.functional.pad(x, (pad, pad, pad, pad), value=-math.inf)
        cols = torch.nn.functional.unfold(padded.reshape(n * c, 1, h + 2 * pad, w + 2 * pad), k, stride=s)
        return cols.reshape(n, c, k * k, -1), k, s, pad

    @staticmethod
    def replaced(out, index, value):
        """OUT with its element INDEX (flat) VALUE's, through autograd."""
        one = torch.zeros(out.numel(), dtype=torch.bool)
        one[index] = True
        return torch.where(one.view_as(out), value, out)

    def pool_hook_for(self, name):
        def hook(module, inputs, out):
            # a flip run looks at the one pool and step it flips, no other
            if self.flip is not None and self.flip[:2] != (self.step, name):
                return out
            x = inputs[0]
            cols, k, s, pad = self.windows(module, x.detach())
            if k * k < 2:  # a window of one: nothing to pick
                return out
            top = torch.topk(cols, 2, dim=2)
            if self.flip is None:
                gap = top.values[:, :, 0, :] - top.values[:, :, 1, :]
                near = ((gap <= self.rel * x.detach().abs().max()) & (gap > 0)).flatten().nonzero().flatten()
                self.found += [(self.step, name, int(i)) for i in near]
                return out
            # the runner-up's input position, from its window offset and the output's place
            index = self.flip[2]
            n, c, h, w = x.shape
            outputs = cols.shape[3]
            sample_channel, place = divmod(index, outputs)
            offset = int(top.indices.reshape(-1, 2, outputs)[sample_channel, 1, place])
            oy, ox = divmod(place, out.shape[3])
            iy, ix = oy * s + offset // k - pad, ox * s + offset % k - pad
            return self.replaced(out, index, x.reshape(-1, h, w)[sample_channel, iy, ix])
        return hook

    def hook_for(self, name):
        def hook(module, inputs, out):
            x = inputs[0].detach()
            if self.flip is None:
                near = ((x.abs() <= self.rel * x.abs().max()) & (x != 0)).flatten().nonzero().flatten()
                self.found += [(self.step, name, int(i)) for i in near]
                return out
            step, where, index = self.flip
            if (step, where) != (self.step, name):
                return out
            slope = module.negative_slope if isinstance(module, torch.nn.LeakyReLU) else 0.0
            other = torch.where(inputs[0] > 0, inputs[0] * slope, inputs[0])
            return self.replaced(out, index, other.flatten()[index])
        return hook


#
# precision: the products' operands rounded as runtime/precision.h rounds them
#

DROPPED_BITS = {"fp32": 0, "tf32": 13, "bf16": 16}


def round_significand(t, drop):
    """T's values as float32, rounded to a significand DROP bits shorter
    (precision.h's ddp_round_significand, on int64 copies of the bits),
    returned in T's dtype."""
    u = t.detach().to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    low = (1 << drop) - 1
    exponent = u & 0x7F800000
    nearest = (u + (low >> 1) + ((u >> drop) & 1)) & ~low
    special = torch.where((u & 0x007FFFFF) != 0, (u | 0x00400000) & ~low, u)
    bits = torch.where(exponent == 0, u & 0x80000000, torch.where(exponent == 0x7F800000, special, nearest))
    bits = torch.where(bits >= 1 << 31, bits - (1 << 32), bits).to(torch.int32)
    return bits.view(torch.float32).to(t.dtype)


class RoundedConv(torch.autograd.Function):
    """conv2d (no bias) of rounded x and w; its backward passes take the
    rounded output gradient, as the program's backward-data and weight calls."""

    @staticmethod
    def forward(ctx, x, w, conv, drop):
        xr, wr = round_significand(x, drop), round_significand(w, drop)
        ctx.save_for_backward(xr, wr)
        ctx.conv, ctx.drop = conv, drop
        return torch.nn.functional.conv2d(xr, wr, None, conv.stride, conv.padding, conv.dilation, conv.groups)

    @staticmethod
    def backward(ctx, gy):
        xr, wr = ctx.saved_tensors
        c, g = ctx.conv, round_significand(gy, ctx.drop)
        gx = torch.nn.grad.conv2d_input(xr.shape, wr, g, c.stride, c.padding, c.dilation, c.groups)
        gw = torch.nn.grad.conv2d_weight(xr, wr.shape, g, c.stride, c.padding, c.dilation, c.groups)
        return gx, gw, None, None


class RoundedLinear(torch.autograd.Function):
    """x . w^T of rounded operands, and its backward likewise."""

    @staticmethod
    def forward(ctx, x, w, drop):
        xr, wr = round_significand(x, drop), round_significand(w, drop)
        ctx.save_for_backward(xr, wr)
        ctx.drop = drop
        return xr @ wr.t()

    @staticmethod
    def backward(ctx, gy):
        xr, wr = ctx.saved_tensors
        g = round_significand(gy, ctx.drop)
        return g @ wr, g.t() @ xr, None


def round_products(model, precision):
    """Every Conv2d and Linear of MODEL computing on operands rounded to PRECISION."""
    drop = DROPPED_BITS[precision]
    if not drop:
        return
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            if m.padding_mode != "zeros" or isinstance(m.padding, str):
                raise Bad(f"--precision: a Conv2d with padding {m.padding!r}, padding_mode {m.padding_mode!r}")
            def conv_forward(x, m=m):
                y = RoundedConv.apply(x, m.weight, m, drop)
                return y if m.bias is None else y + m.bias.view(1, -1, 1, 1)
            m.forward = conv_forward
        elif isinstance(m, torch.nn.Linear):
            def linear_forward(x, m=m):
                if x.dim() != 2:  # what the emitted modules give a Linear: a batch of flat samples
                    raise Bad(f"--precision: a Linear on a {x.dim()}-d input")
                y = RoundedLinear.apply(x, m.weight, drop)
                return y if m.bias is None else y + m.bias
            m.forward = linear_forward


def to_numpy(t):
    return t.detach().cpu().contiguous().numpy()


def train(args, mod, seed, batch, epochs, dtype, x_all, y_all, kinks=None):
    """The run: returns the model after it, the losses and the steps taken."""
    torch.manual_seed(seed)
    model = mod.Net()
    if args.init:
        load_weights(model, args.init)
    model.to(dtype)  # num_batches_tracked stays int64
    if args.perturb:
        signs = torch.Generator().manual_seed(12345)
        with torch.no_grad():
            for _, t in sorted(model.state_dict().items()):
                if t.is_floating_point():
                    flip = torch.randint(0, 2, t.shape, generator=signs).to(t.dtype) * 2 - 1
                    t.mul_(1 + args.perturb * flip)
    round_products(model, args.precision)
    if kinks:
        kinks.attach(model)
    model.train()

    n = len(x_all)
    steps_per_epoch = -(-n // batch)
    # --max-steps of the program: it stops at the run's last step however
    # large K is (its epoch loop ends there), and so does the schedule
    steps = steps_per_epoch * epochs if args.steps is None else min(args.steps, steps_per_epoch * epochs)
    if args.grad_only:
        steps = 1
    optimizer = mod.make_optimizer(model) if args.lr is None else mod.make_optimizer(model, lr=args.lr)
    scheduler = mod.make_scheduler(optimizer, steps_per_epoch, epochs)
    per_epoch = getattr(mod, "SCHEDULE_INTERVAL", "step") == "epoch"
    sampler = DistributedSampler(range(n), num_replicas=1, rank=0, shuffle=not args.no_shuffle, seed=seed)

    losses, order = [], None
    for step in range(steps):
        epoch, i = divmod(step, steps_per_epoch)
        if i == 0 or order is None:
            sampler.set_epoch(epoch)
            order = torch.tensor(list(iter(sampler)), dtype=torch.int64)
            model.set_dropout_context(seed, epoch)
        ids = order[i * batch:(i + 1) * batch]
        if kinks:
            kinks.step = step
        lr = optimizer.param_groups[0]["lr"]
        x = x_all[ids]
        if hasattr(mod, "transform"):  # the net's data { } block, on float32 pixel / 255
            x = mod.transform(x, ids, seed, epoch)
        loss = mod.loss_fn(model(x.to(dtype), ids), y_all[ids])
        optimizer.zero_grad()
        loss.backward()
        losses.append(loss.item())
        if not args.quiet:
            print(json.dumps({"step": step + 1, "epoch": epoch, "loss": loss.item(), "lr": lr}), flush=True)
        if args.grad_only:
            break
        optimizer.step()
        if not per_epoch:
            scheduler.step()
        elif i == steps_per_epoch - 1:
            scheduler.step()

    return model, losses, steps


def write_kinks_envelope(args, mod, seed, batch, epochs, dtype, x_all, y_all):
    """--kinks-envelope: the run, then one run per near-kink input it met."""
    kinks = Kinks(args.kinks_envelope)
    model, _, steps = train(args, mod, seed, batch, epochs, dtype, x_all, y_all, kinks)
    ref = {k: to_numpy(v) for k, v in model.state_dict().items()}
    found = kinks.found
    if len(found) > KINKS_MOST:
        raise Bad(f"--kinks-envelope {args.kinks_envelope:g}: {len(found)} near-kink inputs, more than "
                  f"{KINKS_MOST} runs; a smaller REL, or fewer steps")
    envelope = {k: np.zeros(v.shape, np.float64) for k, v in ref.items()}
    for one in found:
        kinks.flip = one
        flipped, _, _ = train(args, mod, seed, batch, epochs, dtype, x_all, y_all, kinks)
        for k, v in flipped.state_dict().items():
            if v.is_floating_point():
                envelope[k] += np.abs(to_numpy(v) - ref[k])
    if found:
        print("torch_ref.py: near-kink inputs (step, module, index): "
              + ", ".join(f"({s}, {m}, {i})" for s, m, i in found), file=sys.stderr)
    meta = {"steps": steps, "near_kinks": json.dumps(found), "dtype": args.dtype,
            "module": os.path.basename(args.module)}
    write_safetensors(args.out, {k: envelope[k].astype(ref[k].dtype) for k in ref}, meta)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", required=True, help="the module `ddpc NET.net --emit torch` wrote")
    ap.add_argument("--out", required=True, help="safetensors file to write")
    ap.add_argument("--init", help="safetensors weights to start from")
    ap.add_argument("--data", default=DEFAULT_DATA, help="directory of the IDX files")
    ap.add_argument("--steps", type=int, help="optimizer steps (default: the whole run)")
    ap.add_argument("--batch", type=int, help="samples per step (default: the net's)")
    ap.add_argument("--epochs", type=int, help="epochs of the run, for the schedule (default: the net's)")
    ap.add_argument("--lr", type=float, help="base learning rate (default: the net's)")
    ap.add_argument("--seed", type=int, help="sample order, dropout and data { } seed (default: the net's)")
    ap.add_argument("--no-shuffle", action="store_true", help="samples in data set order")
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--grad-only", action="store_true", help="write one batch's gradients, take no step")
    ap.add_argument("--perturb", type=float, default=0.0, help="relative change of every starting weight")
    ap.add_argument("--kinks-envelope", type=float, default=0.0,
                    help="write the weights plus what each ReLU/LeakyReLU input this near a kink moves them")
    ap.add_argument("--precision", choices=tuple(DROPPED_BITS),
                    help="round every conv's and linear layer's operands to this (default: the module's)")
    ap.add_argument("--quiet", action="store_true", help="no per-step lines")
    args = ap.parse_args(argv)

    mod = load_module(args.module)
    if args.precision is None:
        args.precision = mod.TRAIN.get("precision", "fp32")
    seed = mod.TRAIN["seed"] if args.seed is None else args.seed
    batch = mod.TRAIN["batch"] if args.batch is None else args.batch
    epochs = mod.TRAIN["epochs"] if args.epochs is None else args.epochs
    dtype = getattr(torch, args.dtype)
    if batch < 1 or epochs < 1 or (args.steps is not None and args.steps < 0):
        raise Bad("--batch and --epochs must be at least 1, --steps at least 0")

    images, labels = load_train_set(args.data)
    n, rows, cols = images.shape
    shape = tuple(mod.INPUT_SHAPE)
    # the program's rule (trainer.c's check_sample_shape): IDX images are
    # 1 x rows x cols, which a C x H x W input must be, and a flat input
    # must have as many features
    if (shape != (1, rows, cols)) if len(shape) == 3 else (math.prod(shape) != rows * cols):
        raise Bad(f"{find_idx(args.data, 'train-images-idx3-ubyte')}: the images are 1x{rows}x{cols} (channels x "
                  f"rows x columns), but the net's input is {'x'.join(map(str, shape))}")
    if int(labels.max(initial=0)) >= mod.NUM_CLASSES:
        bad = int(np.argmax(labels >= mod.NUM_CLASSES))
        raise Bad(f"{args.data}: sample {bad} has label {labels[bad]}, but the net has {mod.NUM_CLASSES} classes")
    x_all = torch.from_numpy(np.array(images)).to(torch.float32).div(255).reshape(n, *shape)
    y_all = torch.from_numpy(labels.astype(np.int64))

    if args.kinks_envelope < 0:
        raise Bad("--kinks-envelope must be at least 0")
    if args.kinks_envelope:
        if args.dtype != "float64" or args.grad_only or args.perturb:
            raise Bad("--kinks-envelope goes with --dtype float64, without --grad-only and --perturb")
        return write_kinks_envelope(args, mod, seed, batch, epochs, dtype, x_all, y_all)
    model, losses, steps = train(args, mod, seed, batch, epochs, dtype, x_all, y_all)

    meta = {"steps": 0 if args.grad_only else steps, "losses": json.dumps(losses), "dtype": args.dtype,
            "module": os.path.basename(args.module)}
    if args.grad_only:
        grads = {name: to_numpy(p.grad if p.grad is not None else torch.zeros_like(p))
                 for name, p in model.named_parameters()}
        meta["loss"] = repr(losses[0])
        write_safetensors(args.out, grads, meta)
    else:
        write_safetensors(args.out, {k: to_numpy(v) for k, v in model.state_dict().items()}, meta)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Bad as e:
        print(f"torch_ref.py: error: {e}", file=sys.stderr)
        sys.exit(2)
