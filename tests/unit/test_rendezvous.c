/*
 * Tests of runtime/topology.c (ddp_topology_read): the topology as each
 * launcher announces it (torchrun, our own --nproc-per-node, mpirun, srun,
 * the flags), which one wins when several are present, and every message
 * for a value that is wrong, pinned by the words a user would search for:
 * the variable's name and its value.
 *
 * Each test sets the environment it describes on a clean slate: every
 * launcher variable of the runner's own environment is saved before and put
 * back after, so the suite runs the same inside a SLURM job or under mpirun.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology.h"  // ddp_topology_read
#include "testutil.h"

static const char *const launcher_vars[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
    "DDP_SPAWNED", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID",
    "SLURM_LAUNCH_NODE_IPADDR", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "TORCHELASTIC_USE_AGENT_STORE",
};
enum { NVARS = sizeof launcher_vars / sizeof launcher_vars[0] };
static char *saved[NVARS];

/* Sets the environment to ENV ("NAME=VALUE NAME=VALUE ...", values without
 * spaces) and nothing else of the launchers'; the runner's values saved. */
static void set_env(const char *env)
{
    static int have_saved;
    for (int i = 0; i < NVARS; i++) {
        if (!have_saved) {
            const char *v = getenv(launcher_vars[i]);
            saved[i] = v ? strdup(v) : NULL;
        }
        unsetenv(launcher_vars[i]);
    }
    have_saved = 1;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            continue;
        *eq = '\0';
        setenv(tok, eq + 1, 1);
    }
}

static void restore_env(void)
{
    for (int i = 0; i < NVARS; i++) {
        if (saved[i])
            setenv(launcher_vars[i], saved[i], 1);
        else
            unsetenv(launcher_vars[i]);
    }
}

/* Reads the topology with ENV and the flags; restores the environment. */
static DdpStatus topo(DdpTopology *t, const char *env, int64_t rank, int64_t world, const char *init)
{
    set_env(env);
    ddp_error_clear();
    DdpStatus st = ddp_topology_read(t, rank, world, init);
    restore_env();
    return st;
}

static int expect(const DdpTopology *t, int rank, int world, int local_rank, int local_world, const char *addr,
                  int port, DdpLaunch launch)
{
    if (t->rank == rank && t->world_size == world && t->local_rank == local_rank &&
        t->local_world_size == local_world && strcmp(t->master_addr, addr) == 0 && t->master_port == port &&
        t->launch == launch)
        return 1;
    fprintf(stderr, "\ngot rank %d/%d local %d/%d master '%s':%d launch %d\n", t->rank, t->world_size,
            t->local_rank, t->local_world_size, t->master_addr, t->master_port, (int)t->launch);
    return 0;
}

/* ddp_topology_read fails with DDP_BAD_INPUT and a message holding WHAT. */
static int fails(const char *env, int64_t rank, int64_t world, const char *init, const char *what)
{
    DdpTopology t;
    DdpStatus st = topo(&t, env, rank, world, init);
    if (st == DDP_BAD_INPUT && strstr(ddp_error_message(), what))
        return 1;
    fprintf(stderr, "\n[%s | %lld %lld %s]: status %d, message \"%s\", expected \"%s\"\n", env, (long long)rank,
            (long long)world, init ? init : "-", (int)st, ddp_error_message(), what);
    return 0;
}

static void test_none(void)
{
    DdpTopology t;
    CU_ASSERT(topo(&t, "", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_NONE));
    /* What a one-rank run leaves set changes nothing. */
    CU_ASSERT(topo(&t, "MASTER_ADDR=localhost MASTER_PORT=1234", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_NONE));
}

