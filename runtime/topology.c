/*
 * topology.c: who this rank is, read once at start-up from the flags and the
 * environment (topology.h, ddp_topology_read).
 *
 * Each launcher announces the topology its own way: torchrun with RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and our
 * own --nproc-per-node, launcher.c, with the same plus DDP_SPAWNED=1); mpirun
 * with OMPI_COMM_WORLD_*; srun with SLURM_* (a Slurm batch script's own shell
 * has some of them too, but is no rank: read_srun). The file is a chain of small
 * readers, one per source, each filling a DdpTopology and checking only what
 * its own variables say; the flags then override what they name, and one
 * final check holds the result to the rules every source shares (a rank
 * inside the world, a local rank inside the node, an address for the store
 * when there are several ranks). The first source present wins, so a
 * variable of a lower one never mixes into a higher one's topology.
 *
 * One quirk is torchrun's own: when it says TORCHELASTIC_USE_AGENT_STORE=True
 * its agent already serves a PyTorch store on MASTER_PORT, which our store
 * cannot share, so ours takes the next port (every rank computes the same).
 *
 * Every message names the variable or flag and the value it had, because the
 * person reading it did not set these by hand: a launcher did, and the name
 * is the only thread back to which one.
 */
#include <errno.h>
#include <limits.h>  // INT_MAX
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology.h"    // DdpTopology, ddp_topology_read
#include "status.h"      // DDP_ERR, DDP_CHECK
#include "device.h"      // ddp_device_is_gpu: which group the ranks meet through
#include "numbers.h"     // ddp_parse_int: a number read as every flag reads one

/* Long enough to recognise a value, short enough to keep a message a line. */
#define SHOWN 64

/* ---- one value ------------------------------------------------------------- */

/* A decimal integer and nothing else, as every flag reads one (numbers.h),
 * with a leading minus (so that "-1" reads as a number out of range rather
 * than as garbage). Returns 0 if not a number, -1 if one too large for 64
 * bits. */
static int parse_int(const char *s, int64_t *out)
{
    if (ddp_parse_int(s, out))
        return 1;
    const char *p = s + (*s == '-');
    return *p && strspn(p, "0123456789") == strlen(p) ? -1 : 0;
}

/* Environment variable NAME as an integer: *PRESENT 0 when unset. */
static DdpStatus env_int(const char *name, int64_t *v, int *present)
{
    const char *s = getenv(name);
    *present = s != NULL;
    if (!s)
        return DDP_OK;
    int ok = parse_int(s, v);
    if (ok <= 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s='%.*s' is %s", name, SHOWN, s,
                       ok < 0 ? "far out of range" : "not a whole number");
    return DDP_OK;
}

/* "RANK=5" for an environment variable, "--rank 5" for a flag. */
static const char *shown(char *buf, size_t len, const char *name, int64_t v)
{
    snprintf(buf, len, name[0] == '-' ? "%s %lld" : "%s=%lld", name, (long long)v);
    return buf;
}

static DdpStatus check_world(const char *name, int64_t world)
{
    char a[96];
    if (world < 1)
        return DDP_ERR(DDP_BAD_INPUT, "%s: a run needs at least one rank", shown(a, sizeof a, name, world));
    if (world > DDP_MAX_RANKS)
        return DDP_ERR(DDP_BAD_INPUT, "%s is more than the %d ranks a run may have", shown(a, sizeof a, name, world),
                       DDP_MAX_RANKS);
    return DDP_OK;
}

/* RANK within [0, WORLD): the message names both, since either may be the
 * wrong one. */
static DdpStatus check_rank(const char *rank_name, int64_t rank, const char *world_name, int64_t world)
{
    char a[96], b[96];
    if (rank < 0 || rank >= world)
        return DDP_ERR(DDP_BAD_INPUT, "%s but %s (ranks are 0 to %lld)", shown(a, sizeof a, rank_name, rank),
                       shown(b, sizeof b, world_name, world), (long long)world - 1);
    return DDP_OK;
}

