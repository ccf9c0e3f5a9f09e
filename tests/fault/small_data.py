#!/usr/bin/env python3
"""small_data.py OUT_DIR [TRAIN] [TEST]: the first TRAIN (2048) training and
TEST (256) test samples of Debian's Fashion-MNIST as uncompressed IDX files in
OUT_DIR, so that end-to-end tests of real nets spend their time training
rather than evaluating 10,000 test images."""
import gzip
import os
import struct
import sys

SOURCE = "/usr/share/datasets/fashion-mnist"


def cut(name, out_dir, count):
    with gzip.open(os.path.join(SOURCE, name + ".gz"), "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * (dims - 1), data[8:4 + 4 * dims]) if dims > 1 else ()
    per_item = 1
    for d in shape:
        per_item *= d
    count = min(count, n)
    header = struct.pack(">II", magic, count) + data[8:4 + 4 * dims]
    body = data[4 + 4 * dims:4 + 4 * dims + count * per_item]
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(header + body)


def main():
    out_dir = sys.argv[1]
    train = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    test = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    os.makedirs(out_dir, exist_ok=True)
    for kind, count in (("train", train), ("t10k", test)):
        cut(kind + "-images-idx3-ubyte", out_dir, count)
        cut(kind + "-labels-idx1-ubyte", out_dir, count)


if __name__ == "__main__":
    main()
