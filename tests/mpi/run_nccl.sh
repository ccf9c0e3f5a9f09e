#!/bin/sh
# run_nccl.sh: the NCCL backend on this machine's GPUs (tests/mpi/nccl_helper.c).
# Needs nvcc, NCCL, MPI and build/libddprt_cuda.a (make); run from the repository
# root. One GPU: the backend alone on one rank; two or more: mpirun across them,
# and the timeout. Prints PASS/FAIL lines; exits non-zero if any rank failed.
set -eu
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "run_nccl.sh: no GPU here"; exit 2; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Iruntime -I"$CUDA_HOME/include" \
   $(mpicc --showme:compile) -DDDP_HAVE_MPI -c tests/mpi/nccl_helper.c -o "$d/nccl_helper.o"
"$CUDA_HOME/bin/nvcc" -o "$d/nccl_helper" "$d/nccl_helper.o" build/libddprt_cuda.a \
   -L"$CUDA_HOME/lib64" -lnccl -lcudart $(mpicc --showme:link) -lgomp -lpthread
status=0
echo "== one GPU, one rank"
"$d/nccl_helper" one || status=1
if [ "$gpus" -ge 2 ]; then
    mpi="mpirun --allow-run-as-root --oversubscribe"
    echo "== $gpus ranks"
    timeout 120 $mpi -np "$gpus" "$d/nccl_helper" collectives || status=1
    echo "== timeout (rank 1 never calls; rank 0 must fail within 2 s, exit 3)"
    out=$(timeout 60 $mpi -np 2 "$d/nccl_helper" timeout 2>&1 || true)
    echo "$out" | grep "rank 0"
    echo "$out" | grep -q "rank 0: PASS timeout" || status=1
fi
[ $status -eq 0 ] && echo "run_nccl.sh: OK" || echo "run_nccl.sh: FAILED"
exit $status