/* ---- the store's address --------------------------------------------------- */

typedef struct {
    const char *addr; /* NULL: unset */
    int port;         /* 0: unset */
    int port_implied; /* srun's default, not set by anyone */
    const char *addr_name;
} Master;

static DdpStatus check_addr(const char *name, const char *addr)
{
    if (!*addr)
        return DDP_ERR(DDP_BAD_INPUT, "%s is empty: it should be the host name or address of rank 0", name);
    if (strlen(addr) >= sizeof ((DdpTopology *)0)->master_addr)
        return DDP_ERR(DDP_BAD_INPUT, "%s='%.*s...' is %zu characters long; a host name has at most %zu", name, SHOWN,
                       addr, strlen(addr), sizeof ((DdpTopology *)0)->master_addr - 1);
    for (const char *p = addr; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == '/' || (unsigned char)*p >= 0x7f)
            return DDP_ERR(DDP_BAD_INPUT, "%s='%.*s' is not a host name or address", name, SHOWN, addr);
    if (addr[strcspn(addr, "[]")]) /* which the resolver takes for part of a name */
        return DDP_ERR(DDP_BAD_INPUT, "%s='%.*s': an IPv6 address goes in without brackets, which only "
                       "tcp://[ADDRESS]:PORT takes", name, SHOWN, addr);
    return DDP_OK;
}

static DdpStatus check_port(const char *name, const char *text, int *port)
{
    int64_t v;
    if (parse_int(text, &v) != 1 || v < 1 || v > 65535)
        return DDP_ERR(DDP_BAD_INPUT, "%s='%.*s' is not a port number (1 to 65535)", name, SHOWN, text);
    *port = (int)v;
    return DDP_OK;
}

/* MASTER_ADDR and MASTER_PORT, each checked if present. */
static DdpStatus read_master(Master *m)
{
    m->addr = getenv("MASTER_ADDR");
    m->addr_name = "MASTER_ADDR";
    m->port = 0;
    if (m->addr)
        DDP_CHECK(check_addr("MASTER_ADDR", m->addr));
    const char *port = getenv("MASTER_PORT");
    if (port)
        DDP_CHECK(check_port("MASTER_PORT", port, &m->port));
    return DDP_OK;
}

/* Half of the store's address, at which several ranks cannot meet (srun's
 * implied port is no one's half). mpirun's ranks need neither half, MPI
 * meeting them: there the store only names a hang, and half of its address
 * costs a note (open_store_under_mpirun), not the run. */
static DdpStatus check_master_whole(const Master *m)
{
    if (m->addr && !m->port)
        return DDP_ERR(DDP_BAD_INPUT, "%s=%.*s is set but MASTER_PORT is not", m->addr_name, SHOWN, m->addr);
    if (!m->addr && m->port && !m->port_implied)
        return DDP_ERR(DDP_BAD_INPUT, "MASTER_PORT=%d is set but MASTER_ADDR is not", m->port);
    return DDP_OK;
}

DdpStatus ddp_topology_check_master_env(void)
{
    Master m = {0};
    DDP_CHECK(read_master(&m));
    return check_master_whole(&m);
}

/* ---- the launchers --------------------------------------------------------- */

/* Local rank and size, each with the name it came from for messages: the
 * values given, or one node (local = global) where the source says nothing,
 * or with only the size, the rank's place on its node. */
static DdpStatus set_local(DdpTopology *t, const char *lr_name, int has_lr, int64_t lr, const char *ls_name,
                           int has_ls, int64_t ls, const char *world_name)
{
    char a[96], b[96];
    if (has_ls) {
        if (ls < 1)
            return DDP_ERR(DDP_BAD_INPUT, "%s: a node runs at least one rank", shown(a, sizeof a, ls_name, ls));
        if (ls > t->world_size)
            return DDP_ERR(DDP_BAD_INPUT, "%s but %s: a node cannot run more ranks than the world has",
                           shown(a, sizeof a, ls_name, ls), shown(b, sizeof b, world_name, t->world_size));
    }
    if (has_lr)
        DDP_CHECK(check_rank(lr_name, lr, has_ls ? ls_name : world_name, has_ls ? ls : t->world_size));
    t->local_world_size = has_ls ? (int)ls : t->world_size;
    t->local_rank = has_lr ? (int)lr : t->rank % t->local_world_size;
    return DDP_OK;
}

