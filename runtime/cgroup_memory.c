/*
 * cgroup_memory.c: the memory this process's control groups still allow
 * (cgroup_memory.h).
 */
#include "cgroup_memory.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* v1 writes "no limit" as LONG_MAX rounded down to a page; any limit from
 * 2^62 bytes up is none. */
#define NO_LIMIT_FROM (UINT64_C(1) << 62)

enum { PATH_LEN = 4096 };

/* One hierarchy's files: the limit, the usage, and memory.stat's fields of
 * the file pages, active and inactive (v1's total_ ones count the groups
 * below too, as its usage does). */
typedef struct {
    const char *limit, *usage, *file_pages[2];
} Files;
static const Files v2_files = {"memory.max", "memory.current", {"active_file", "inactive_file"}};
static const Files v1_files = {"memory.limit_in_bytes", "memory.usage_in_bytes",
                               {"total_active_file", "total_inactive_file"}};

/* The number file DIR/NAME holds, into *V: 1; 0 where it is missing, holds
 * no number, or holds v2's "max" (no limit). */
static int read_count(const char *dir, const char *name, uint64_t *v)
{
    char path[PATH_LEN], line[64];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return 0;
    FILE *f = fopen(path, "r");
    int got = f && fgets(line, sizeof line, f);
    if (f)
        fclose(f);
    if (!got || line[0] < '0' || line[0] > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(line, &end, 10);
    if (errno || (*end && *end != '\n'))
        return 0;
    *v = x;
    return 1;
}

/* The file pages of DIR/memory.stat ("NAME VALUE" lines): the sum of
 * FILES' file_pages fields, read in one pass; a field absent counts 0. */
static uint64_t file_pages(const char *dir, const Files *files)
{
    char path[PATH_LEN], line[128];
    if (snprintf(path, sizeof path, "%s/memory.stat", dir) >= (int)sizeof path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    enum { FIELDS = sizeof files->file_pages / sizeof files->file_pages[0] };
    uint64_t sum = 0;
    int found = 0;
    while (found < FIELDS && fgets(line, sizeof line, f))
        for (int i = 0; i < FIELDS; i++) {
            size_t n = strlen(files->file_pages[i]);
            if (strncmp(line, files->file_pages[i], n) == 0 && line[n] == ' ') {
                sum += strtoull(line + n + 1, NULL, 10);
                found++;
            }
        }
    fclose(f);
    return sum;
}

/* What group DIR leaves: its limit less its usage but for file pages, at
 * least 1 (0 would read as "cannot tell"); SIZE_MAX where it sets no limit
 * or its files cannot be read (an ancestor outside a container's view). */
static size_t left_in(const char *dir, const Files *files)
{
    uint64_t limit, usage;
    if (!read_count(dir, files->limit, &limit) || limit >= NO_LIMIT_FROM || !read_count(dir, files->usage, &usage))
        return SIZE_MAX;
    uint64_t cache = file_pages(dir, files);
    uint64_t held = usage > cache ? usage - cache : 0;
    return held >= limit ? 1 : (size_t)(limit - held);
}

/* The least left in GROUP (a path of /proc/self/cgroup) and in each group
 * above it, up to MOUNT, the hierarchy's root as mounted. A group missing
 * under MOUNT (a container that mounts its own group as the root while
 * /proc/self/cgroup names the host's path) costs nothing: its ancestors,
 * MOUNT among them, are still read. */
static size_t least_left(const char *mount, const char *group, const Files *files)
{
    char dir[PATH_LEN];
    size_t mount_len = strlen(mount), least = SIZE_MAX;
    int n = snprintf(dir, sizeof dir, "%s%s", mount, group);
    if (n < 0 || (size_t)n >= sizeof dir)
        return SIZE_MAX;
    for (;;) {
        size_t left = left_in(dir, files);
        least = left < least ? left : least;
        char *slash = strrchr(dir + mount_len, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    return least;
}

/* Whether the comma-separated list LIST has WORD ("cpu,memory"). */
static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p += len;
        if (!*p)
            return 0;
    }
}

size_t ddp_cgroup_memory_left_under(const char *root)
{
    char path[PATH_LEN], line[PATH_LEN];
    if (snprintf(path, sizeof path, "%s/proc/self/cgroup", root) >= (int)sizeof path)
        return SIZE_MAX;
    FILE *f = fopen(path, "r");
    size_t least = SIZE_MAX;
    /* "ID:CONTROLLERS:PATH" lines: v2's has no controllers ("0::/a/b") */
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
        if (!second || second[1] != '/')
            continue;
        *second = '\0';
        const char *controllers = first + 1, *group = second + 1;
        const int v2 = !*controllers;
        if (!v2 && !has_word(controllers, "memory"))
            continue;
        char mount[PATH_LEN];
        if (snprintf(mount, sizeof mount, "%s/sys/fs/cgroup%s", root, v2 ? "" : "/memory") >= (int)sizeof mount)
            continue;
        size_t left = least_left(mount, group, v2 ? &v2_files : &v1_files);
        least = left < least ? left : least;
    }
    if (f)
        fclose(f);
    return least;
}

size_t ddp_cgroup_memory_left(void)
{
    const char *test_root = getenv(DDP_TEST_CGROUP_ROOT_ENV);
    return ddp_cgroup_memory_left_under(test_root ? test_root : "");
}
