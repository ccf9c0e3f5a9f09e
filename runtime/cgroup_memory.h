/*
 * cgroup_memory.h: the memory this process's control group still lets it
 * take, which /proc/meminfo's MemAvailable does not see: a container (a CI
 * job, a Kubernetes pod, a Slurm job under cgroups) may hold far less than
 * the machine, and a run sized by MemAvailable alone would pass the
 * start-up memory check there and then be killed for memory.
 *
 * What a group has left is its limit less what it holds that the kernel
 * cannot give back: its usage less its file pages, active and inactive
 * (page cache, which the kernel reclaims before it kills anything in the
 * group: counted as used, a data set read twice, or image files cached,
 * would refuse runs that fit, and the refusal has no override). Every group
 * from this process's up to the root of the mounted hierarchy limits it,
 * so the least left over them all is what is left. Both hierarchies are
 * read, at their usual mount points (systemd's, Docker's, Kubernetes'):
 * cgroup v2 at /sys/fs/cgroup (memory.max, memory.current, memory.stat's
 * active_file and inactive_file) and v1's memory controller at
 * /sys/fs/cgroup/memory (memory.limit_in_bytes, memory.usage_in_bytes,
 * memory.stat's total_active_file and total_inactive_file). A hierarchy
 * mounted elsewhere goes unseen: the machine's MemAvailable alone counts
 * then, as before there was this file.
 */
#ifndef DDPRT_CGROUP_MEMORY_H
#define DDPRT_CGROUP_MEMORY_H

#include <stddef.h>

/* Bytes this process's control groups still allow; SIZE_MAX where no group
 * sets a limit, or none can be read. */
size_t ddp_cgroup_memory_left(void);

/* For tests only: DDP_TEST_CGROUP_ROOT=DIR has ddp_cgroup_memory_left read
 * DIR/proc/self/cgroup and DIR/sys/fs/cgroup, a container's made-up limit
 * for a whole program's start-up check. */
#define DDP_TEST_CGROUP_ROOT_ENV "DDP_TEST_CGROUP_ROOT"

/* The same, with every path read under ROOT ("" for the real one: ROOT is
 * for tests, which lay out ROOT/proc/self/cgroup and ROOT/sys/fs/cgroup). */
size_t ddp_cgroup_memory_left_under(const char *root);

#endif
