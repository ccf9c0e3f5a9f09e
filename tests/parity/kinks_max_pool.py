#!/usr/bin/python3
"""tools/torch_ref.py's kinks at a max-pool: a near-tie found, and its flip.

    kinks_max_pool.py

A 1x1x4x4 input under MaxPool2d(2) (and under MaxPool2d(3, stride=1,
padding=1), whose windows overlap and take padding) whose one window's top
two inputs differ by 1e-9 of the largest |x|: Kinks(2^-21) must find the
windows that hold both, no other (an exact tie elsewhere is not one);
flipped, the first one's output must be the runner-up's value and the
gradient must reach the runner-up's input, not the top's, with every other
output as it was. Prints one line
per check, "... ok" or "... FAILED"; exits 1 if any failed.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from torch_ref import Kinks  # noqa: E402


def check(pool, x, top, runner_up, windows, what):
    """POOL over X, whose near-tie has its top input at TOP and the runner-up
    at RUNNER_UP (flat indices), which the outputs WINDOWS (flat indices)
    hold: those found, no other; the first flipped. One line per check; 1
    if all hold."""
    model = torch.nn.Sequential(pool)
    kinks = Kinks(2.0**-21)
    kinks.attach(model)
    plain = model(x)
    found = sorted(kinks.found)
    ok = [f[2] for f in found] == windows and all(f[1] == "0" for f in found)
    print(f"kinks_max_pool: {what}: the near-tie's windows alone found ({[f[2] for f in found]}): "
          f"{'ok' if ok else 'FAILED'}")
    if not ok:
        return 0
    kinks.flip = found[0]
    xg = x.clone().requires_grad_(True)
    out = model(xg)
    index = found[0][2]
    flat = out.detach().flatten()
    same = torch.equal(torch.cat([flat[:index], flat[index + 1:]]),
                       torch.cat([plain.flatten()[:index], plain.flatten()[index + 1:]]))
    value = flat[index].item() == x.flatten()[runner_up].item()
    grad = torch.zeros_like(out)
    grad.view(-1)[index] = 1.0
    out.backward(grad)
    routed = xg.grad.flatten()[runner_up].item() == 1.0 and xg.grad.flatten()[top].item() == 0.0
    for name, good in (("the flipped output is the runner-up's", value), ("the others as they were", same),
                       ("the gradient reaches the runner-up, not the top", routed)):
        print(f"kinks_max_pool: {what}: {name}: {'ok' if good else 'FAILED'}")
    return int(value and same and routed)


def main():
    x = torch.tensor([[[[0.5, -1.0, 2.0, 2.0],      # a window of an exact tie (2.0, 2.0): not a kink
                        [0.25, 0.75, 1.0, 0.0],
                        [3.0, 3.0 - 3e-9, 0.1, 0.2],  # a near-tie: 3.0 (index 8) and 3.0 - 3e-9 (index 9)
                        [0.0, 1.5, 0.3, 0.4]]]], dtype=torch.float64)
    good = check(torch.nn.MaxPool2d(2), x, 8, 9, [2], "MaxPool2d(2)")
    # overlapping windows with padding: every window that holds both near-tied inputs (and nothing
    # larger), outputs (1..3, 0..1), is one near-tie; with the exact tie made 2.5 and 2.0, no other
    y = x.clone()
    y[0, 0, 0, 2] = 2.5
    good &= check(torch.nn.MaxPool2d(3, stride=1, padding=1), y, 8, 9, [4, 5, 8, 9, 12, 13],
                  "MaxPool2d(3, stride=1, padding=1)")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
