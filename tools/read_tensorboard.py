#!/opt/ddpc-tb/bin/python
"""Prints the scalars TensorBoard itself reads from a --tensorboard log directory.

    read_tensorboard.py LOGDIR

Loads LOGDIR with TensorBoard's own EventAccumulator (the reader behind
`tensorboard --logdir`), so what it prints is what the dashboard would plot:
one line per point, in step order within each tag, tags sorted:

    "loss" 1 2.3025851249694824

The tag is a JSON string (quoted, escaped), so any tag reads back unambiguously;
the value is Python's repr of the float32 TensorBoard holds (exact: it reads
back to the same float), nan and inf included. Needs the tensorboard package,
which `make deps` installs into the venv /opt/ddpc-tb (this script's python).

Exit 0; 1 when the files are not event files TensorBoard accepts (no
"brain.Event:2" file_version); 2 when LOGDIR holds no tfevents file at all.
"""
import glob
import json
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: read_tensorboard.py LOGDIR")
    logdir = sys.argv[1]
    if not glob.glob(os.path.join(glob.escape(logdir), "*tfevents*")):
        print(f"read_tensorboard: {logdir}: no *tfevents* file", file=sys.stderr)
        sys.exit(2)

    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0})  # 0: keep every point
    acc.Reload()
    if acc.file_version != 2.0:
        print(f"read_tensorboard: {logdir}: file_version {acc.file_version!r}, expected 2.0 "
              "(\"brain.Event:2\")", file=sys.stderr)
        sys.exit(1)
    for tag in sorted(acc.Tags()[ea.SCALARS]):
        for point in acc.Scalars(tag):
            print(json.dumps(tag), point.step, repr(point.value))


if __name__ == "__main__":
    main()