static void test_torchrun(void)
{
    DdpTopology t;
    CU_ASSERT(topo(&t, "RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 "
                       "MASTER_ADDR=node-a.cluster MASTER_PORT=29500", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 3, 4, 1, 2, "node-a.cluster", 29500, DDP_LAUNCH_TORCHRUN));
    CU_ASSERT_EQUAL(t.restart, -1); /* no torchrun agent */
    /* torchrun's count of its restarts, for --resume PATH (trainer.c) */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=7 TORCHELASTIC_RESTART_COUNT=2", -1, -1,
                   NULL) == DDP_OK);
    CU_ASSERT_EQUAL(t.restart, 2);
    /* ...not ours once flags overrule torchrun's world */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=7 TORCHELASTIC_RESTART_COUNT=2", -1, 4,
                   NULL) == DDP_OK);
    CU_ASSERT_EQUAL(t.restart, -1);
    CU_ASSERT(fails("RANK=1 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=7 TORCHELASTIC_RESTART_COUNT=-1", -1, -1, NULL,
                    "TORCHELASTIC_RESTART_COUNT=-1: a count is 0 or more"));
    CU_ASSERT(fails("RANK=1 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=7 TORCHELASTIC_RESTART_COUNT=x", -1, -1, NULL,
                    "TORCHELASTIC_RESTART_COUNT='x' is not a whole number"));
    /* env:// says the same. */
    CU_ASSERT(topo(&t, "RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 "
                       "MASTER_PORT=29500", -1, -1, "env://") == DDP_OK);
    CU_ASSERT(expect(&t, 3, 4, 1, 2, "10.0.0.1", 29500, DDP_LAUNCH_TORCHRUN));
    /* Without local ranks: one node. */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=80", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "127.0.0.1", 80, DDP_LAUNCH_TORCHRUN));
    /* A world of one needs no store. */
    CU_ASSERT(topo(&t, "RANK=0 WORLD_SIZE=1", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_TORCHRUN));
    /* torchrun's agent serving its own store on MASTER_PORT: ours takes the next. */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=29500 TORCHELASTIC_USE_AGENT_STORE=True", -1,
                   -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "h", 29501, DDP_LAUNCH_TORCHRUN));
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=29500 TORCHELASTIC_USE_AGENT_STORE=False", -1,
                   -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "h", 29500, DDP_LAUNCH_TORCHRUN));
    /* IPv6 addresses pass as they are. */
    CU_ASSERT(topo(&t, "RANK=0 WORLD_SIZE=2 MASTER_ADDR=::1 MASTER_PORT=65535", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 2, 0, 2, "::1", 65535, DDP_LAUNCH_TORCHRUN));
}

