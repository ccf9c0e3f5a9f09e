#!/usr/bin/env python3
"""tools_bad_input.py: the tools of tools/ answer a mistake with a message, not a traceback.

    DDPC=build/ddpc tools_bad_input.py

Each tool, run as a user runs it, on a command or an input it cannot use
must exit 2 with a message naming what is wrong (argparse's usage and
error, or one line naming the file), and no "Traceback"; --help prints the
usage and exits 0. The safetensors reader (torch_ref.py's, which
compare_weights.py imports) is given a file of each malformed kind in
process, and must raise Bad naming the file and the fault; then each tool
is run on one of them. compare_weights.py must say which file lacks or
adds which tensors (it said "names differ: []" when INITIAL lacked one).
And every tools/*.py with a #! line is executable, as the README runs them.
Prints one line a case, "CASE: ok" or "CASE: FAILED: why", then "tools'
bad input: N cases ok" or exits 1. torch_ref.py's --init check needs a
module `ddpc --emit torch` wrote: the ddpc of $DDPC, else build/ddpc.
torch_ref.py refuses what the program refuses, in the program's words:
an --init file of a dtype, step count or non-finite value that
runtime/weights.c refuses, and IDX images that are not the net's input
(1x2x2 images for an input of 4x1x1, or of 1x4x1, as many values).
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
from torch_ref import Bad, read_safetensors, write_safetensors  # noqa: E402

NET = """net tiny
input 1x2x2
conv 1->2 k1; batchnorm
flatten
linear 2
loss cross_entropy
train { batch 2; epochs 1; optimizer sgd lr=0.1 }
"""

failures = []
cases = 0


def report(case, why):
    """One line for CASE: ok when WHY is empty, else FAILED and why."""
    global cases
    cases += 1
    print(f"{case}: {'FAILED: ' + why if why else 'ok'}", flush=True)
    if why:
        failures.append(case)


def put(path, content):
    with open(path, "wb") as f:
        f.write(content)
    return path


def raw(path, header, data=b""):
    """A safetensors file of HEADER (bytes) and DATA, as given, however wrong."""
    return put(path, struct.pack("<Q", len(header)) + header + data)


def malformed(d):
    """(case, file, what the message must say) for each kind of broken file."""
    f32 = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
    return [
        ("a file of 3 bytes", put(os.path.join(d, "short.st"), b"abc"), "truncated"),
        ("a header length past the end", put(os.path.join(d, "long.st"), struct.pack("<Q", 1000) + b"{}"),
         "header length says 1000 bytes"),
        ("a header that is not JSON", raw(os.path.join(d, "text.st"), b"abcd"), "not JSON"),
        ("a header that is a JSON list", raw(os.path.join(d, "list.st"), b"[]"), "object of tensors"),
        ("a tensor that is a number", raw(os.path.join(d, "number.st"), b'{"w": 1}'), "tensor 'w'"),
        ("a dtype that is a list", raw(os.path.join(d, "dtype.st"), f32.replace(b'"F32"', b'["F32"]'), bytes(8)),
         "unknown dtype"),
        ("a shape that is a string", raw(os.path.join(d, "shape.st"), f32.replace(b"[2]", b'"2"'), bytes(8)),
         "shape '2'"),
        ("one data offset", raw(os.path.join(d, "offset.st"), f32.replace(b"[0, 8]", b"[0]"), bytes(8)),
         "data_offsets [0]"),
        ("BF16 data past the end", raw(os.path.join(d, "bf16.st"), f32.replace(b"F32", b"BF16"), bytes(4)),
         "do not hold BF16"),
        ("__metadata__ a list", raw(os.path.join(d, "meta.st"), f32[:1] + b'"__metadata__": [1], ' + f32[1:],
                                    bytes(8)), "__metadata__"),
        ("no such file", os.path.join(d, "absent.st"), "No such file"),
    ]


def check_reader(d):
    for case, path, want in malformed(d):
        try:
            read_safetensors(path)
            why = "read without complaint"
        except Bad as e:
            why = "" if str(e).startswith(path + ": ") and want in str(e) else f"said {str(e)!r}, not {want!r}"
        except Exception as e:  # noqa: BLE001 (what this test is for: any other is a traceback)
            why = f"{type(e).__name__}: {e}"
        report(f"read_safetensors, {case}", why)


def run(case, tool, args, status, want, one_line=False, stream="stderr"):
    """Runs tools/TOOL with ARGS: it must exit STATUS, with no traceback, and
    WANT in its STREAM (ONE_LINE: stderr is that one line)."""
    try:
        r = subprocess.run([sys.executable, os.path.join(TOOLS, tool), *args], capture_output=True, text=True,
                           timeout=120)
    except subprocess.TimeoutExpired:
        return report(case, "ran past 120 s (it took its arguments for something else?)")
    text = r.stdout if stream == "stdout" else r.stderr
    why = ""
    if r.returncode != status:
        why = f"exit status {r.returncode}, not {status}"
    elif "Traceback" in r.stderr:
        why = "a traceback"
    elif want not in text:
        why = f"no {want!r} in its {stream}"
    elif one_line and len(r.stderr.strip().splitlines()) != 1:
        why = "not one line"
    report(case, why + (f"\n{r.stdout}{r.stderr}" if why else ""))


def check_commands(d):
    # argparse's answers, and status 2 where the tools took anything or exited 1
    for tool in ("read_tensorboard.py", "gen_sampler_tables.py", "fit_lane_math.py", "compare_weights.py",
                 "torch_ref.py"):
        run(f"{tool} --help", tool, ["--help"], 0, f"usage: {tool}", stream="stdout")
    for tool in ("gen_sampler_tables.py", "fit_lane_math.py"):  # they took none, and ran
        run(f"{tool} with an argument", tool, ["x"], 2, "unrecognized arguments: x")
    run("read_tensorboard.py without LOGDIR", "read_tensorboard.py", [], 2, "required: LOGDIR")
    run("read_tensorboard.py with two", "read_tensorboard.py", [d, d], 2, "unrecognized arguments")
    run("read_tensorboard.py on a file", "read_tensorboard.py", [__file__], 2, f"{__file__}: not a directory",
        one_line=True)
    for path in sorted(glob.glob(os.path.join(TOOLS, "*.py"))):
        with open(path, "rb") as f:
            shebang = f.read(2) == b"#!"
        report(f"{os.path.basename(path)} is executable",
               "" if not shebang or os.stat(path).st_mode & 0o111 == 0o111 else "has #! but not mode 755")


def check_compare(d):
    one = os.path.join(d, "one.st")
    two = os.path.join(d, "two.st")
    wide = os.path.join(d, "wide.st")
    write_safetensors(one, {"w": np.zeros(2, np.float32)})
    write_safetensors(two, {"w": np.zeros(2, np.float32), "v": np.zeros(1, np.float32)})
    write_safetensors(wide, {"w": np.zeros(3, np.float32)})
    listed = os.path.join(d, "list.st")
    run("compare_weights.py, INITIAL a JSON list", "compare_weights.py", [listed, one, one], 2,
        f"{listed}: malformed header", one_line=True)
    run("compare_weights.py, INITIAL without a tensor", "compare_weights.py", [one, two, two], 2,
        f"{one}: not the tensors of {two}: lacks v", one_line=True)
    run("compare_weights.py, OURS with one more", "compare_weights.py", [one, two, one], 1,
        f"FAILED: {two} holds v, which {one} does not", stream="stdout")
    run("compare_weights.py, INITIAL of another shape", "compare_weights.py", [wide, one, one], 2,
        f"{wide}: tensor 'w' has shape [3]", one_line=True)
    run("compare_weights.py, --envelope without a tensor", "compare_weights.py", [two, two, two, "--envelope", one],
        2, f"{one}: not the tensors of {two}: lacks v", one_line=True)


def module_of(d, name, net):
    """The module `ddpc --emit torch` writes for NET (in D/NAME.net), or None."""
    ddpc = os.environ.get("DDPC", "build/ddpc")
    with open(os.path.join(d, name + ".net"), "w") as f:
        f.write(net)
    module = os.path.join(d, name + ".py")
    with open(module, "w") as f:
        made = subprocess.run([ddpc, os.path.join(d, name + ".net"), "--emit", "torch"], stdout=f)
    if made.returncode != 0:
        report(f"{ddpc} --emit torch of {name}.net", f"exit status {made.returncode}")
        return None
    return module


def with_bf16(path, name):
    """Rewrites PATH's header so that its F16 tensor NAME is BF16 (as many bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header[name]["dtype"] = "BF16"
    text = json.dumps(header).encode()
    put(path, struct.pack("<Q", len(text)) + text + blob[8 + n:])


