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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

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