static void test_spawned(void)
{
    DdpTopology t;
    CU_ASSERT(topo(&t, "RANK=2 LOCAL_RANK=2 WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 "
                       "MASTER_PORT=41000 DDP_SPAWNED=1", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 2, 3, 2, 3, "127.0.0.1", 41000, DDP_LAUNCH_SPAWN));
    /* Only "1" marks a spawned child. */
    CU_ASSERT(topo(&t, "RANK=0 WORLD_SIZE=1 DDP_SPAWNED=0", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(t.launch == DDP_LAUNCH_TORCHRUN);
}

static void test_mpirun(void)
{
    DdpTopology t;
    CU_ASSERT(topo(&t, "OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_LOCAL_RANK=1 "
                       "OMPI_COMM_WORLD_LOCAL_SIZE=4", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 5, 8, 1, 4, "", 0, DDP_LAUNCH_MPIRUN));
    CU_ASSERT(topo(&t, "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 MASTER_ADDR=host1 MASTER_PORT=1234", -1, -1,
                   NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "host1", 1234, DDP_LAUNCH_MPIRUN));
    CU_ASSERT_EQUAL(t.mpirun_world, 2);
    /* Under mpirun half of the address is no error, MPI carrying the
     * start-up: only the hang's name is lost, which the ranks note
     * (tests/fault/store_unusable.sh half) with what the launcher's check
     * says, which refuses either half. */
    static const char *const halves[][2] = {{"MASTER_PORT=1234", "MASTER_PORT=1234 is set but MASTER_ADDR is not"},
                                            {"MASTER_ADDR=h", "MASTER_ADDR=h is set but MASTER_PORT is not"}};
    for (int i = 0; i < 2; i++) {
        char env[128];
        snprintf(env, sizeof env, "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 %s", halves[i][0]);
        CU_ASSERT(topo(&t, env, -1, -1, NULL) == DDP_OK);
        CU_ASSERT(expect(&t, 1, 2, 1, 2, "", 0, DDP_LAUNCH_MPIRUN));
        set_env(halves[i][0]);
        CU_ASSERT_EQUAL(ddp_topology_check_master_env(), DDP_BAD_INPUT);
        CU_ASSERT_STRING_EQUAL(ddp_error_message(), halves[i][1]);
        restore_env();
    }
    set_env("MASTER_ADDR=h MASTER_PORT=1");
    CU_ASSERT_EQUAL(ddp_topology_check_master_env(), DDP_OK);
    restore_env();
    /* flags that overrule mpirun's ranks leave the count of its processes */
    CU_ASSERT(topo(&t, "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3", 0, 1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_FLAGS));
    CU_ASSERT_EQUAL(t.mpirun_world, 3);
    CU_ASSERT(topo(&t, "RANK=0 WORLD_SIZE=1", -1, -1, NULL) == DDP_OK);
    CU_ASSERT_EQUAL(t.mpirun_world, 0);
}

static void test_srun(void)
{
    DdpTopology t;
    CU_ASSERT(topo(&t, "SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=8 SLURM_LOCALID=1 SLURM_TASKS_PER_NODE=4(x2) SLURM_NODEID=1 "
                       "SLURM_LAUNCH_NODE_IPADDR=10.0.0.7 SLURM_JOB_ID=1234567", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 5, 8, 1, 4, "10.0.0.7", 29500 + 5670, DDP_LAUNCH_SRUN));
    /* The job's third step (srun ... & srun ... & in one job script): a port
     * of its own; steps ten apart share one */
    CU_ASSERT(topo(&t, "SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=8 SLURM_LOCALID=1 SLURM_TASKS_PER_NODE=4(x2) SLURM_NODEID=1 "
                       "SLURM_LAUNCH_NODE_IPADDR=10.0.0.7 SLURM_JOB_ID=1234567 SLURM_STEP_ID=2", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 5, 8, 1, 4, "10.0.0.7", 29500 + 5672, DDP_LAUNCH_SRUN));
    CU_ASSERT(topo(&t, "SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=8 SLURM_LOCALID=1 SLURM_TASKS_PER_NODE=4(x2) SLURM_NODEID=1 "
                       "SLURM_LAUNCH_NODE_IPADDR=10.0.0.7 SLURM_JOB_ID=1234999 SLURM_STEP_ID=12", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 5, 8, 1, 4, "10.0.0.7", 29500 + 9992, DDP_LAUNCH_SRUN));
    /* Uneven nodes: the last has one task; MASTER_* win over srun's own. */
    CU_ASSERT(topo(&t, "SLURM_PROCID=6 SLURM_STEP_NUM_TASKS=7 SLURM_LOCALID=0 SLURM_TASKS_PER_NODE=2(x3),1 SLURM_NODEID=3 "
                       "SLURM_LAUNCH_NODE_IPADDR=10.0.0.7 MASTER_ADDR=n0 MASTER_PORT=5000", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 6, 7, 0, 1, "n0", 5000, DDP_LAUNCH_SRUN));
    /* The step's layout first: sbatch --ntasks-per-node 4, then srun -n 2,
     * puts 2 on the node, whatever the job's SLURM_NTASKS_PER_NODE says. */
    CU_ASSERT(topo(&t, "SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=2 SLURM_LOCALID=1 SLURM_NTASKS_PER_NODE=4 "
                       "SLURM_STEP_TASKS_PER_NODE=2 SLURM_TASKS_PER_NODE=4 MASTER_ADDR=n0", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "n0", 29500, DDP_LAUNCH_SRUN));
    CU_ASSERT(topo(&t, "SLURM_PROCID=3 SLURM_STEP_NUM_TASKS=4 SLURM_LOCALID=0 SLURM_NODEID=1 "
                       "SLURM_STEP_TASKS_PER_NODE=3,1 SLURM_NTASKS_PER_NODE=4 MASTER_ADDR=n0", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 3, 4, 0, 1, "n0", 29500, DDP_LAUNCH_SRUN));
    /* Else SLURM_NTASKS_PER_NODE; the step's task count, not the job's SLURM_NTASKS. */
    CU_ASSERT(topo(&t, "SLURM_PROCID=2 SLURM_NTASKS=16 SLURM_STEP_NUM_TASKS=4 SLURM_LOCALID=0 "
                       "SLURM_NTASKS_PER_NODE=2 SLURM_TASKS_PER_NODE=garbage MASTER_ADDR=n0", -1, -1,
                   NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 2, 4, 0, 2, "n0", 29500, DDP_LAUNCH_SRUN));
    /* Uniform nodes need no SLURM_NODEID. */
    CU_ASSERT(topo(&t, "SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=4 SLURM_LOCALID=1 SLURM_TASKS_PER_NODE=2(x2) "
                       "MASTER_ADDR=n0", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 4, 1, 2, "n0", 29500, DDP_LAUNCH_SRUN));
    /* A step of one task (srun --gpus 4 --pty bash, then ./OUT) has no ranks
     * to join: the process starts its own, as with no launcher; env:// asks
     * for a launcher's rank, rank 0 of 1. */
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 SLURM_LOCALID=0 SLURM_TASKS_PER_NODE=1", -1, -1, NULL) ==
              DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_NONE));
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 SLURM_LOCALID=0 SLURM_TASKS_PER_NODE=1", -1, -1,
                   "env://") == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_SRUN));
}

