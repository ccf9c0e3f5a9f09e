/*
 * proc_tree.c: ending a process's descendants (proc_tree.h).
 *
 * One pass over /proc takes every process's parent (the fourth field of
 * /proc/PID/stat, after the command name, which may itself hold spaces and
 * parentheses: hence the last ')'); the descendants of the root are then
 * those whose chain of parents reaches it.
 */
#include "proc_tree.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>  // poll: a short sleep
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>  // SYS_pidfd_open, SYS_pidfd_send_signal: glibc 2.36 has no wrapper for the second
#include <unistd.h>

#include "clock.h"  // ddp_now

typedef struct {
    pid_t pid, parent;
    int below; /* a descendant of the root, killed */
} Proc;

/* PID's parent, from /proc/PID/stat; -1 if it is gone or unreadable. */
static pid_t parent_of(const char *pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t len = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[len] = '\0';
    char *close = NULL;
    for (char *p = line; *p; p++)
        if (*p == ')')
            close = p;
    char state;
    int parent;
    return close && sscanf(close + 1, " %c %d", &state, &parent) == 2 ? (pid_t)parent : -1;
}

int ddp_kill_descendants(pid_t root)
{
    DIR *d = root > 1 ? opendir("/proc") : NULL; /* never init's (or the kernel's) */
    if (!d)
        return 0;
    Proc *procs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t parent = parent_of(e->d_name);
        if (parent < 0)
            continue;
        if (n == cap) {
            Proc *grown = realloc(procs, (cap = cap ? 2 * cap : 1024) * sizeof *procs);
            if (!grown)
                break;
            procs = grown;
        }
        procs[n++] = (Proc){(pid_t)atoi(e->d_name), parent, 0};
    }
    closedir(d);
    /* a descendant's parent is the root or a descendant: grow the set
     * until it is stable */
    int killed = 0;
    for (int grew = 1; grew;) {
        grew = 0;
        for (size_t i = 0; i < n; i++) {
            if (procs[i].below)
                continue;
            int below = procs[i].parent == root;
            for (size_t j = 0; !below && j < n; j++)
                below = procs[j].below && procs[j].pid == procs[i].parent;
            if (below) {
                kill(procs[i].pid, SIGKILL);
                procs[i].below = 1;
                killed++;
                grew = 1;
            }
        }
    }
    free(procs);
    return killed;
}

/* Whether process PID's environment (as /proc gives it: NUL-ended
 * entries) holds ENTRY. A zombie's, or another user's, reads as none. It
 * is read whole, after a NUL of our own, so that an entry is found as
 * "\0ENTRY\0" wherever the reads were cut (the last entry's NUL is there). */
static int holds(const char *pid, const char *entry)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t len = 1, cap = 0;
    char *env = NULL;
    for (;;) {
        if (len >= cap) {
            char *grown = realloc(env, cap = cap ? 2 * cap : 8192);
            if (!grown)
                break;
            env = grown;
            env[0] = '\0';
        }
        ssize_t n = read(fd, env + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    const size_t want = strlen(entry);
    char *needle = malloc(want + 2);
    int found = 0;
    if (env && needle) {
        needle[0] = '\0';
        memcpy(needle + 1, entry, want + 1);
        found = memmem(env, len, needle, want + 2) != NULL;
    }
    free(needle);
    free(env);
    return found;
}

/* One pass: SIGKILL to each process but this one holding ENTRY; how many
 * it reached. Each is held by a pidfd before its environment is read and
 * signalled through it: should it end between the two and its pid go to
 * another process, the signal goes nowhere. */
static int kill_holders_once(const char *entry)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    const pid_t self = getpid();
    int killed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const pid_t pid = isdigit((unsigned char)e->d_name[0]) ? (pid_t)atoi(e->d_name) : 0;
        if (pid <= 0 || pid == self)
            continue;
        const int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0 && errno == ENOSYS) { /* a kernel before 5.3: by pid */
            killed += holds(e->d_name, entry) && kill(pid, SIGKILL) == 0;
            continue;
        }
        if (pidfd < 0)
            continue;
        if (holds(e->d_name, entry) && syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0)
            killed++;
        close(pidfd);
    }
    closedir(d);
    return killed;
}

int ddp_kill_holders_of(const char *entry, double seconds)
{
    const double deadline = ddp_now() + seconds;
    int killed = -1;
    for (;;) {
        /* one killed is still listed (and holds ENTRY) until it has died */
        const int left = kill_holders_once(entry);
        if (killed < 0)
            killed = left;
        if (!left || ddp_now() > deadline)
            return killed;
        (void)poll(NULL, 0, 50);
    }
}
