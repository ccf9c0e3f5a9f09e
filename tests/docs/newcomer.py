#!/usr/bin/env python3
"""README.md, run as a newcomer would run it (the `newcomer` suite).

README's indented code blocks are of three kinds:

  - transcripts: lines starting with `$ ` are commands, the lines under each
    are what it prints. Each command runs, in README order, in one scratch
    directory; its output (stdout and stderr) must equal the README's, line
    for line, once the figures that change from run to run (samples/s,
    seconds, the core count) are masked. A line `...` stands for any number
    of lines.
  - command blocks (the first line starts like a shell command): every line
    must match one rule in RULES below, which either runs it (exit status 0
    required) or skips it for a stated reason (several machines, GPUs). A
    command that no rule knows fails the check, so a README edit cannot add a
    command that nobody runs or explains; a rule that matches nothing fails
    too, so the table cannot go stale.
  - anything else (.net files, tables, output shown alone): not run.

The scratch directory holds `build`, `examples` and `bench`, linked to the source tree,
`ddpc` is on PATH (build/ddpc) and HOME is the scratch directory, so README's
commands run as written; `make` runs in the source tree.
`OUT`, README's name for any program, is the mnist_train built earlier.

Usage: newcomer.py README.md [--list] [--verbose] [--excerpt]
  --list: print what would run, run nothing; --verbose: each command's time;
  --excerpt: the file is part of README (the tests' own), so rules may go unused
Exit status 0 when every block holds, 1 otherwise, with the differences.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Training runs that README shows without a step limit are run for a few
# steps: enough to prove the command line starts training.
SHORT = " --max-steps 5"

# (pattern on the command without its comment, action): "run" runs it as
# written, "run+short" appends SHORT, "skip: why" does not run it.
RULES = [
    (r"make deps && make run", "skip: make deps installs Debian packages, and make run trains for minutes; their parts run below"),
    (r"make deps && make test", "skip: CI runs make deps and make test (.ci/run)"),
    (r"ddpc build: .*|\.\.\.", "skip: what make prints, not a command"),
    (r"build/ddpc examples/mnist\.net -o mnist_train", "run"),
    (r"make install PREFIX=\$HOME/\.local", "run"),
    (r"~/\.local/bin/ddpc examples/mnist\.net -o mnist_train", "run"),
    (r"\./(mnist_train|OUT)", "run+short"),
    (r"\./OUT --nproc-per-node \d+", "run+short"),
    (r"mpirun --allow-run-as-root --oversubscribe -np \d+ \./OUT", "run+short"),
    (r"mpirun -np \d+ \./OUT", "skip: needs that many slots and a user other than root (the line for root and small machines runs)"),
    (r"torchrun --nproc_per_node 1 --redirects 1 --tee 1 --no_python \./OUT", "run+short"),
    (r"torchrun --nnodes .*|mpirun -np 16 -H .*|srun .*|export MASTER_ADDR=.*", "skip: several machines"),
    (r"torchrun .*--nproc-per-node 8 .*", "skip: 8 GPUs (a CPU build's ranks are started by mpirun)"),
    (r"\./OUT --init-method tcp://10\.0\.0\.1:29500 .*", "skip: several machines"),
    (r"ddpc --rebuild OUT\.cu", "run"),
    (r"ddpc FILE\.net .*|\[--(emit|rebuild) .*", "skip: the synopsis, not a command"),
    (r"make", "run"),
    (r"make test", "skip: the suite that runs this check"),
    (r"make check", "skip: its suites are make test's too"),
    (r"bash \.ci/run", "skip: CI itself, which runs make test"),
    (r"tests/golden/update\.sh", "skip: re-pins the golden files"),
    (r"make (bench|bench-deps|fuzz|memcheck|memcheck-asan)", "skip: long runs that report, not tests"),
    (r"(GPU_RUN_SECONDS=\d+ )?bash tests/gpu/run\.sh (--timing-only --rounds \d+ )?--out DIR", "skip: needs a GPU"),
    (r"make gpu-kit|bash tests/gpu/run\.sh --dry-run", "skip: the gpu_kit suite runs them"),
    (r"\./mnist_train --save ck --resume \.\.\.; \[ \$\? = 75 \] && scontrol requeue .*",
     "skip: a Slurm job script's line (tests/fault/graceful_stop.sh checks the status 75 it tests)"),
]

COMMAND_START = re.compile(r"(\$ |build/|\./|~/|tests/|bash |torchrun |mpirun |srun |make\b|export |ddpc |sudo )")

# Figures that differ from run to run, masked on both sides.
MASKS = [
    (re.compile(r"\b\d+ samples/s"), "N samples/s"),
    (re.compile(r"\b\d+(\.\d+)?s\b"), "Ts"),
    (re.compile(r"\b\d+(\.\d+)? ms per step"), "T ms per step"),
    (re.compile(r"\(\d+ cores?\)"), "(N cores)"),
]


def mask(line):
    for pattern, text in MASKS:
        line = pattern.sub(text, line)
    return line.rstrip()


def code_blocks(text):
    """Indented code blocks as (first line number, lines without the indent)."""
    blocks, current, previous = [], None, ""
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("    ") and (current is not None or previous.strip() == ""):
            if current is None:
                current = (number, [])
            current[1].append(line[4:])
        elif current is not None and line.strip() == "":
            current[1].append("")
        else:
            if current is not None:
                blocks.append(current)
            current = None
        previous = line
    if current is not None:
        blocks.append(current)
    for _, lines in blocks:
        while lines and not lines[-1].strip():
            lines.pop()
    return blocks


def transcript(lines):
    """[(command, expected output lines)] of a block of `$ ` lines; a command
    ending in <<'EOF' takes the lines up to EOF as its here-document."""
    steps, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            i += 1  # prose between a command's output and the next command
            continue
        command = line[2:]
        i += 1
        heredoc = re.search(r"<<'(\w+)'$", command)
        if heredoc:
            while i < len(lines) and lines[i] != heredoc.group(1):
                command += "\n" + lines[i]
                i += 1
            command += "\n" + heredoc.group(1)
            i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        while expected and not expected[-1].strip():
            expected.pop()
        steps.append((command, expected))
    return steps


def matches(expected, actual):
    """Whether ACTUAL fits EXPECTED, where a line `...` matches any lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and mask(expected[0]) == mask(actual[0]) and matches(expected[1:], actual[1:])