/* A Slurm batch script's own shell (sbatch sets SLURM_PROCID=0 and the job's
 * SLURM_NTASKS there, but none of a step's SLURM_STEP_* variables) is no
 * srun task: a program started there directly is one process, which starts
 * its node's ranks itself, as in a job of one task and 4 GPUs. */
static void test_slurm_batch_shell(void)
{
    DdpTopology t;
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_TASKS_PER_NODE=4 "
                       "SLURM_JOB_NUM_NODES=1 SLURM_NNODES=1 SLURM_JOB_ID=77", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_NONE));
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 1);
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_NTASKS=1", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_NONE));
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 1);
    /* The job's nodes, which ddp_dist_ranks_to_launch refuses a training
     * for where they are several: SLURM_JOB_NUM_NODES, else SLURM_NNODES. */
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_NTASKS=16 SLURM_JOB_NUM_NODES=2 MASTER_ADDR=n0 MASTER_PORT=1", -1, -1,
                   NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_NONE));
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 2);
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_NNODES=3", -1, -1, NULL) == DDP_OK);
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 3);
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_JOB_NUM_NODES=1 SLURM_NNODES=2", -1, -1, NULL) == DDP_OK);
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 1);
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_JOB_NUM_NODES=two", -1, -1, NULL,
                    "SLURM_JOB_NUM_NODES='two' is not a whole number"));
    /* the flags make it a rank by hand, of any world */
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_NTASKS=16 SLURM_JOB_NUM_NODES=2 MASTER_ADDR=n0 MASTER_PORT=7", 1, 2,
                   NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "n0", 7, DDP_LAUNCH_FLAGS));
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 0);
    CU_ASSERT(topo(&t, "SLURM_PROCID=0 SLURM_JOB_NUM_NODES=2", -1, 1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_FLAGS));
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 0);
    /* a launcher run inside the batch job, the program's own ranks
     * included, reads its own variables first */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1 SLURM_PROCID=0 SLURM_NTASKS=8 "
                       "SLURM_JOB_NUM_NODES=2", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "a", 1, DDP_LAUNCH_TORCHRUN));
    CU_ASSERT(topo(&t, "DDP_SPAWNED=1 RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=a "
                       "MASTER_PORT=1 SLURM_PROCID=0 SLURM_NTASKS=8 SLURM_JOB_NUM_NODES=2", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "a", 1, DDP_LAUNCH_SPAWN));
    CU_ASSERT(topo(&t, "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=8 "
                       "SLURM_JOB_NUM_NODES=2", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "", 0, DDP_LAUNCH_MPIRUN));
    CU_ASSERT_EQUAL(t.slurm_batch_nodes, 0);
    /* env:// asks for a launcher, which a batch script's shell is not. */
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_NTASKS=1", -1, -1, "env://",
                    "--init-method env:// but no launcher's variables are set"));
}

