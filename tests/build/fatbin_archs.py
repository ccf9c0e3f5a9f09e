#!/usr/bin/env python3
"""fatbin_archs.py FILE...: the GPU code each object file (or each member of
a static library) carries, one line each: NAME code=sm_80 ... code=compute_100,
the words nvcc's -gencode gives them; NAME with nothing after it when it has
no GPU code.

It reads the fat binaries in the .nv_fatbin section (objcopy), for a machine
without cuobjdump: a fat binary is a header (magic 0xBA55ED50, then a
16-bit version, its 16-bit header size and the 64-bit size of what
follows) and entries, each a header (16-bit kind: 1 PTX, 2 machine code;
16 bits; its 32-bit header size; the 64-bit size of its payload; the
architecture as a 32-bit number at byte 28) followed by its payload. The
layout is NVIDIA's, unpublished: tests/unit/test_build.c checks this reader
against objects nvcc built for known architectures."""
import os
import struct
import subprocess
import sys
import tempfile

MAGIC = struct.pack('<I', 0xBA55ED50)


def fatbin_codes(data):
    codes = set()
    pos = data.find(MAGIC)
    while pos >= 0:
        _version, header, size = struct.unpack_from('<HHQ', data, pos + 4)
        entry, end = pos + header, pos + header + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from('<HHIQ', data, entry)
            arch = struct.unpack_from('<I', data, entry + 28)[0]
            codes.add(('sm_%d' if kind == 2 else 'compute_%d') % arch)
            if entry_header + payload == 0:  # not a fat binary as read above: stop rather than loop
                raise SystemExit('fatbin_archs.py: an empty entry at byte %d: not the layout this reads' % entry)
            entry += entry_header + payload
        pos = data.find(MAGIC, end)
    return codes


def section(path, tmp):
    out = os.path.join(tmp, 'section')
    subprocess.run(['objcopy', '-O', 'binary', '--only-section=.nv_fatbin', path, out], check=True,
                   stderr=subprocess.DEVNULL)
    with open(out, 'rb') as f:
        return f.read()


def objects(path, tmp):
    """(name, path) of PATH, or of each member when it is a static library."""
    if not path.endswith('.a'):
        return [(os.path.basename(path), path)]
    members = os.path.join(tmp, 'members')
    os.mkdir(members)
    subprocess.run(['ar', 'x', os.path.abspath(path)], cwd=members, check=True)
    return [(m, os.path.join(members, m)) for m in sorted(os.listdir(members))]


def key(code):
    kind, arch = code.split('_')
    return (kind == 'compute', int(arch))


def main(paths):
    for path in paths:
        with tempfile.TemporaryDirectory() as tmp:
            for name, obj in objects(path, tmp):
                codes = sorted(fatbin_codes(section(obj, tmp)), key=key)
                print(' '.join([name] + ['code=' + c for c in codes]))


if __name__ == '__main__':
    main(sys.argv[1:])
