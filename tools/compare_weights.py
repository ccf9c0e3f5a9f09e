#!/usr/bin/python3
"""Compares weights trained by a ddpc program with PyTorch's, relative to the update.

    compare_weights.py INITIAL OURS REFERENCE [--tol 1e-4] [--steps K]
                       [--envelope PERTURBED] [--kinks FLIPPED]
                       [--float32-reference REF32]

For every tensor: update = REFERENCE - INITIAL (PyTorch in float64); error =
|OURS - REFERENCE|. The tensor passes when every element's

    error <= tol * max |update|  +  K * 2^-24 * max |weight|
             [+ K * (spread + max spread / 10)]
             [+ kink]
             [+ 2 * float32's error]

The second term is the rounding of float32 weights, half an ulp per step: with
a warm-up learning rate an update can be a few thousand ulps, and no float32
program gets closer than that. The third, with --envelope, is computed from
the reference alone, element by element: PERTURBED is the same float64 run
started from weights each changed by 2^-24 of itself (tools/torch_ref.py
--perturb), and spread = |PERTURBED - REFERENCE| is how far one float32
rounding of every weight carries that element in K steps (relu kinks,
batchnorm and Adam's division by sqrt(v) + eps amplify it). A float32
program rounds at every step, so it is allowed K such spreads. Its
roundings push in other directions than this one perturbation, so each
element also gets a tenth of the tensor's largest spread: with it, PyTorch's
own float32 passes on every parity net, and without it does not (a few
elements of mlp.net).
--kinks KINKS (what tools/torch_ref.py --kinks-envelope writes: element by
element, the sum over the float64 run's near-kink inputs of how far each
alone moves the element when it takes the other branch of its ReLU or
LeakyReLU, or the runner-up of its max-pool window) adds kink, that sum: an
input within a few float32 roundings of a kink (or of a tie) lands on
either side by float32's rounding, the side decides a sample's gradient
through it, and no perturbation of the weights computes that (resnet.net's
parity run has one, pool_residual.net's a tie). Where the reference meets
no such input, KINKS is zero.
--float32-reference REF32 (the same run by PyTorch in float32) adds twice
how far PyTorch's own float32 ends from REFERENCE at that element: the
float32 error of a gradient that is a small difference of large sums, which
no perturbation of the weights computes, and which Adam's first step, g /
(|g| + eps), turns into a large part of the update where |g| is near eps
(an element of mlp.net's first step: a gradient of 2e-9 against eps 1e-8,
where PyTorch's float32 ends 3e-3 of the tensor's update away and a float32
program that rounds its loss otherwise, 5e-3). A program as accurate as
PyTorch's float32 passes; a fault, which moves every element, still fails.
The allowance has no floor: one step's updates can be a thousand times
smaller than the weights, and a fixed 1e-7 let a 1% error in a gradient
pass (tests/parity/compare_small_update.py).
A float tensor with a NaN or an infinity in any of the files FAILS,
whatever its other elements: NaN is within every allowance by comparison
(NaN > allowed is false), and an infinity in REFERENCE, INITIAL or an
allowance's file makes the allowance infinite; a diverged run matches
nothing. Integer tensors (num_batches_tracked) must be equal, and of
REFERENCE's dtype in OURS (an F32 count equal by value is one the
program's --init refuses). Prints one line per tensor, with the largest
share of its allowance an element uses (the margin left), and "compare:
OK" or "compare: FAILED", which names each failed tensor and why; exit 0
or 1. OURS
without a tensor of REFERENCE, or with one REFERENCE lacks, FAILS, naming
them; every other file must hold REFERENCE's names and shapes exactly, as
it is computed from or alongside it, and one that does not, or a file that
is not safetensors, is a mistake in the command: one line naming the file,
exit 2.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import NAMES, Bad, read_safetensors  # noqa: E402


def name_difference(tensors, ref_path, ref):
    """What TENSORS lacks of REF's names and holds beyond them, in words."""
    lacks, extra = sorted(set(ref) - set(tensors)), sorted(set(tensors) - set(ref))
    return "; ".join(([f"lacks {', '.join(lacks)}, which {ref_path} holds"] if lacks else [])
                     + ([f"holds {', '.join(extra)}, which {ref_path} does not"] if extra else []))


def same_tensors(path, tensors, ref_path, ref):
    """Bad unless TENSORS (of PATH) has REF's names and shapes."""
    if set(tensors) != set(ref):
        raise Bad(f"{path}: not the tensors of {ref_path}: {name_difference(tensors, ref_path, ref)}")
    for name in ref:
        if tensors[name].shape != ref[name].shape:
            raise Bad(f"{path}: tensor '{name}' has shape {list(tensors[name].shape)}, "
                      f"{ref_path}'s {list(ref[name].shape)}")