static void test_precedence(void)
{
    DdpTopology t;
    /* torchrun's agent under mpirun (one a node) gives its workers their own */
    const char *all = "RANK=1 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1 TORCHELASTIC_RUN_ID=x OMPI_COMM_WORLD_RANK=3 "
                      "OMPI_COMM_WORLD_SIZE=4 SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=6";
    CU_ASSERT(topo(&t, all, -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "a", 1, DDP_LAUNCH_TORCHRUN));
    /* without one, RANK and WORLD_SIZE that mpirun's contradict were left in
     * the environment: each rank would run alone */
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", -1, -1, NULL,
                    "RANK=0 and WORLD_SIZE=1 are set, as torchrun sets them, but mpirun started this process as rank "
                    "1 of 2 (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), and no torchrun agent (no "
                    "TORCHELASTIC_RUN_ID): unset RANK and WORLD_SIZE, left in the environment"));
    /* with mpirun's own values (a script exported them from OMPI_COMM_WORLD_*):
     * mpirun's ranks, whose MPI a CPU build needs, MASTER_* optional */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2",
                   -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "a", 1, DDP_LAUNCH_MPIRUN));
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", -1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "", 0, DDP_LAUNCH_MPIRUN));
    CU_ASSERT(topo(&t, "OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=6", -1, -1,
                   NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 3, 4, 3, 4, "", 0, DDP_LAUNCH_MPIRUN));
    /* Flags over everything. */
    CU_ASSERT(topo(&t, all, 0, 3, "tcp://127.0.0.1:1234") == DDP_OK);
    CU_ASSERT(expect(&t, 0, 3, 0, 3, "127.0.0.1", 1234, DDP_LAUNCH_FLAGS));
}

static void test_flags(void)
{
    DdpTopology t;
    CU_ASSERT(topo(&t, "", 1, 2, "tcp://127.0.0.1:29500") == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "127.0.0.1", 29500, DDP_LAUNCH_FLAGS));
    CU_ASSERT(topo(&t, "", 0, 2, "tcp://[::1]:29501") == DDP_OK);
    CU_ASSERT(expect(&t, 0, 2, 0, 2, "::1", 29501, DDP_LAUNCH_FLAGS));
    /* Local ranks from torchrun's names when they are set. */
    CU_ASSERT(topo(&t, "LOCAL_RANK=1 LOCAL_WORLD_SIZE=2", 3, 4, "tcp://h:9") == DDP_OK);
    CU_ASSERT(expect(&t, 3, 4, 1, 2, "h", 9, DDP_LAUNCH_FLAGS));
    /* --rank/--world-size with the address from the environment. */
    CU_ASSERT(topo(&t, "MASTER_ADDR=h MASTER_PORT=7", 1, 2, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "h", 7, DDP_LAUNCH_FLAGS));
    CU_ASSERT(topo(&t, "MASTER_ADDR=h MASTER_PORT=7", 1, 2, "env://") == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "h", 7, DDP_LAUNCH_FLAGS));
    /* ...local ranks from torchrun's names there too (rank 5 of 8, the
     * second of its node's 4: GPU 1, not a GPU 5 that is not there) */
    CU_ASSERT(topo(&t, "LOCAL_RANK=1 LOCAL_WORLD_SIZE=4 MASTER_ADDR=h MASTER_PORT=7", 5, 8, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 5, 8, 1, 4, "h", 7, DDP_LAUNCH_FLAGS));
    CU_ASSERT(topo(&t, "LOCAL_RANK=1 LOCAL_WORLD_SIZE=4 MASTER_ADDR=h MASTER_PORT=7", 5, 8, "env://") == DDP_OK);
    CU_ASSERT(expect(&t, 5, 8, 1, 4, "h", 7, DDP_LAUNCH_FLAGS));
    CU_ASSERT(fails("LOCAL_RANK=4 LOCAL_WORLD_SIZE=4 MASTER_ADDR=h MASTER_PORT=7", 5, 8, NULL,
                    "LOCAL_RANK=4 but LOCAL_WORLD_SIZE=4 (ranks are 0 to 3)"));
    CU_ASSERT(topo(&t, "", -1, 1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 0, 1, 0, 1, "", 0, DDP_LAUNCH_FLAGS));
    /* Flags that restate the launcher leave it in charge... */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=h MASTER_PORT=7", 1, 2,
                   NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 0, 1, "h", 7, DDP_LAUNCH_TORCHRUN));
    /* ...flags that differ take over, the launcher filling in the rest. */
    CU_ASSERT(topo(&t, "RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=h MASTER_PORT=7", -1, 4,
                   NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 4, 1, 4, "h", 7, DDP_LAUNCH_FLAGS));
    CU_ASSERT(topo(&t, "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", 1, -1, NULL) == DDP_OK);
    CU_ASSERT(expect(&t, 1, 2, 1, 2, "", 0, DDP_LAUNCH_MPIRUN));
}

