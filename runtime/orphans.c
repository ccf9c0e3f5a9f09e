/*
 * orphans.c: ending the ranks a dead mpirun leaves (orphans.h).
 *
 * A process lists its children by scanning /proc for entries whose parent
 * is this process (the fourth field of /proc/PID/stat, after the command
 * name, which may itself hold spaces and parentheses: hence the last ')').
 */
#include "orphans.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>  // atoi
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

void ddp_orphans_adopt(void)
{
#ifdef PR_SET_CHILD_SUBREAPER
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
}

/* Whether /proc/PID/stat names PARENT as its parent; *ZOMBIE: it has ended
 * and waits to be reaped. */
static int child_of(const char *pid, pid_t parent, int *zombie)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* gone meanwhile */
    size_t len = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[len] = '\0';
    char *close = NULL;
    for (char *p = line; *p; p++)
        if (*p == ')')
            close = p;
    char state;
    int ppid;
    if (!close || sscanf(close + 1, " %c %d", &state, &ppid) != 2)
        return 0;
    *zombie = state == 'Z';
    return ppid == (int)parent;
}

int ddp_orphans_end(void)
{
    const pid_t self = getpid();
    int running = 0;
    /* a round ends and reaps the children found; a child's own children,
     * orphaned as it dies, are found by the next */
    for (int found = 1, round = 0; found && round < 100; round++) {
        found = 0;
        DIR *d = opendir("/proc");
        if (!d)
            break;
        struct dirent *e;
        while ((e = readdir(d))) {
            int zombie = 0;
            if (!isdigit((unsigned char)e->d_name[0]) || !child_of(e->d_name, self, &zombie))
                continue;
            pid_t pid = (pid_t)atoi(e->d_name);
            if (!zombie) {
                running++;
                kill(pid, SIGKILL);
            }
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
            }
            found = 1;
        }
        closedir(d);
    }
    return running;
}