def not_finite(name, files):
    """What of tensor NAME is NaN or infinite in FILES ((path, tensors) pairs;
    tensors None for a file not given), in words; empty when nothing is.
    NaN passes every comparison (NaN > allowed is False) and an infinity in
    the reference or an allowance's file makes the allowance infinite, so
    such a tensor fails before it is measured: a diverged run is no match."""
    said = []
    for path, tensors in files:
        if tensors is None:
            continue
        x = tensors[name]
        if x.dtype.kind != "f":
            continue
        nan, inf = int(np.count_nonzero(np.isnan(x))), int(np.count_nonzero(np.isinf(x)))
        if nan or inf:
            said.append(" and ".join(([f"{nan} NaN"] if nan else []) + ([f"{inf} inf"] if inf else []))
                        + f" in {path}")
    return "; ".join(said)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("initial")
    p.add_argument("ours")
    p.add_argument("reference")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--steps", type=int, default=1, help="optimizer steps taken (float32 rounding allowance)")
    p.add_argument("--envelope", help="the float64 run from weights perturbed by 2^-24 (allowed spread)")
    p.add_argument("--kinks", help="torch_ref.py --kinks-envelope's output (the allowed kink difference)")
    p.add_argument("--float32-reference", help="the same run by PyTorch in float32 (twice its error allowed)")
    a = p.parse_args()
    try:
        w0, _ = read_safetensors(a.initial)
        ours, _ = read_safetensors(a.ours)
        ref, _ = read_safetensors(a.reference)
        ref32 = read_safetensors(a.float32_reference)[0] if a.float32_reference else None
        perturbed = read_safetensors(a.envelope)[0] if a.envelope else None
        kinks = read_safetensors(a.kinks)[0] if a.kinks else None
        for path, tensors in ((a.initial, w0), (a.envelope, perturbed), (a.kinks, kinks),
                              (a.float32_reference, ref32)):
            if tensors is not None:
                same_tensors(path, tensors, a.reference, ref)
    except Bad as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    if set(ours) != set(ref):
        print(f"compare: FAILED: {a.ours} {name_difference(ours, a.reference, ref)}")
        return 1
    worst, most_used, failed = 0.0, 0.0, []
    for name in ref:
        r, o, i = ref[name], ours[name], w0[name]
        if r.shape != o.shape:
            failed.append(f"{name} (shape)")
            print(f"{name:28s} shape {list(o.shape)} vs {list(r.shape)}")
            continue
        if r.dtype.kind in "iu" or o.dtype.kind in "iu":
            # a count stored as a float (F32 40.0 for I64 40) is equal by
            # value, but the program's --init and --resume refuse it
            if r.dtype != o.dtype:
                failed.append(f"{name} (dtype {NAMES[o.dtype]}, not {NAMES[r.dtype]})")
                print(f"{name:28s} DIFFERENT: dtype {NAMES[o.dtype]} vs {NAMES[r.dtype]}")
                continue
            ok = np.array_equal(r, o)
            print(f"{name:28s} {'equal' if ok else 'DIFFERENT'}: {o.ravel()[:4]} vs {r.ravel()[:4]}")
            if not ok:
                failed.append(f"{name} (different)")
            continue
        r, o, i = (x.astype(np.float64) for x in (r, o, i))
        faults = not_finite(name, ((a.ours, ours), (a.reference, ref), (a.initial, w0), (a.envelope, perturbed),
                                   (a.kinks, kinks), (a.float32_reference, ref32)))
        if faults:
            failed.append(f"{name} ({faults})")
            print(f"{name:28s} {faults}   <-- not finite")
            continue
        update = float(np.max(np.abs(r - i))) if r.size else 0.0
        error = float(np.max(np.abs(o - r))) if r.size else 0.0
        allowed = a.tol * update + a.steps * 2.0**-24 * (float(np.max(np.abs(r))) if r.size else 0.0)
        notes = ""
        if perturbed is not None and r.size:
            spread = np.abs(perturbed[name].astype(np.float64) - r)
            allowed = allowed + a.steps * (spread + float(np.max(spread)) / 10)
            notes += f"  spread {float(np.max(spread)) / update if update else 0:8.2e}"
        if kinks is not None and r.size:
            kink = np.abs(kinks[name].astype(np.float64))
            allowed = allowed + kink
            if np.max(kink) > 0:
                notes += f"  kinks {float(np.max(kink)) / update if update else 0:8.2e}"
        if ref32 is not None and r.size:
            f32_error = np.abs(ref32[name].astype(np.float64) - r)
            allowed = allowed + 2 * f32_error
            notes += f"  torch32 {float(np.max(f32_error)) / update if update else 0:8.2e}"
        over = bool(np.any(np.abs(o - r) > allowed)) if r.size else False
        # the largest share of its allowance an element uses: the margin left
        with np.errstate(divide="ignore", invalid="ignore"):
            used = float(np.max(np.where(o == r, 0.0, np.abs(o - r) / allowed))) if r.size else 0.0
        ratio = error / update if update > 0 else 0.0
        worst = max(worst, ratio)
        most_used = max(most_used, used)
        mark = "   <-- over" if over else ""
        print(f"{name:28s} update {update:10.3e}  error {error:10.3e}  ratio {ratio:9.2e}{notes}  "
              f"used {used:5.1%}{mark}")
        if over:
            failed.append(f"{name} (over its allowance)")
    verdict = "OK" if not failed else "FAILED"
    print(f"compare: {verdict} worst {worst:.2e} of the update, at most {most_used:.0%} of an element's allowance "
          f"(tolerance {a.tol:g} of the update, "
          f"plus float32 rounding{' and the computed envelope' if perturbed is not None else ''}"
          f"{' and kinks' if kinks is not None else ''}"
          f"{' and twice PyTorch float32' + chr(39) + 's error' if ref32 is not None else ''})"
          f"{': ' + ', '.join(failed) if failed else ''}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
