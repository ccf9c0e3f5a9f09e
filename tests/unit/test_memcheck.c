/*
 * Memory check of a generated CPU program and the runtime it links: a short
 * training run of examples/mlp.net under valgrind memcheck, with --export,
 * then --init from what it wrote, both with --log (tests/memcheck/run.sh).
 * No memory error and no byte definitely or indirectly lost may remain.
 *
 * Only mlp.net here: it takes about 7 s under valgrind, where mnist.net takes
 * 35 s and resnet.net two minutes; it still runs the IDX readers (gzipped and
 * raw), safetensors out and in, the JSON log, dropout, partial batches and the
 * gemm path. The
 * run of every example, and the ASan+UBSan variant, is
 * `tests/memcheck/run.sh [--asan]`.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_mlp_under_valgrind(void)
{
    if (test_run("command -v valgrind", NULL) != 0) {
        fputs("\n  (SKIPPED: valgrind is not installed, nothing was checked; apt-get install valgrind)", stderr);
        return;
    }
    if (test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n  (SKIPPED: no Fashion-MNIST to cut the run's data from)", stderr);
        return;
    }
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s tests/memcheck/run.sh examples/mlp.net", test_ddpc()) > 0);
    int rc = test_run(cmd, &out);
    char what[128];
    snprintf(what, sizeof what, "tests/memcheck/run.sh examples/mlp.net: exit status %d", rc);
    CU_assertImplementation(rc == 0 && out && strstr(out, "memcheck (valgrind): OK"), __LINE__, what, __FILE__, "",
                            CU_FALSE);
    /* the table's rows: errors, bytes lost and seconds of each run */
    for (const char *line = out; line && *line;) {
        int len = (int)strcspn(line, "\n");
        if (strncmp(line, "example ", 8) == 0 || strncmp(line, "mlp ", 4) == 0)
            fprintf(stderr, "\n    %.*s", len, line);
        line += len + (line[len] == '\n');
    }
    if (rc != 0 && out)
        fprintf(stderr, "\n%s\n", out);
    free(out);
    free(cmd);
}

void suite_memcheck(void)
{
    static const TestCase cases[] = {
        {"mlp.net: 3 steps, --export then --init, --log, under valgrind: no error, no leak",
         test_mlp_under_valgrind},
        {NULL, NULL},
    };
    test_add_suite("memcheck [valgrind]", cases);
}
