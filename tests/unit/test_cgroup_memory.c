/*
 * What a container's control groups leave a run (runtime/cgroup_memory.c),
 * read from made-up trees of cgroup v2 and v1 files: a limit less what the
 * group holds but for file pages (page cache, reclaimable), the least over the group
 * and its ancestors, none where no group sets one; and a whole program's
 * start-up memory check sized by it (DDP_TEST_CGROUP_ROOT).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup_memory.h"
#include "testutil.h"

static char root[64];

/* Writes TEXT to ROOT/PATH, making its directories. */
static void put(const char *path, const char *text)
{
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "mkdir -p \"$(dirname '%s/%s')\" && printf '%%s' '%s' > '%s/%s'", root, path, text,
                             root, path) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
}

/* Removes ROOT, if made. */
static void remove_root(void)
{
    if (root[0])
        test_remove_tmpdir(root);
    root[0] = '\0';
}

/* A fresh, empty ROOT. */
static void fresh_root(void)
{
    remove_root();
    test_make_tmpdir(root, sizeof root, "/tmp/ddp_cgroup_XXXXXX");
}

static void test_v2(void)
{
    fresh_root();
    put("proc/self/cgroup", "0::/job/step\n");
    /* the step's own limit: 1,000,000 less (600,000 used less 60,000 + 40,000 file pages,
     * active and inactive; shmem, in "file" too, is not reclaimable) */
    put("sys/fs/cgroup/job/step/memory.max", "1000000\n");
    put("sys/fs/cgroup/job/step/memory.current", "600000\n");
    put("sys/fs/cgroup/job/step/memory.stat",
        "anon 400000\nfile 200000\nshmem 100000\nactive_file 60000\ninactive_file 40000\n");
    put("sys/fs/cgroup/job/memory.max", "max\n");
    put("sys/fs/cgroup/job/memory.current", "600000\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), 500000);
    /* a parent with less left wins: 300,000 less 200,000 */
    put("sys/fs/cgroup/job/memory.max", "300000\n");
    put("sys/fs/cgroup/job/memory.current", "200000\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), 100000);
    /* the mount's root, a container's own group, limits too */
    put("sys/fs/cgroup/memory.max", "150000\n");
    put("sys/fs/cgroup/memory.current", "100000\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), 50000);
    /* over its limit: 1 byte left, not 0 (which reads as "cannot tell") */
    put("sys/fs/cgroup/memory.current", "900000\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), 1);
    /* a container's own namespace: its group is "/", the mount's root */
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/memory.current", "100000\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), 50000);
    put("proc/self/cgroup", "0::/job/step\n");
    /* no limit anywhere */
    put("sys/fs/cgroup/memory.max", "max\n");
    put("sys/fs/cgroup/job/memory.max", "max\n");
    put("sys/fs/cgroup/job/step/memory.max", "max\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), SIZE_MAX);
    /* a limit with no usage to read is no limit known */
    put("sys/fs/cgroup/job/step/memory.max", "1000000\n");
    put("sys/fs/cgroup/job/step/memory.current", "lots\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), SIZE_MAX);
    remove_root();
}

static void test_v1(void)
{
    fresh_root();
    /* the host's path, which the container does not have under its mount:
     * the mount's root, its own group, is still read; the total_ file
     * pages (the group's and those below) rather than its own; a hybrid
     * machine's v2 line, whose mount (unified/) has no memory files, adds
     * nothing */
    put("proc/self/cgroup", "12:pids:/docker/abc\n4:memory:/docker/abc\n0::/docker/abc\n");
    put("sys/fs/cgroup/unified/docker/abc/cgroup.procs", "1\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "2000000\n");
    put("sys/fs/cgroup/memory/memory.usage_in_bytes", "1500000\n");
    put("sys/fs/cgroup/memory/memory.stat",
        "cache 600000\nactive_file 1\ninactive_file 1\ntotal_active_file 100000\ntotal_inactive_file 400000\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), 1000000);
    /* v1's "no limit", LONG_MAX rounded to a page */
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), SIZE_MAX);
    /* the controller in a list; a name that merely begins with "memory" is not it */
    fresh_root();
    put("proc/self/cgroup", "5:cpu,memory:/j\n6:memoryx:/k\n");
    put("sys/fs/cgroup/memory/j/memory.limit_in_bytes", "4096\n");
    put("sys/fs/cgroup/memory/j/memory.usage_in_bytes", "96\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), 4000);
    put("proc/self/cgroup", "6:memoryx:/j\n");
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), SIZE_MAX);
    /* nothing to read at all */
    fresh_root();
    CU_ASSERT_EQUAL(ddp_cgroup_memory_left_under(root), SIZE_MAX);
    remove_root();
}

/* mnist.net in a container whose group allows 256 MiB: a step of 2048
 * samples (about 0.35 GiB) is refused at start-up, naming what is
 * available, where the machine's MemAvailable would have let it start; one
 * of 64 trains. 250 MiB in use of which 240 MiB are file pages leaves 246
 * MiB: counted as used, they would leave too little for it. */
static void test_start_up_check(void)
{
    fresh_root();
    put("proc/self/cgroup", "0::/job\n");
    put("sys/fs/cgroup/job/memory.max", "268435456\n");
    put("sys/fs/cgroup/job/memory.current", "262144000\n");
    put("sys/fs/cgroup/job/memory.stat", "active_file 125829120\ninactive_file 125829120\n");
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "d=$(mktemp -d); trap 'rm -rf $d' EXIT; python3 tests/fault/small_data.py $d/data 2048 64 "
                             "> /dev/null; %s examples/mnist.net --target cpu -o $d/p > /dev/null || exit 9; "
                             "export " DDP_TEST_CGROUP_ROOT_ENV "=%s; "
                             "$d/p --data $d/data --batch-size 2048 --max-steps 1 --quiet 2>&1; echo big=$?; "
                             "$d/p --data $d/data --batch-size 64 --max-steps 1 --quiet 2>&1; echo small=$?",
                             test_ddpc(), root) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: error: mnist needs "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "at batch 2048 (") && strstr(out, "but the CPU ("));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "has 0.2 GiB available: use a smaller --batch-size\nbig=2\n"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\nsmall=0\n"));
    if (!out || !strstr(out, "small=0"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
    remove_root();
}

void suite_cgroup_memory(void)
{
    static const TestCase cases[] = {
        {"cgroup v2: limit less usage but for file pages, the least up the groups, a namespace's root, none for max",
         test_v2},
        {"cgroup v1: the mount's root for a host's path, total_ file pages, a hybrid's v2 line, no limit, the controller "
         "named",
         test_v1},
        {"a program's start-up memory check counts its container's limit", test_start_up_check},
        {NULL, NULL},
    };
    test_add_suite("cgroup_memory", cases);
}