static void test_env_errors(void)
{
    const char *m = "MASTER_ADDR=h MASTER_PORT=1";
    char env[512];
#define WITH_M(s) (snprintf(env, sizeof env, "%s %s", s, m), env)
    CU_ASSERT(fails(WITH_M("RANK=abc WORLD_SIZE=2"), -1, -1, NULL, "RANK='abc' is not a whole number"));
    CU_ASSERT(fails(WITH_M("RANK=1 WORLD_SIZE=2x"), -1, -1, NULL, "WORLD_SIZE='2x' is not a whole number"));
    CU_ASSERT(fails(WITH_M("RANK=+1 WORLD_SIZE=2"), -1, -1, NULL, "RANK='+1' is not a whole number"));
    CU_ASSERT(fails(WITH_M("RANK= WORLD_SIZE=2"), -1, -1, NULL, "RANK='' is not a whole number"));
    CU_ASSERT(fails(WITH_M("RANK=99999999999999999999 WORLD_SIZE=2"), -1, -1, NULL,
                    "RANK='99999999999999999999' is far out of range"));
    CU_ASSERT(fails(WITH_M("RANK=5 WORLD_SIZE=2"), -1, -1, NULL, "RANK=5 but WORLD_SIZE=2 (ranks are 0 to 1)"));
    CU_ASSERT(fails(WITH_M("RANK=-1 WORLD_SIZE=2"), -1, -1, NULL, "RANK=-1 but WORLD_SIZE=2"));
    CU_ASSERT(fails(WITH_M("RANK=0 WORLD_SIZE=0"), -1, -1, NULL, "WORLD_SIZE=0: a run needs at least one rank"));
    CU_ASSERT(fails(WITH_M("RANK=0 WORLD_SIZE=65537"), -1, -1, NULL,
                    "WORLD_SIZE=65537 is more than the 65536 ranks a run may have"));
    CU_ASSERT(fails("RANK=1", -1, -1, NULL, "RANK=1 is set but WORLD_SIZE is not"));
    CU_ASSERT(fails("WORLD_SIZE=2", -1, -1, NULL, "WORLD_SIZE=2 is set but RANK is not"));
    CU_ASSERT(fails(WITH_M("RANK=0 WORLD_SIZE=4 LOCAL_RANK=2 LOCAL_WORLD_SIZE=2"), -1, -1, NULL,
                    "LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2 (ranks are 0 to 1)"));
    CU_ASSERT(fails(WITH_M("RANK=0 WORLD_SIZE=4 LOCAL_RANK=4"), -1, -1, NULL, "LOCAL_RANK=4 but WORLD_SIZE=4"));
    CU_ASSERT(fails(WITH_M("RANK=0 WORLD_SIZE=4 LOCAL_WORLD_SIZE=8"), -1, -1, NULL,
                    "LOCAL_WORLD_SIZE=8 but WORLD_SIZE=4: a node cannot run more ranks than the world has"));
    CU_ASSERT(fails(WITH_M("RANK=0 WORLD_SIZE=4 LOCAL_WORLD_SIZE=0"), -1, -1, NULL,
                    "LOCAL_WORLD_SIZE=0: a node runs at least one rank"));
    CU_ASSERT(fails(WITH_M("RANK=0 WORLD_SIZE=4 LOCAL_RANK=x"), -1, -1, NULL, "LOCAL_RANK='x' is not a whole number"));

    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=abc", -1, -1, NULL,
                    "MASTER_PORT='abc' is not a port number (1 to 65535)"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=0", -1, -1, NULL, "MASTER_PORT='0' is not a port"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=65536", -1, -1, NULL,
                    "MASTER_PORT='65536' is not a port"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=-5", -1, -1, NULL, "MASTER_PORT='-5' is not a port"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR= MASTER_PORT=5", -1, -1, NULL, "MASTER_ADDR is empty"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=tcp://h MASTER_PORT=5", -1, -1, NULL,
                    "MASTER_ADDR='tcp://h' is not a host name or address"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2", -1, -1, NULL,
                    "WORLD_SIZE=2 but MASTER_ADDR is not set: set MASTER_ADDR and MASTER_PORT"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=h", -1, -1, NULL, "MASTER_ADDR=h is set but MASTER_PORT is not"));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_PORT=5", -1, -1, NULL, "MASTER_PORT=5 is set but MASTER_ADDR is not"));
    /* A variable's value is checked even where it goes unused. */
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=1 MASTER_PORT=x", -1, -1, NULL, "MASTER_PORT='x' is not a port"));

    CU_ASSERT(fails("OMPI_COMM_WORLD_RANK=4 OMPI_COMM_WORLD_SIZE=4", -1, -1, NULL,
                    "OMPI_COMM_WORLD_RANK=4 but OMPI_COMM_WORLD_SIZE=4 (ranks are 0 to 3)"));
    CU_ASSERT(fails("OMPI_COMM_WORLD_RANK=1", -1, -1, NULL,
                    "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"));
    CU_ASSERT(fails("OMPI_COMM_WORLD_SIZE=1", -1, -1, NULL,
                    "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"));
    CU_ASSERT(fails("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=3 "
                    "OMPI_COMM_WORLD_LOCAL_SIZE=2", -1, -1, NULL,
                    "OMPI_COMM_WORLD_LOCAL_RANK=3 but OMPI_COMM_WORLD_LOCAL_SIZE=2"));
    CU_ASSERT(fails("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 MASTER_ADDR=h", 1, 2, NULL,
                    "MASTER_ADDR=h is set but MASTER_PORT is not")); /* the flags' ranks meet through the store */
    CU_ASSERT(fails("OMPI_COMM_WORLD_SIZE=x OMPI_COMM_WORLD_RANK=0", 0, 1, "tcp://h:1",
                    "OMPI_COMM_WORLD_SIZE='x' is not a whole number"));

    CU_ASSERT(fails("SLURM_PROCID=2 SLURM_STEP_NUM_TASKS=2", -1, -1, NULL, "SLURM_PROCID=2 but SLURM_STEP_NUM_TASKS=2"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 SLURM_TASKS_PER_NODE=4(y2)", -1, -1, NULL,
                    "SLURM_TASKS_PER_NODE='4(y2)' does not say how many tasks each node runs"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=3 SLURM_TASKS_PER_NODE=2,1", -1, -1, NULL,
                    "SLURM_TASKS_PER_NODE='2,1' does not say"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4 SLURM_TASKS_PER_NODE=2(x2) SLURM_NODEID=2", -1, -1, NULL,
                    "SLURM_TASKS_PER_NODE='2(x2)' does not say how many tasks this node runs"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=8 SLURM_LOCALID=4 SLURM_NTASKS_PER_NODE=4 MASTER_ADDR=h "
                    "MASTER_PORT=1", -1, -1, NULL, "SLURM_LOCALID=4 but SLURM_NTASKS_PER_NODE=4"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=8 SLURM_LOCALID=2 SLURM_TASKS_PER_NODE=2(x4) MASTER_ADDR=h", -1,
                    -1, NULL, "SLURM_LOCALID=2 but SLURM_TASKS_PER_NODE=2"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=x", -1, -1, NULL, "SLURM_STEP_NUM_TASKS='x' is not a whole number"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4 SLURM_STEP_TASKS_PER_NODE=2(x2) SLURM_NODEID=5", -1, -1,
                    NULL, "SLURM_STEP_TASKS_PER_NODE='2(x2)' does not say how many tasks this node runs"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2", -1, -1, NULL,
                    "srun runs 2 tasks but neither MASTER_ADDR nor SLURM_LAUNCH_NODE_IPADDR is set"));