/* set_local from the environment variables LR_NAME and LS_NAME. */
static DdpStatus read_local(DdpTopology *t, const char *lr_name, const char *ls_name, const char *world_name)
{
    int64_t lr = 0, ls = 0;
    int has_lr, has_ls;
    DDP_CHECK(env_int(lr_name, &lr, &has_lr));
    DDP_CHECK(env_int(ls_name, &ls, &has_ls));
    return set_local(t, lr_name, has_lr, lr, ls_name, has_ls, ls, world_name);
}

/* torchrun (and our own --nproc-per-node): RANK and WORLD_SIZE. */
static DdpStatus read_torchrun(DdpTopology *t, Master *m)
{
    int64_t rank = 0, world = 0;
    int has_rank, has_world;
    DDP_CHECK(env_int("RANK", &rank, &has_rank));
    DDP_CHECK(env_int("WORLD_SIZE", &world, &has_world));
    if (!has_rank && !has_world)
        return DDP_OK;
    if (!has_world)
        return DDP_ERR(DDP_BAD_INPUT, "RANK=%lld is set but WORLD_SIZE is not", (long long)rank);
    if (!has_rank)
        return DDP_ERR(DDP_BAD_INPUT, "WORLD_SIZE=%lld is set but RANK is not", (long long)world);
    DDP_CHECK(check_world("WORLD_SIZE", world));
    DDP_CHECK(check_rank("RANK", rank, "WORLD_SIZE", world));
    t->rank = (int)rank;
    t->world_size = (int)world;
    DDP_CHECK(read_local(t, "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE"));
    DDP_CHECK(read_master(m));
    /* torchrun's agent may serve its own (PyTorch) store on MASTER_PORT
     * for its workers to share; ours then takes the next port. */
    const char *agent_store = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && strcmp(agent_store, "True") == 0 && m->port)
        m->port = m->port < 65535 ? m->port + 1 : m->port - 1;
    const char *spawned = getenv("DDP_SPAWNED");
    t->launch = spawned && strcmp(spawned, "1") == 0 ? DDP_LAUNCH_SPAWN : DDP_LAUNCH_TORCHRUN;
    if (t->launch == DDP_LAUNCH_TORCHRUN) { /* our own launcher restarts with bare --resume instead */
        int64_t restart = 0;
        int has_restart;
        DDP_CHECK(env_int("TORCHELASTIC_RESTART_COUNT", &restart, &has_restart));
        if (restart < 0)
            return DDP_ERR(DDP_BAD_INPUT, "TORCHELASTIC_RESTART_COUNT=%lld: a count is 0 or more", (long long)restart);
        t->restart = !has_restart ? -1 : restart > INT_MAX ? INT_MAX : (int)restart;
    }
    return DDP_OK;
}

