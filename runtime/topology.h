/*
 * topology.h: how a rank learns who it is.
 *
 * The topology comes from the first of: the program's flags (--rank,
 * --world-size, --init-method tcp://HOST:PORT), torchrun's environment
 * (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * mpirun's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), srun's
 * (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE).
 * With none of them the run is one rank. How the ranks then find each other is
 * store.h's.
 */
#ifndef DDPRT_TOPOLOGY_H
#define DDPRT_TOPOLOGY_H

#include <stdint.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

/* The largest world a run may have (--world-size, WORLD_SIZE, a checkpoint's),
 * and so the largest ddpc --emit plan --world predicts. */
#define DDP_MAX_RANKS 65536

typedef enum {
    DDP_LAUNCH_NONE,     /* one rank, nothing set */
    DDP_LAUNCH_FLAGS,    /* --rank/--world-size and --init-method */
    DDP_LAUNCH_TORCHRUN, /* env:// */
    DDP_LAUNCH_MPIRUN,
    DDP_LAUNCH_SRUN,
    DDP_LAUNCH_SPAWN,    /* a child of --nproc-per-node (it sets torchrun's variables) */
} DdpLaunch;

typedef struct {
    int rank, world_size;
    int local_rank, local_world_size;
    char master_addr[256]; /* where rank 0 serves the store; "" when not needed (MPI) */
    int master_port;
    DdpLaunch launch;
    /* torchrun's TORCHELASTIC_RESTART_COUNT (its agent's restarts of this
     * node's ranks so far), or -1 when no torchrun agent started us, or
     * --rank/--world-size overrule its world */
    int restart;
    /* A Slurm batch script's own shell (SLURM_PROCID without
     * SLURM_STEP_NUM_TASKS: no srun task, so launch NONE): its job's nodes
     * (SLURM_JOB_NUM_NODES, else SLURM_NNODES, else 1); 0 elsewhere */
    int slurm_batch_nodes;
    /* The processes mpirun started (OMPI_COMM_WORLD_SIZE), whatever set
     * this rank's place: flags that overrule mpirun's ranks still run in
     * each of them (ddp_dist_ranks_to_launch). 0 where mpirun did not start us. */
    int mpirun_world;
} DdpTopology;

/* Reads the topology from the flags given (rank/world_size -1 when absent,
 * init_method NULL when absent) and the environment, checking every value
 * (a rank outside the world, a port that is not one, a world of 0):
 * DDP_BAD_INPUT naming the variable or flag.
 *
 * The first source that says anything wins: flags (--init-method tcp://
 * requires --rank and --world-size; a flag missing beside env:// or alone is
 * taken from the launcher's environment), then torchrun's variables (with
 * DDP_SPAWNED=1 a child of ddp_launch_local), then mpirun's, then srun's, then
 * one rank. --init-method env:// with no launcher's variables is an error. A
 * Slurm batch script's own shell is no srun task (it lacks
 * SLURM_STEP_NUM_TASKS): one rank, its job's nodes in slurm_batch_nodes (a
 * run there would use one of them). srun's step of one
 * task is one rank as with no launcher (DDP_LAUNCH_NONE), which may start
 * its own, except under --init-method env://.
 * Where the source says nothing of local ranks, local_rank = rank and
 * local_world_size = world_size (one node). master_addr is required for
 * several ranks except under mpirun (MPI carries the start-up there); under
 * srun it defaults to SLURM_LAUNCH_NODE_IPADDR and the port to 29500 +
 * SLURM_JOB_ID % 10000. master_port is 0 when master_addr is "". Under
 * torchrun with TORCHELASTIC_USE_AGENT_STORE=True, its agent already serves
 * a PyTorch store on MASTER_PORT, so master_port is MASTER_PORT + 1. */
DdpStatus ddp_topology_read(DdpTopology *t, int64_t flag_rank, int64_t flag_world_size, const char *init_method);

/* What made this process a rank under LAUNCH, in words for messages, with
 * what told it so ("torchrun (RANK and WORLD_SIZE are set) started this
 * rank"); NULL for DDP_LAUNCH_NONE. */
const char *ddp_topology_started_by(DdpLaunch launch);

/* MASTER_ADDR and MASTER_PORT as this process's environment has them,
 * checked as a rank of several checks them (ddp_topology_read), half of
 * the pair refused: for a launcher to refuse once what every rank would,
 * and under mpirun, where no rank is refused for it, for the note. */
DdpStatus ddp_topology_check_master_env(void);

#ifdef __cplusplus
}
#endif

#endif
