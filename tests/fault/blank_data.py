#!/usr/bin/env python3
"""blank_data.py OUT_DIR TRAIN: IDX files in OUT_DIR of TRAIN training and 16
test samples of one zero pixel each, all of class 0: for tests of how many
samples a run holds, where a real image would only cost time."""
import os
import struct
import sys


def write(out_dir, prefix, count):
    with open(os.path.join(out_dir, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, 1, 1) + bytes(count))
    with open(os.path.join(out_dir, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, count) + bytes(count))


def main():
    out_dir, train = sys.argv[1], int(sys.argv[2])
    os.makedirs(out_dir, exist_ok=True)
    write(out_dir, "train", train)
    write(out_dir, "t10k", 16)


if __name__ == "__main__":
    main()