/* mpirun (Open MPI): MPI itself carries the start-up, so MASTER_* is optional. */
static DdpStatus read_mpirun(DdpTopology *t, Master *m)
{
    int64_t rank = 0, world = 0;
    int has_rank, has_world;
    DDP_CHECK(env_int("OMPI_COMM_WORLD_RANK", &rank, &has_rank));
    DDP_CHECK(env_int("OMPI_COMM_WORLD_SIZE", &world, &has_world));
    if (!has_rank && !has_world)
        return DDP_OK;
    if (!has_world || !has_rank)
        return DDP_ERR(DDP_BAD_INPUT, "%s is set but %s is not", has_rank ? "OMPI_COMM_WORLD_RANK" : "OMPI_COMM_WORLD_SIZE",
                       has_rank ? "OMPI_COMM_WORLD_SIZE" : "OMPI_COMM_WORLD_RANK");
    DDP_CHECK(check_world("OMPI_COMM_WORLD_SIZE", world));
    DDP_CHECK(check_rank("OMPI_COMM_WORLD_RANK", rank, "OMPI_COMM_WORLD_SIZE", world));
    t->rank = (int)rank;
    t->world_size = (int)world;
    DDP_CHECK(read_local(t, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"));
    DDP_CHECK(read_master(m));
    t->launch = DDP_LAUNCH_MPIRUN;
    return DDP_OK;
}

/* SLURM_TASKS_PER_NODE, "4(x2),3": the tasks on node NODE (-1: unknown, in
 * which case every node must run the same number). 0 if unreadable. */
static int64_t tasks_on_node(const char *list, int64_t node)
{
    int64_t index = 0, uniform = -1;
    const char *p = list;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9')
            return 0;
        long long n = strtoll(p, &end, 10), reps = 1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x' || p[2] < '0' || p[2] > '9')
                return 0;
            reps = strtoll(p + 2, &end, 10);
            if (*end != ')' || reps < 1 || reps > DDP_MAX_RANKS)
                return 0;
            p = end + 1;
        }
        if (n < 1 || n > DDP_MAX_RANKS)
            return 0;
        if (node >= index && node < index + reps)
            return n;
        uniform = uniform == -1 || uniform == n ? n : -2;
        index += reps;
        if (*p == '\0')
            break;
        if (*p++ != ',')
            return 0;
    }
    return node < 0 && uniform > 0 ? uniform : 0;
}

/* This node's entry (SLURM_NODEID's, or every node's where all are alike)
 * of NAME, a list of tasks per node like "4(x2),3", into *TASKS. */
