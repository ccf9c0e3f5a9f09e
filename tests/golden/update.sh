#!/usr/bin/env bash
# Regenerates the pinned outputs of the golden tests from the current ddpc:
#   bad/NAME.net  -> bad/NAME.expected   (ddpc --check NAME.net: messages, exit 2)
#   good/NAME.net and examples/NAME.net -> good/NAME.summary (ddpc --summary)
#   plan/NAME.net -> plan/NAME.plan (ddpc --emit plan)
# Review the result with `git diff tests/golden` before committing: these
# files are the contract the tests hold ddpc to.
set -eu
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
