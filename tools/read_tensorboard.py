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
"brain.Event:2" file_version); 2 for a mistake in the command: arguments
other than one LOGDIR, a LOGDIR that is not a directory or holds no
tfevents file at all, or a python without tensorboard.
"""
import argparse
import glob
import json
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logdir", metavar="LOGDIR", help="the directory --tensorboard wrote")
    logdir = p.parse_args().logdir
    if not os.path.isdir(logdir):
        what = "not a directory" if os.path.exists(logdir) else "no such directory"
        print(f"read_tensorboard: {logdir}: {what} (LOGDIR is the one --tensorboard wrote)", file=sys.stderr)
        sys.exit(2)
    if not glob.glob(os.path.join(glob.escape(logdir), "*tfevents*")):
        print(f"read_tensorboard: {logdir}: no *tfevents* file", file=sys.stderr)
        sys.exit(2)

    # imported only now, so that --help and a mistaken command answer without it
    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
    except ImportError:
        print(f"read_tensorboard: {sys.executable} has no tensorboard package; run this script with "
              "/opt/ddpc-tb/bin/python, which `make deps` makes", file=sys.stderr)
        sys.exit(2)

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
