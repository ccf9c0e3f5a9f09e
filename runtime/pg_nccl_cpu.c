/*
 * pg_nccl_cpu.c: the CPU library's stand-in for pg_nccl.cu.
 *
 * A CPU program has no GPU and links no NCCL, but pg.c names the NCCL
 * backend; this file gives it the same symbols, so one pg.c serves both
 * libraries (as device_cpu.c does for device_cuda.cu). Asking for NCCL here
 * fails with a message saying how to get it.
 */
#include "pg.h"  // ddp_pg_nccl_open

DdpStatus ddp_pg_nccl_open(const DdpTopology *t, DdpStore *store, void *stream, double timeout_s,
                           const DdpPgBackendOps **ops, void **impl)
{
    (void)t;
    (void)store;
    (void)stream;
    (void)timeout_s;
    *ops = NULL;
    *impl = NULL;
    return DDP_ERR(DDP_BAD_INPUT,
                   "this program was built for CPUs; NCCL needs --target cuda (use --backend mpi for CPU ranks)");
}
