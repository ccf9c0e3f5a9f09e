#!/usr/bin/python3
"""tools/compare_weights.py fails weights that match nothing, whatever their error says.

    compare_verdicts.py

The parity suite takes compare_weights.py's verdict, so a fault it misses
passes a broken program. Each case writes INITIAL, OURS and REFERENCE (and
an --envelope where the case needs one) of two float tensors and a step
count into a temporary directory, every file right but one tensor of one
file, and runs the comparison: the case is ok when it exits 1, says
"compare: FAILED", and its summary names that tensor with why. A NaN is
within any allowance by comparison (NaN > allowed is false), and an
infinity in the reference makes the allowance infinite: both passed, as
"error nan ratio nan ... compare: OK". A step count of another dtype in
OURS (F32 40.0 for I64 40) is one the program's --init refuses; it was
"equal". The files as written, untouched, must pass (exit 0).
Prints one line a case, "CASE: ok" or "CASE: WRONG: why", then "compare's
verdicts: N cases ok", or exits 1.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
from torch_ref import write_safetensors  # noqa: E402


def files():
    """INITIAL, OURS, REFERENCE and an envelope of one SGD step that agree."""
    rng = np.random.default_rng(3)
    w0 = {"w": rng.uniform(-0.1, 0.1, 12).astype(np.float32), "b": rng.uniform(-0.1, 0.1, 3).astype(np.float32),
          "bn.num_batches_tracked": np.array(4, np.int64)}
    ref = {k: v.astype(np.float64) + rng.uniform(-1e-3, 1e-3, v.shape) if v.dtype.kind == "f" else v + 1
           for k, v in w0.items()}
    ours = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in ref.items()}
    envelope = {k: v + 1e-9 if v.dtype.kind == "f" else v for k, v in ref.items()}
    return {"initial": w0, "ours": ours, "reference": ref, "envelope": envelope}


def faulted(role, change, name="w"):
    """The files, with CHANGE applied to a copy of tensor NAME of ROLE's file."""
    f = files()
    f[role] = dict(f[role])
    f[role][name] = change(f[role][name].copy())
    return f


def at(k, value):
    def change(w):
        w[k] = value
        return w
    return change


def run(d, case, f, name="w", want_ok=False):
    paths = {}
    for role, tensors in f.items():
        paths[role] = os.path.join(d, role + ".safetensors")
        write_safetensors(paths[role], tensors)
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "compare_weights.py"), paths["initial"], paths["ours"],
                        paths["reference"], "--envelope", paths["envelope"], "--tol", "1e-4"],
                       capture_output=True, text=True, timeout=120)
    summary = next((line for line in r.stdout.splitlines() if line.startswith("compare: ")), "")
    if want_ok:
        why = "" if r.returncode == 0 and summary.startswith("compare: OK") else f"exit status {r.returncode}"
    elif r.returncode != 1 or not summary.startswith("compare: FAILED"):
        why = f"exit status {r.returncode}, {summary or 'no summary'}"
    elif f"{name} (" not in summary:
        why = f"its summary does not name '{name}': {summary}"
    else:
        why = ""
    print(f"{case}: {'WRONG: ' + why if why else 'ok'}", flush=True)
    if why:
        print(r.stdout + r.stderr)
    return not why


def main():
    nan, inf = float("nan"), float("inf")
    cases = [
        ("a NaN in OURS", faulted("ours", at(5, nan))),
        ("a NaN in REFERENCE", faulted("reference", at(5, nan))),
        ("a NaN in INITIAL", faulted("initial", at(5, nan))),
        ("a NaN in the envelope", faulted("envelope", at(5, nan))),
        ("every element NaN in OURS", faulted("ours", lambda w: w * nan)),
        ("an inf in OURS", faulted("ours", at(5, inf))),
        ("an inf in REFERENCE", faulted("reference", at(5, inf))),
        ("an inf in INITIAL", faulted("initial", at(5, -inf))),
    ]
    both = files()
    for role in ("ours", "reference"):
        both[role] = dict(both[role])
        both[role]["w"] = at(5, inf)(both[role]["w"].copy())
    cases.append(("the same inf in OURS and REFERENCE", both))
    count = "bn.num_batches_tracked"
    cases += [(f"the step count {t.__name__} in OURS, equal by value",
               faulted("ours", lambda n, t=t: n.astype(t), count), count)
              for t in (np.float32, np.float64, np.int32)]
    with tempfile.TemporaryDirectory() as d:
        ok = run(d, "the files as written pass", files(), want_ok=True)
        for case, f, *name in cases:
            ok &= run(d, case, f, *name)
    if not ok:
        return 1
    print(f"compare's verdicts: {len(cases) + 1} cases ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