static DdpStatus tasks_here(const char *name, int64_t *tasks, int *present)
{
    const char *list = getenv(name);
    int64_t node = -1;
    int has_node;
    DDP_CHECK(env_int("SLURM_NODEID", &node, &has_node));
    *tasks = tasks_on_node(list, has_node ? node : -1);
    if (*tasks == 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s='%.*s' does not say how many tasks %s runs (expected a list like "
                       "4(x2),3)", name, SHOWN, list, has_node ? "this node" : "each node");
    *present = 1;
    return DDP_OK;
}

/* srun: SLURM_PROCID and the step's task count, SLURM_STEP_NUM_TASKS.
 *
 * A Slurm batch script's own shell has SLURM_PROCID (0) and the job's
 * SLURM_NTASKS too, but it is no task of a step: only srun sets the step's
 * variables (Slurm's env_array_for_step; a batch job's environment has no
 * SLURM_STEP_*). A program started there directly is one process of its own,
 * which starts its node's ranks itself, as without a launcher;
 * t->slurm_batch_nodes is then the job's node count, so that a run that
 * would use one node of several can be refused (ddp_dist_ranks_to_launch,
 * which knows whether the run is one that uses one node: --predict).
 *
 * A step of one task (srun --gpus 4 --pty bash, then ./OUT; or srun -n 1
 * ./OUT) is the same: srun put the process on a node with the step's GPUs
 * and has no ranks to join, so it starts its own, unless --init-method
 * env:// (ENV_METHOD) asks for a launcher's rank: then it is rank 0 of 1. */
static DdpStatus read_srun(DdpTopology *t, Master *m, int env_method)
{
    int64_t rank = 0, world = 0;
    int has_rank, has_world;
    const char *world_name = "SLURM_STEP_NUM_TASKS";
    DDP_CHECK(env_int("SLURM_PROCID", &rank, &has_rank));
    if (!has_rank)
        return DDP_OK;
    DDP_CHECK(env_int(world_name, &world, &has_world));
    if (!has_world) {
        const char *nodes_name = getenv("SLURM_JOB_NUM_NODES") ? "SLURM_JOB_NUM_NODES" : "SLURM_NNODES";
        int64_t nodes = 1;
        int has_nodes;
        DDP_CHECK(env_int(nodes_name, &nodes, &has_nodes));
        t->slurm_batch_nodes = nodes < 1 ? 1 : nodes > INT_MAX ? INT_MAX : (int)nodes;
        return DDP_OK;
    }
    DDP_CHECK(check_world(world_name, world));
    DDP_CHECK(check_rank("SLURM_PROCID", rank, world_name, world));
    if (world == 1 && !env_method)
        return DDP_OK;
    t->rank = (int)rank;
    t->world_size = (int)world;

    /* The node's task count: this node's entry of the step's own layout,
     * SLURM_STEP_TASKS_PER_NODE, which srun sets; else SLURM_NTASKS_PER_NODE
     * (the job's, which srun passes on: sbatch --ntasks-per-node 4, then
     * srun -n 2, runs 2 on the node, not 4); else SLURM_TASKS_PER_NODE's. */
    int64_t lr = 0, ls = 0;
    int has_lr, has_ls = 0;
    const char *ls_name = "SLURM_STEP_TASKS_PER_NODE";
    DDP_CHECK(env_int("SLURM_LOCALID", &lr, &has_lr));
    if (getenv(ls_name))
        DDP_CHECK(tasks_here(ls_name, &ls, &has_ls));
    if (!has_ls) {
        ls_name = "SLURM_NTASKS_PER_NODE";
        DDP_CHECK(env_int(ls_name, &ls, &has_ls));
    }
    if (!has_ls && getenv("SLURM_TASKS_PER_NODE")) {
        ls_name = "SLURM_TASKS_PER_NODE";
        DDP_CHECK(tasks_here(ls_name, &ls, &has_ls));
    }
    DDP_CHECK(set_local(t, "SLURM_LOCALID", has_lr, lr, ls_name, has_ls, ls, world_name));

    DDP_CHECK(read_master(m));
    if (!m->addr && getenv("SLURM_LAUNCH_NODE_IPADDR")) {
        m->addr = getenv("SLURM_LAUNCH_NODE_IPADDR");
        m->addr_name = "SLURM_LAUNCH_NODE_IPADDR";
        DDP_CHECK(check_addr(m->addr_name, m->addr));
    }
    if (!m->port) {
        /* A port of the step's own, so that neither two jobs sharing rank
         * 0's node (job ids up to 999 apart) nor a job's steps run at once
         * (`srun ... & srun ... &`, up to 10) meet in one store. */
        int64_t job = 0, step = 0;
        const char *s = getenv("SLURM_JOB_ID"), *st = getenv("SLURM_STEP_ID");
        if (!s || parse_int(s, &job) != 1 || job < 0)
            job = 0;
        if (!st || parse_int(st, &step) != 1 || step < 0)
            step = 0;
        m->port = 29500 + 10 * (int)(job % 1000) + (int)(step % 10);
        m->port_implied = 1;
    }
    t->launch = DDP_LAUNCH_SRUN;
    return DDP_OK;
}

/* torchrun's RANK and WORLD_SIZE, read first, left in the environment of
 * ranks mpirun started would make each of those a job of its own: where
 * mpirun's variables disagree with them and no torchrun agent set them (it
 * sets TORCHELASTIC_RUN_ID), refused. A torchrun that mpirun started (one a
 * node) sets its own for its workers, which win. */
static DdpStatus check_torchrun_not_stale(const DdpTopology *t)
{
    int64_t rank = 0, world = 0;
    int has_rank, has_world;
    if (getenv("TORCHELASTIC_RUN_ID"))
        return DDP_OK;
    DDP_CHECK(env_int("OMPI_COMM_WORLD_RANK", &rank, &has_rank));
    DDP_CHECK(env_int("OMPI_COMM_WORLD_SIZE", &world, &has_world));
    if (!has_rank || !has_world || (rank == t->rank && world == t->world_size))
        return DDP_OK;
    return DDP_ERR(DDP_BAD_INPUT, "RANK=%d and WORLD_SIZE=%d are set, as torchrun sets them, but mpirun started this "
                   "process as rank %lld of %lld (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), and no torchrun agent "
                   "(no TORCHELASTIC_RUN_ID): unset RANK and WORLD_SIZE, left in the environment", t->rank,
                   t->world_size, (long long)rank, (long long)world);
}

/* Whether RANK and WORLD_SIZE only repeat mpirun's own, with no torchrun
 * agent nor our launcher behind them (a script that exported them from
 * OMPI_COMM_WORLD_*), in a CPU build: the ranks are then mpirun's, and read
 * as such, as its MPI needs, with MASTER_* optional. A GPU build's ranks
 * meet through the store either way, which a build without MPI needs.
 * Unreadable values are not: read_torchrun names them. */
static int repeats_mpirun(void)
{
    int64_t rank = 0, world = 0, mpi_rank = 0, mpi_world = 0;
    int has[4];
    if (ddp_device_is_gpu() || getenv("TORCHELASTIC_RUN_ID") || getenv("DDP_SPAWNED"))
        return 0;
    if (env_int("RANK", &rank, &has[0]) != DDP_OK || env_int("WORLD_SIZE", &world, &has[1]) != DDP_OK ||
        env_int("OMPI_COMM_WORLD_RANK", &mpi_rank, &has[2]) != DDP_OK ||
        env_int("OMPI_COMM_WORLD_SIZE", &mpi_world, &has[3]) != DDP_OK) {
        ddp_error_clear();
        return 0;
    }
    return has[0] && has[1] && has[2] && has[3] && rank == mpi_rank && world == mpi_world;
}

/* The first launcher whose variables are present, or t->launch NONE. */
static DdpStatus read_env(DdpTopology *t, Master *m, int env_method)
{
    if (!repeats_mpirun())
        DDP_CHECK(read_torchrun(t, m));
    if (t->launch == DDP_LAUNCH_TORCHRUN)
        DDP_CHECK(check_torchrun_not_stale(t));
    if (t->launch == DDP_LAUNCH_NONE)
        DDP_CHECK(read_mpirun(t, m));
    if (t->launch == DDP_LAUNCH_NONE)
        DDP_CHECK(read_srun(t, m, env_method));
    return DDP_OK;
}

/* ---- the flags ------------------------------------------------------------- */

/* tcp://HOST:PORT (HOST a name, an IPv4 address or [IPv6]) into M. */
static DdpStatus parse_init_method(const char *s, char *host, size_t host_len, Master *m)
{
    if (strncmp(s, "tcp://", 6) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "--init-method expects env:// or tcp://HOST:PORT, got '%.*s'", SHOWN, s);
    /* the port's colon: the last one, after an IPv6 address's ']' */
    const char *h = s + 6, *bracket = *h == '[' ? strchr(h, ']') : NULL;
    const char *colon = strrchr(bracket ? bracket : h, ':');
    if (!colon || colon == h)
        return DDP_ERR(DDP_BAD_INPUT, "--init-method '%.*s' needs a host and a port: tcp://HOST:PORT", SHOWN, s);
    const char *start = h, *end = colon;
    if (*h == '[') { /* [::1]:29500 */
        if (end - h < 3 || end[-1] != ']')
            return DDP_ERR(DDP_BAD_INPUT, "--init-method '%.*s': an IPv6 address is written [ADDRESS]", SHOWN, s);
        start = h + 1;
        end--;
    }
    size_t n = (size_t)(end - start);
    if (n >= host_len)
        return DDP_ERR(DDP_BAD_INPUT, "--init-method '%.*s...': the host name is longer than %zu characters", SHOWN,
                       s, host_len - 1);
    memcpy(host, start, n);
    host[n] = '\0';
    DDP_CHECK(check_addr("--init-method's host", host));
    int64_t port;
    if (parse_int(colon + 1, &port) != 1 || port < 1 || port > 65535)
        return DDP_ERR(DDP_BAD_INPUT, "--init-method '%.*s': '%.*s' is not a port number (1 to 65535)", SHOWN, s,
                       SHOWN, colon + 1);
    m->addr = host;
    m->port = (int)port;
    m->addr_name = "--init-method";
    return DDP_OK;
}

const char *ddp_topology_started_by(DdpLaunch launch)
{
    static const char *const started_by[] = {
        [DDP_LAUNCH_FLAGS] = "--rank/--world-size (or --init-method) made this process one rank",
        [DDP_LAUNCH_TORCHRUN] = "torchrun (RANK and WORLD_SIZE are set) started this rank",
        [DDP_LAUNCH_MPIRUN] = "mpirun (OMPI_COMM_WORLD_RANK is set) started this rank",
        [DDP_LAUNCH_SRUN] = "srun (SLURM_PROCID and SLURM_STEP_NUM_TASKS are set) started this rank",
        [DDP_LAUNCH_SPAWN] = "a launcher (DDP_SPAWNED=1) started this rank"};
    return (unsigned)launch < sizeof started_by / sizeof started_by[0] ? started_by[launch] : NULL;
}

DdpStatus ddp_topology_read(DdpTopology *t, int64_t flag_rank, int64_t flag_world_size, const char *init_method)
{
    memset(t, 0, sizeof *t);
    t->restart = -1;
    t->world_size = t->local_world_size = 1;
    t->launch = DDP_LAUNCH_NONE;

    int env_method = init_method && strcmp(init_method, "env://") == 0;
    int tcp = init_method && !env_method;
    char tcp_host[sizeof t->master_addr];
    Master m = {0};
    if (flag_world_size != -1)
        DDP_CHECK(check_world("--world-size", flag_world_size));
    if (flag_rank < -1)
        return DDP_ERR(DDP_BAD_INPUT, "--rank %lld: a rank is 0 or more", (long long)flag_rank);
    int64_t mpirun_world = 0;
    int under_mpirun;
    DDP_CHECK(env_int("OMPI_COMM_WORLD_SIZE", &mpirun_world, &under_mpirun));
    t->mpirun_world = mpirun_world < 0 ? 0 : mpirun_world > INT_MAX ? INT_MAX : (int)mpirun_world;

    if (tcp) {
        /* Like torch's init_process_group("tcp://..."): the flags say it all. */
        DDP_CHECK(parse_init_method(init_method, tcp_host, sizeof tcp_host, &m));
        if (flag_rank < 0 || flag_world_size < 0)
            return DDP_ERR(DDP_BAD_INPUT, "--init-method %.*s needs %s", SHOWN, init_method,
                           flag_rank < 0 && flag_world_size < 0 ? "--rank and --world-size"
                           : flag_rank < 0                      ? "--rank too"
                                                                : "--world-size too");
        DDP_CHECK(check_rank("--rank", flag_rank, "--world-size", flag_world_size));
        t->rank = (int)flag_rank;
        t->world_size = (int)flag_world_size;
        DDP_CHECK(read_local(t, "LOCAL_RANK", "LOCAL_WORLD_SIZE", "--world-size"));
        t->launch = DDP_LAUNCH_FLAGS;
    } else {
        DDP_CHECK(read_env(t, &m, env_method));
        if (env_method && t->launch == DDP_LAUNCH_NONE && flag_rank < 0 && flag_world_size < 0)
            return DDP_ERR(DDP_BAD_INPUT, "--init-method env:// but no launcher's variables are set: RANK and "
                           "WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK (mpirun) or SLURM_PROCID and "
                           "SLURM_STEP_NUM_TASKS (srun; SLURM_PROCID alone is a Slurm batch script's own shell)");
        if (flag_rank >= 0 || flag_world_size >= 0) {
            /* The flags override what they name; the launcher (if any) fills in the rest. */
            DdpLaunch under = t->launch;
            int rank = t->rank, world = t->world_size;
            if (flag_world_size < 0 && under == DDP_LAUNCH_NONE)
                return DDP_ERR(DDP_BAD_INPUT, "--rank %lld needs --world-size", (long long)flag_rank);
            if (flag_rank < 0 && under == DDP_LAUNCH_NONE && flag_world_size > 1)
                return DDP_ERR(DDP_BAD_INPUT, "--world-size %lld needs --rank (or a launcher's RANK)",
                               (long long)flag_world_size);
            t->rank = flag_rank >= 0 ? (int)flag_rank : under == DDP_LAUNCH_NONE ? 0 : rank;
            t->world_size = flag_world_size >= 0 ? (int)flag_world_size : world;
            static const char *const rank_names[] = {
                [DDP_LAUNCH_TORCHRUN] = "RANK", [DDP_LAUNCH_SPAWN] = "RANK",
                [DDP_LAUNCH_MPIRUN] = "OMPI_COMM_WORLD_RANK", [DDP_LAUNCH_SRUN] = "SLURM_PROCID"};
            static const char *const world_names[] = {
                [DDP_LAUNCH_TORCHRUN] = "WORLD_SIZE", [DDP_LAUNCH_SPAWN] = "WORLD_SIZE",
                [DDP_LAUNCH_MPIRUN] = "OMPI_COMM_WORLD_SIZE", [DDP_LAUNCH_SRUN] = "SLURM_STEP_NUM_TASKS"};
            DDP_CHECK(check_rank(flag_rank >= 0 ? "--rank" : rank_names[under], t->rank,
                                 flag_world_size >= 0 ? "--world-size" : world_names[under], t->world_size));
            /* Flags that restate the launcher change nothing; flags that
             * differ make a topology of their own, on one node unless
             * told otherwise: by torchrun's local names where no launcher
             * set the rest, as with --init-method tcp:// (a launcher's own
             * local ranks no longer fit flags that overrule it). */
            if (t->rank != rank || t->world_size != world || under == DDP_LAUNCH_NONE) {
                t->local_rank = t->rank;
                t->local_world_size = t->world_size;
                t->launch = DDP_LAUNCH_FLAGS;
                t->restart = -1;           /* torchrun's, no longer ours */
                t->slurm_batch_nodes = 0; /* a rank by hand, not the batch script's one process */
                if (under == DDP_LAUNCH_NONE)
                    DDP_CHECK(read_local(t, "LOCAL_RANK", "LOCAL_WORLD_SIZE", "--world-size"));
            }
            if (under == DDP_LAUNCH_NONE)
                DDP_CHECK(read_master(&m));
        }
    }

    /* Where rank 0 serves the store: needed by every run of several ranks
     * except under mpirun, where MPI itself carries the start-up. */
    if (t->world_size > 1 && t->launch != DDP_LAUNCH_MPIRUN)
        DDP_CHECK(check_master_whole(&m));
    if (m.addr && m.port) {
        snprintf(t->master_addr, sizeof t->master_addr, "%s", m.addr);
        t->master_port = m.port;
    } else if (t->world_size > 1 && t->launch != DDP_LAUNCH_MPIRUN) {
        switch (t->launch) {
        case DDP_LAUNCH_SRUN:
            return DDP_ERR(DDP_BAD_INPUT, "srun runs %d tasks but neither MASTER_ADDR nor SLURM_LAUNCH_NODE_IPADDR "
                           "is set: set MASTER_ADDR (and MASTER_PORT) to the node of rank 0", t->world_size);
        case DDP_LAUNCH_FLAGS:
            return DDP_ERR(DDP_BAD_INPUT, "--world-size %d needs rank 0's address: --init-method tcp://HOST:PORT, "
                           "or MASTER_ADDR and MASTER_PORT", t->world_size);
        default:
            return DDP_ERR(DDP_BAD_INPUT, "WORLD_SIZE=%d but MASTER_ADDR is not set: set MASTER_ADDR and "
                           "MASTER_PORT to where rank 0 listens (torchrun sets both)", t->world_size);
        }
    }
    return DDP_OK;
}