def check_init(d, module, data):
    """--init files the program's --init refuses: refused alike, in its words."""
    good = os.path.join(d, "w0.st")
    base = ["--module", module, "--data", data, "--steps", "0", "--quiet", "--out", os.path.join(d, "out.st")]
    run("torch_ref.py, --init of its own --steps 0", "torch_ref.py", [*base[:-2], "--out", good], 0, "")
    run("torch_ref.py, --init of its own weights", "torch_ref.py", [*base, "--init", good], 0, "")
    try:
        w0, _ = read_safetensors(good)
    except Bad as e:
        return report("torch_ref.py, --init refusals", str(e))
    weight, count = "conv1.weight", "bn1.num_batches_tracked"
    nan, big = np.array(w0[weight]), np.array(w0["bn1.running_var"], np.float64)
    nan.flat[1], big[0] = np.nan, 1e300
    expects = "has dtype {}, the net expects {}"
    cases = [  # (case, {tensor: its new value}, what the program says)
        ("an F16 weight", {weight: w0[weight].astype(np.float16)}, f"'{weight}' " + expects.format("F16", "F32")),
        ("a BF16 weight", {weight: w0[weight].astype(np.float16)}, f"'{weight}' " + expects.format("BF16", "F32")),
        ("an I64 weight", {weight: w0[weight].astype(np.int64)}, f"'{weight}' " + expects.format("I64", "F32")),
        ("an F32 step count", {count: w0[count].astype(np.float32)}, f"'{count}' " + expects.format("F32", "I64")),
        ("an I32 step count", {count: w0[count].astype(np.int32)}, f"'{count}' " + expects.format("I32", "I64")),
        ("a step count of -1", {count: np.array(-1, np.int64)}, f"'{count}' is -1, not a step count"),
        ("a NaN weight", {weight: nan}, f"'{weight}' is not finite (nan or inf, or a double beyond float's range)"),
        ("an F64 beyond float's range", {"bn1.running_var": big}, "'bn1.running_var' is not finite"),
    ]
    for i, (case, change, want) in enumerate(cases):
        path = os.path.join(d, f"init{i}.st")
        write_safetensors(path, {**w0, **change})
        if "BF16" in case:  # numpy has no bfloat16: F16's bytes, renamed
            with_bf16(path, weight)
        run(f"torch_ref.py, --init with {case}", "torch_ref.py", [*base, "--init", path], 2,
            f"{path}: tensor {want}", one_line=True)


