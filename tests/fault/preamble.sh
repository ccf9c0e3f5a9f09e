# Sourced by the fault scripts, after `set -euo pipefail`, as
#   . "$(cd "$(dirname "$0")" && pwd)/preamble.sh"
# It sets ddpc and python (DDPC and PYTHON, else build/ddpc and Debian's
# python3), here (the scripts' directory), d, a fresh directory where the
# script builds its program as $d/prog, and three command prefixes:
# mpirun_user, the user's own mpirun (the script adds -np N), mpirun2, the
# same for 2 ranks, and with_sigint (below). On exit it kills what the script
# left running: the process whose pid the script put in pid (mpirun, or a
# launcher, started in the background), then every process of $d/prog
# (woken first, should the script have stopped one), waits for them to be
# gone, and removes $d; the script's exit status stays its own.
ddpc=${DDPC:-build/ddpc} python=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
d=$(mktemp -d)
mpirun_user=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" != 0 ] || mpirun_user+=(--allow-run-as-root)
mpirun2=("${mpirun_user[@]}" -np 2)
# A background job of a script starts with SIGINT ignored, which the program
# keeps (as nohup's users expect). with_sigint COMMAND... runs COMMAND with
# SIGINT's default restored, from a python that becomes COMMAND (the same
# pid, for the script's kill and wait). Open MPI starts its ranks with the
# default anyway; our launcher takes a SIGINT whatever it inherits.
with_sigint=("$python" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')
pid=
# The script's status is its verdict: the cleanup keeps it (a command that
# failed here, under set -e, would have become the script's status).
fault_cleanup() {
    local status=$? i
    { [ -z "$pid" ] || kill -KILL "$pid"; } 2> /dev/null || true  # (set -e: a process gone already is fine)
    pkill -CONT -f "$d/prog" 2> /dev/null || true
    pkill -KILL -f "$d/prog" 2> /dev/null || true
    for i in $(seq 50); do  # gone before their directory goes
        pgrep -f "$d/prog" > /dev/null || break
        sleep 0.1
        pkill -KILL -f "$d/prog" 2> /dev/null || true  # (one a launcher started meanwhile)
    done
    rm -rf "$d" || echo "fault cleanup: could not remove $d" >&2
    exit "$status"
}
trap fault_cleanup EXIT

# rank_pid PROG RANK prints the pid of the process running PROG that mpirun
# made rank RANK (its environment says OMPI_COMM_WORLD_RANK=RANK), or
# nothing while there is none.
rank_pid() {
    local p
    for p in $(pgrep -f "$1" || true); do
        if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
            echo "$p"
            return
        fi
    done
}