def commands(lines):
    """A command block's commands, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in lines:
        line = re.sub(r"\s+#.*$", "", line).rstrip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line.strip()).strip()
        pending = ""
        if line:
            out.append(line)
    return out


def paragraph_commands(lines):
    """The lines of a block's paragraphs that start like a command: a block
    may list commands, then (after a blank line) a directory map."""
    out, keep = [], None
    for line in lines:
        if not line.strip():
            keep = None
            continue
        if keep is None:
            keep = bool(COMMAND_START.match(line))
        if keep:
            out.append(line)
    return out


def unnamed(readme_text):
    """What the source tree offers that README does not name: make targets
    (those the Makefile's opening comment lists), fuzzers, tools."""
    makefile = open(os.path.join(REPO, "Makefile"), encoding="utf-8").read()
    wanted = set(re.findall(r"^#\s+(make [a-z-]+)", makefile, re.M))
    wanted |= set(re.findall(r"\$\(BUILD\)/(fuzz_[a-z_]+):", makefile))
    wanted |= {name for name in os.listdir(os.path.join(REPO, "tools")) if name.endswith(".py")}
    return sorted(name for name in wanted if name not in readme_text)


def rule_for(command, used):
    for pattern, action in RULES:
        if re.fullmatch(pattern, command):
            used.add(pattern)
            return action
    return None


class Runner:
    def __init__(self, workdir, verbose):
        self.workdir, self.verbose = workdir, verbose
        bindir = os.path.join(workdir, ".bin")
        os.mkdir(bindir)
        os.symlink(os.path.join(REPO, "build", "ddpc"), os.path.join(bindir, "ddpc"))
        for name in ("build", "examples", "bench"):
            os.symlink(os.path.join(REPO, name), os.path.join(workdir, name))
        # HOME is the scratch directory, so `make install PREFIX=$HOME/.local` installs there.
        self.env = dict(os.environ, HOME=workdir, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))

    def run(self, command, timeout=600):
        command = re.sub(r"\bOUT\b", "mnist_train", command)
        start = time.monotonic()
        # make runs in the source tree, which holds the Makefile's sources
        cwd = REPO if command.startswith("make") else self.workdir
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
        if self.verbose:
            print(f"{time.monotonic() - start:6.1f} s  exit {done.returncode}  {command.splitlines()[0]}", flush=True)
        return done.returncode, done.stdout.decode(errors="replace").rstrip("\n").split("\n") if done.stdout else []


def check(readme, list_only, verbose, excerpt):
    text = open(readme, encoding="utf-8").read()
    failures, ran, skipped, used = [], 0, 0, set()
    workdir = tempfile.mkdtemp(prefix="ddpc_newcomer_")
    try:
        runner = Runner(workdir, verbose)
        for start, lines in code_blocks(text):
            if not lines or not (COMMAND_START.match(lines[0]) or paragraph_commands(lines)):
                continue
            if lines[0].startswith("$ "):
                for command, expected in transcript(lines):
                    if list_only:
                        print(f"{readme}:{start}: run and compare: {command.splitlines()[0]}")
                        continue
                    rc, actual = runner.run(command)
                    ran += 1
                    if not matches(expected, actual):
                        failures.append(f"{readme}:{start}: `{command.splitlines()[0]}` printed (exit {rc}):\n  "
                                        + "\n  ".join(actual) + "\nwhere README shows:\n  " + "\n  ".join(expected))
                continue
            for command in commands(paragraph_commands(lines)):
                action = rule_for(command, used)
                if action is None:
                    failures.append(f"{readme}:{start}: no rule in tests/docs/newcomer.py runs or skips `{command}`")
                    continue
                if action.startswith("skip"):
                    skipped += 1
                    if list_only:
                        print(f"{readme}:{start}: {action}: {command}")
                    continue
                line = command + (SHORT if action == "run+short" else "")
                if list_only:
                    print(f"{readme}:{start}: run: {line}")
                    continue
                rc, actual = runner.run(line)
                ran += 1
                if rc != 0:
                    failures.append(f"{readme}:{start}: `{line}` exited {rc}:\n  " + "\n  ".join(actual[-15:]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not excerpt:
        failures += [f"{readme}: names nowhere `{name}`, which the source tree offers" for name in unnamed(text)]
        failures += [f"tests/docs/newcomer.py: the rule `{p}` matches no command of {readme}: remove it"
                     for p, _ in RULES if p not in used]
    for failure in failures:
        print(failure + "\n")
    if not list_only:
        print(f"newcomer: {ran} commands run, {skipped} skipped, {len(failures)} failed: "
              + ("OK" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    flags = sys.argv[2:]
    sys.exit(check(sys.argv[1], "--list" in flags, "--verbose" in flags, "--excerpt" in flags))
