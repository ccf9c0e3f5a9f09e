#!/usr/bin/env bash
# digest.sh: one line naming the sources a GPU kit is built from (the
# compiler, the grammar, the runtime, the nets (tests/layout's too), the kit's own scripts and
# tools; not run.sh, its timing.sh and that one's test stubs, which only use the kit), so that tests/gpu/run.sh can tell a kit built from these sources
# from a stale one, here and on the GPU node, where the same files travel.
# Run from the repository root.
set -euo pipefail
find compiler grammar runtime examples tests/parity tests/layout tests/gpu tests/mpi/nccl_helper.c Makefile \
     -type f ! -path tests/gpu/run.sh ! -path 'tests/gpu/timing*.sh' \( -name '*.[chly]' -o -name '*.cu' -o -name '*.net' -o -name '*.sh' -o -name Makefile \) |
    LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
