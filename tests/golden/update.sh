#!/usr/bin/env bash
# Regenerates the pinned outputs of the golden tests from the current ddpc:
#   bad/NAME.net  -> bad/NAME.expected   (ddpc --check NAME.net: messages, exit 2)
#   good/NAME.net and examples/NAME.net -> good/NAME.summary (ddpc --summary)
#   plan/NAME.net -> plan/NAME.plan (ddpc --emit plan)
#   examples/, tests/parity/, tests/gradcheck/ and good/ NAME.net -> cu/NAME.cu (ddpc --emit cu
#     --target cpu, less its "// ddpc-build:" line, which names this machine's paths)
#   tests/layout/NAME.net -> nhwc/NAME.cu (the same, channels-last: --layout nhwc)
# Review the result with `git diff tests/golden` before committing: these
# files are the contract the tests hold ddpc to.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ddpc=${DDPC:-$here/../../build/ddpc}
cd "$here/bad"
for f in *.net; do
    "$ddpc" --check "$f" > "${f%.net}.expected" 2>&1 || true
done
cd "$here/good"
for f in *.net; do
    "$ddpc" --summary "$f" > "${f%.net}.summary" 2>&1
done
cd "$here/plan"
for f in *.net; do
    "$ddpc" "$f" --emit plan > "${f%.net}.plan" 2>&1
done
cd "$here/../../examples"
for f in *.net; do
    "$ddpc" --summary "$f" > "$here/good/${f%.net}.summary" 2>&1
done
mkdir -p "$here/cu"
rm -f "$here"/cu/*.cu
for dir in "$here/../../examples" "$here/../parity" "$here/../gradcheck" "$here/good"; do
    cd "$dir"
    for f in *.net; do
        if [ -e "$here/cu/${f%.net}.cu" ]; then # one directory holds them all
            echo "update.sh: two nets named ${f%.net}: rename one" >&2
            exit 1
        fi
        "$ddpc" --emit cu --target cpu "$f" | grep -v '^// ddpc-build: ' > "$here/cu/${f%.net}.cu"
    done
done
mkdir -p "$here/nhwc"
rm -f "$here"/nhwc/*.cu
cd "$here/../layout"
for f in *.net; do
    "$ddpc" --emit cu --target cpu --layout nhwc "$f" | grep -v '^// ddpc-build: ' > "$here/nhwc/${f%.net}.cu"
done