def check_input(d, data):
    """Nets whose input the 1x2x2 images are not: refused as the program refuses them."""
    images = os.path.join(data, "train-images-idx3-ubyte")
    for shape, fits in (("4x1x1", False), ("1x4x1", False), ("4", True)):
        module = module_of(d, "input" + shape, NET.replace("input 1x2x2\nconv 1->2 k1; batchnorm\n",
                                                           f"input {shape}\n"))
        if module is None:
            continue
        args = ["--module", module, "--data", data, "--steps", "1", "--quiet", "--out", os.path.join(d, "out.st")]
        if fits:
            run(f"torch_ref.py, input {shape} on 2x2 images", "torch_ref.py", args, 0, "")
        else:
            run(f"torch_ref.py, input {shape} on 2x2 images", "torch_ref.py", args, 2,
                f"{images}: the images are 1x2x2 (channels x rows x columns), but the net's input is {shape}",
                one_line=True)


def check_torch_ref(d):
    out = os.path.join(d, "out.st")
    absent = os.path.join(d, "absent.py")
    run("torch_ref.py, --module missing", "torch_ref.py", ["--module", absent, "--out", out], 2,
        f"{absent}: no such file", one_line=True)
    broken = os.path.join(d, "broken.py")
    with open(broken, "w") as f:
        f.write("def (\n")
    run("torch_ref.py, --module not Python", "torch_ref.py", ["--module", broken, "--out", out], 2,
        f"{broken}:1: not Python", one_line=True)
    module = module_of(d, "tiny", NET)
    if module is None:
        return
    data = os.path.join(d, "data")
    os.mkdir(data)
    with open(os.path.join(data, "train-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, 2, 2, 2) + bytes(8))
    with open(os.path.join(data, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, 2) + bytes(2))
    listed = os.path.join(d, "list.st")
    run("torch_ref.py, --init a JSON list", "torch_ref.py",
        ["--module", module, "--data", data, "--init", listed, "--steps", "0", "--quiet", "--out", out], 2,
        f"{listed}: malformed header", one_line=True)
    check_init(d, module, data)
    check_input(d, data)


def main():
    with tempfile.TemporaryDirectory() as d:
        check_reader(d)
        check_commands(d)
        check_compare(d)
        check_torch_ref(d)
    if failures:
        print(f"tools' bad input: {len(failures)} of {cases} cases FAILED")
        return 1
    print(f"tools' bad input: {cases} cases ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
