/*
 * Two hosts and a cut link, from CUnit: runs tests/fault/two_hosts.sh (see
 * it for what each check does). Two network namespaces joined by a veth
 * pair, one rank in each: training under mpirun across them, the start-up
 * store across them, then the link cut, after which each rank must stop with
 * a message within its timeout.
 *
 * The script needs root and `ip netns`; without them (or without mpirun, a C
 * compiler or Fashion-MNIST) it exits 77, which is said on stderr as every
 * skipped test here says it, never passed over in silence. Every PASS, FAIL
 * and info line (the measured times) is shown, so a run's log records them.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The lines of OUT that start with one of the script's verdicts, indented. */
static void show_verdicts(const char *out)
{
    for (const char *line = out; line && *line;) {
        size_t len = strcspn(line, "\n");
        if (!strncmp(line, "PASS ", 5) || !strncmp(line, "FAIL ", 5) || !strncmp(line, "info: ", 6) ||
            !strncmp(line, "two_hosts: ", 11))
            fprintf(stderr, "\n    %.*s", (int)len, line);
        line += len + (line[len] == '\n');
    }
    fputc('\n', stderr);
}

static void test_two_hosts_and_a_cut_link(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s tests/fault/two_hosts.sh", test_ddpc()) > 0);
    int rc = test_run(cmd, &out);
    free(cmd);
    if (rc == 77) {
        const char *why = out ? strstr(out, "skipped: ") : NULL;
        why = why ? why + strlen("skipped: ") : "it said no reason";
        fprintf(stderr, "\n  (SKIPPED: two_hosts.sh exit 77: %.*s)\n", (int)strcspn(why, "\n"), why);
        free(out);
        return;
    }
    char what[128];
    snprintf(what, sizeof what, "tests/fault/two_hosts.sh: exit %d", rc);
    CU_assertImplementation(rc == 0 && out && strstr(out, " checks, 0 failed"), __LINE__, what, __FILE__, "",
                            CU_FALSE);
    if (rc == 0)
        show_verdicts(out);
    else
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

void suite_two_hosts(void)
{
    static const TestCase cases[] = {
        {"two namespaces, a rank in each: training, the store, then a cut link (each rank stops in time)",
         test_two_hosts_and_a_cut_link},
        {NULL, NULL},
    };
    test_add_suite("two_hosts [mpirun, ip netns]", cases);
}
