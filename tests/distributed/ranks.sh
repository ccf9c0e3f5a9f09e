# Sourced by the distributed test scripts: one way to start a program on
# some ranks.
#   run_on_ranks RANKS PROGRAM ARGS...
# One rank runs alone, on every thread of the machine; more run under
# mpirun, one OpenMP thread each (the CPU build's results do not depend on
# the thread count). The program's status is the function's.
run_on_ranks() {
    local ranks=$1
    shift
    if [ "$ranks" = 1 ]; then
        "$@"
    else
        OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks" -x OMP_NUM_THREADS "$@"
    fi
}
