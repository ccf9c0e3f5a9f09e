# Sourced by the fault scripts: rank_pid PROG RANK prints the pid of the
# process running PROG that mpirun made rank RANK (its environment says
# OMPI_COMM_WORLD_RANK=RANK), or nothing while there is none.
rank_pid() {
    local p
    for p in $(pgrep -f "$1" || true); do
        if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
            echo "$p"
            return
        fi
    done
}
