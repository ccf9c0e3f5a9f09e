/*
 * Tests of runtime/proc_tree.c's ddp_kill_holders_of: the processes a
 * killed mpirun leaves are found by an entry of their environment, and
 * only those: an entry that merely begins or ends like it is not it, even
 * where /proc's environ is read in pieces that cut an entry before it.
 */
#include <fcntl.h>  // O_CLOEXEC
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc_tree.h"  // ddp_kill_holders_of
#include "testutil.h"

/* A `sleep 60` whose whole environment is ENV (NULL-ended); its pid, once
 * it has exec'd (the end of a pipe that closes on exec is read to EOF):
 * until then its environment is still ours. */
static pid_t sleeper(char *const *env)
{
    int exec_seen[2];
    CU_ASSERT_FATAL(pipe2(exec_seen, O_CLOEXEC) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {"sleep", "60", NULL};
        execve("/bin/sleep", argv, env);
        _exit(127);
    }
    close(exec_seen[1]);
    char c;
    while (read(exec_seen[0], &c, 1) > 0) {
    }
    close(exec_seen[0]);
    return pid;
}

/* One entry: "FILL=", the letter q up to byte AT, then TEXT: where a
 * read of /proc's environ is cut at AT (a page, the reader's buffer), what
 * follows the cut is TEXT, though the entry is not. */
static char *glued(size_t at, const char *text)
{
    char *s = malloc(at + strlen(text) + 1);
    CU_ASSERT_FATAL(s != NULL);
    memset(s, 'q', at);
    memcpy(s, "FILL=", 5);
    strcpy(s + at, text);
    return s;
}

static void test_kill_holders_of(void)
{
    char mark[64], longer[80], tail[80], *long_value = malloc(20000);
    CU_ASSERT_FATAL(long_value != NULL);
    snprintf(mark, sizeof mark, "DDP_TEST_MARK=%d", (int)getpid());
    snprintf(longer, sizeof longer, "%s0", mark); /* begins like it */
    snprintf(tail, sizeof tail, "X_%s", mark);    /* ends like it */
    memset(long_value, 'v', 19999);               /* an entry longer than any buffer, then the mark */
    memcpy(long_value, "LONG=", 5);
    long_value[19999] = '\0';
    char *at_page = glued(4096, mark), *at_buffer = glued(8192, mark);
    char *before_cut = glued(8192 - 6, "x"); /* with its NUL, the mark after it starts 4 bytes short of a cut */
    char *holds_first[] = {mark, NULL};
    char *holds_after_long[] = {long_value, mark, NULL};
    char *like_it[] = {longer, tail, NULL};
    char *cut_at_page[] = {at_page, NULL};
    char *cut_at_buffer[] = {at_buffer, NULL};
    char *mark_across_cut[] = {before_cut, mark, NULL};
    char **envs[] = {holds_first, holds_after_long, like_it, cut_at_page, cut_at_buffer, mark_across_cut};
    const int should_die[] = {1, 1, 0, 0, 0, 1};
    enum { N = sizeof envs / sizeof envs[0] };
    pid_t pids[N];
    for (int i = 0; i < N; i++)
        CU_ASSERT_FATAL((pids[i] = sleeper(envs[i])) > 0);
    CU_ASSERT_EQUAL(ddp_kill_holders_of(mark, 5.0), 3);
    for (int i = 0; i < N; i++) {
        int ws = 0;
        const pid_t ended = waitpid(pids[i], &ws, WNOHANG); /* the ones killed have ended */
        const int killed = ended == pids[i] && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
        if (ended == 0) { /* still sleeping: ended here */
            kill(pids[i], SIGKILL);
            waitpid(pids[i], &ws, 0);
        }
        CU_ASSERT_EQUAL(killed, should_die[i]);
        if (killed != should_die[i])
            fprintf(stderr, "\n  environment %d: %s", i, should_die[i] ? "not killed" : "killed, not holding it");
    }
    /* none left: nothing more to kill */
    CU_ASSERT_EQUAL(ddp_kill_holders_of(mark, 1.0), 0);
    free(long_value);
    free(at_page);
    free(at_buffer);
    free(before_cut);
}

void suite_proc_tree(void)
{
    static const TestCase cases[] = {
        {"the processes holding an environment entry are killed, and only those", test_kill_holders_of},
        {NULL, NULL},
    };
    test_add_suite("proc_tree", cases);
}
