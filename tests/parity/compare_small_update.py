#!/usr/bin/python3
"""tools/compare_weights.py holds a small update to its tolerance, whatever the weights' size.

    compare_small_update.py

One step's updates are small beside the weights they change: on mnist.net
at batch 16, a largest update of 3.5e-6 on weights of up to 0.03. Weights
within 1e-3 of that update, plus their float32 rounding (2^-24 of 0.03,
1.8e-9), must pass, and a fault of 1% (3.5e-8) or 0.3% of every update must
not: an absolute floor of the allowance, or one of the weights' size, would
let it through. Writes the three files compare_weights.py reads (initial
float32 weights, a float64 reference, the program's float32 weights) for
each case into a temporary directory, and prints "CASE: OK" or "CASE:
FAILED" as compare_weights.py judged it.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, tools)
from torch_ref import write_safetensors  # noqa: E402


def main():
    rng = np.random.default_rng(5)
    w0 = rng.uniform(-0.03, 0.03, 4096).astype(np.float32)
    update = rng.uniform(-3.5e-6, 3.5e-6, 4096)
    ref = w0.astype(np.float64) + update
    cases = {
        "the float32 rounding of the reference": ref,
        "every update 0.3% off": ref + 3e-3 * update,
        "every update 1% off": ref + 1e-2 * update,
    }
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("w0.safetensors", "ref.safetensors", "ours.safetensors")]
        write_safetensors(paths[0], {"w": w0})
        write_safetensors(paths[1], {"w": ref})
        for case, ours in cases.items():
            write_safetensors(paths[2], {"w": ours.astype(np.float32)})
            r = subprocess.run([sys.executable, os.path.join(tools, "compare_weights.py"), paths[0], paths[2],
                                paths[1], "--steps", "1", "--tol", "1e-3"], capture_output=True, text=True)
            verdict = "OK" if r.returncode == 0 and "compare: OK" in r.stdout else "FAILED"
            print(f"{case}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