#undef WITH_M
}

static void test_flag_errors(void)
{
    CU_ASSERT(fails("", -1, -1, "tcp://h:1", "--init-method tcp://h:1 needs --rank and --world-size"));
    CU_ASSERT(fails("", 0, -1, "tcp://h:1", "--init-method tcp://h:1 needs --world-size too"));
    CU_ASSERT(fails("", -1, 2, "tcp://h:1", "--init-method tcp://h:1 needs --rank too"));
    /* tcp:// wants its rank from the flags, not from the environment. */
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2", -1, -1, "tcp://h:1", "needs --rank and --world-size"));
    CU_ASSERT(fails("", 0, 2, "tcp://h:abc", "--init-method 'tcp://h:abc': 'abc' is not a port number"));
    CU_ASSERT(fails("", 0, 2, "tcp://h:0", "'0' is not a port number"));
    CU_ASSERT(fails("", 0, 2, "tcp://:123", "--init-method 'tcp://:123' needs a host and a port"));
    CU_ASSERT(fails("", 0, 2, "tcp://h", "needs a host and a port"));
    CU_ASSERT(fails("", 0, 2, "tcp://[::1:5", "an IPv6 address is written [ADDRESS]"));
    /* the colons of an IPv6 address are no port's */
    CU_ASSERT(fails("", 0, 2, "tcp://[::1]", "--init-method 'tcp://[::1]' needs a host and a port"));
    DdpTopology t;
    CU_ASSERT(topo(&t, "", 0, 2, "tcp://[::1]:29500") == DDP_OK && expect(&t, 0, 2, 0, 2, "::1", 29500,
                                                                          DDP_LAUNCH_FLAGS));
    CU_ASSERT(fails("RANK=0 WORLD_SIZE=2 MASTER_ADDR=[::1] MASTER_PORT=1", -1, -1, NULL,
                    "MASTER_ADDR='[::1]': an IPv6 address goes in without brackets, which only tcp://[ADDRESS]:PORT "
                    "takes"));
    CU_ASSERT(fails("", 0, 2, "file:///tmp/x", "--init-method expects env:// or tcp://HOST:PORT, got 'file:///tmp/x'"));
    CU_ASSERT(fails("", 2, 2, "tcp://h:1", "--rank 2 but --world-size 2 (ranks are 0 to 1)"));
    CU_ASSERT(fails("", 0, 0, NULL, "--world-size 0: a run needs at least one rank"));
    CU_ASSERT(fails("", 0, 70000, NULL, "--world-size 70000 is more than the 65536 ranks"));
    CU_ASSERT(fails("", -7, 2, NULL, "--rank -7: a rank is 0 or more"));
    CU_ASSERT(fails("", 1, -1, NULL, "--rank 1 needs --world-size"));
    CU_ASSERT(fails("", -1, 4, NULL, "--world-size 4 needs --rank"));
    CU_ASSERT(fails("", 1, 2, NULL, "--world-size 2 needs rank 0's address: --init-method tcp://HOST:PORT"));
    CU_ASSERT(fails("RANK=1 WORLD_SIZE=4 MASTER_ADDR=h MASTER_PORT=1", -1, 1, NULL, "RANK=1 but --world-size 1"));
    CU_ASSERT(fails("OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4", -1, 2, NULL,
                    "OMPI_COMM_WORLD_RANK=3 but --world-size 2"));
    CU_ASSERT(fails("SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4 SLURM_NTASKS=8 MASTER_ADDR=h MASTER_PORT=1", 5, -1, NULL,
                    "--rank 5 but SLURM_STEP_NUM_TASKS=4"));
    CU_ASSERT(fails("LOCAL_RANK=2 LOCAL_WORLD_SIZE=2", 0, 4, "tcp://h:1", "LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2"));
    CU_ASSERT(fails("", -1, -1, "env://", "--init-method env:// but no launcher's variables are set"));
}

void suite_rendezvous(void)
{
    static const TestCase cases[] = {
        {"no launcher: one rank", test_none},
        {"torchrun's variables", test_torchrun},
        {"a child of --nproc-per-node (DDP_SPAWNED=1)", test_spawned},
        {"mpirun's variables", test_mpirun},
        {"srun's variables, SLURM_TASKS_PER_NODE lists", test_srun},
        {"a Slurm batch script's own shell is no srun task", test_slurm_batch_shell},
        {"flags > torchrun > mpirun > srun", test_precedence},
        {"--init-method, --rank, --world-size", test_flags},
        {"every wrong variable named with its value", test_env_errors},
        {"every wrong flag named with its value", test_flag_errors},
        {NULL, NULL},
    };
    test_add_suite("rendezvous (topology)", cases);
}
