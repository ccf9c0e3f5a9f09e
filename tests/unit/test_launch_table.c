/*
 * Tests of the launch table (compiler/launch_table.c): what each launch of a
 * generated program runs on a GPU, printed by `ddpc --emit plan` and at the
 * end of OUT.cu. The issue it guards against: a kernel whose threads each
 * work through thousands of elements (the bias gradients once did 36,864 for
 * mnist.net's first conv), which on a GPU is the whole step's time.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A GPU thread's share at batch 64 that no example's kernel may pass. */
enum { MOST_WORK_AT_64 = 256 };

/* The net at PATH with its train { batch } set to BATCH (a global batch made
 * a rank's), written into DIR; the copy's path. */
static const char *at_batch(const char *dir, const char *path, int batch)
{
    const char *copy = test_tmp_path(dir, strrchr(path, '/') + 1);
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "sed -E 's/^([[:space:]]*)batch [0-9]+( global)?/\\1batch %d/' %s > %s", batch,
                             path, copy) > 0);
    CU_ASSERT_EQUAL_FATAL(test_run(cmd, NULL), 0);
    free(cmd);
    return copy;
}

/* `ddpc --emit plan` of PATH: its output, malloc'd (a failure ends the test). */
static char *emit_plan(const char *path)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s %s --emit plan", test_ddpc(), path) > 0);
    int rc = test_run(cmd, &out);
    free(cmd);
    if (rc != 0)
        test_show_lines(out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return out;
}

/* The table's kernel rows: the largest work/thread of any, and of KERNEL
 * (-1 where it has no row); the count of kernel rows. Rows are "function
 * launch threads work" with digits grouped by commas, the launch perhaps
 * tagged "(training)" or "(evaluation)"; library rows say "library -". */
typedef struct {
    long most, of_kernel;
    int kernels;
    char most_name[128];
} TableRead;

static long grouped_number(const char *s)
{
    long v = 0;
    for (; *s; s++)
        if (*s >= '0' && *s <= '9')
            v = v * 10 + (*s - '0');
        else if (*s != ',')
            return -1;
    return v;
}

static TableRead read_table(const char *text, const char *kernel)
{
    TableRead r = {.most = -1, .of_kernel = -1};
    const char *at = strstr(text, "launch table at batch");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    char *copy = strdup(at), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char function[64], name[128], threads[32], work[32], extra[32];
        int got = sscanf(line, "%63s %127s %31s %31s %31s", function, name, threads, work, extra);
        if (got < 4 || strcmp(threads, "library") == 0)
            continue;
        int tagged = strcmp(threads, "(training)") == 0 || strcmp(threads, "(evaluation)") == 0;
        if (got == 5 && !tagged) /* a sentence, or a library call "ddp_gemm (linear1) library -" */
            continue;
        const char *w = got == 5 ? extra : work; /* "loss_reduce (evaluation) 256 64" */
        long threads_n = grouped_number(got == 5 ? work : threads), work_n = grouped_number(w);
        if (threads_n <= 0 || work_n < 0)
            continue;
        r.kernels++;
        if (work_n > r.most) {
            r.most = work_n;
            snprintf(r.most_name, sizeof r.most_name, "%s", name);
        }
        if (kernel && strcmp(name, kernel) == 0)
            r.of_kernel = work_n;
    }
    free(copy);
    return r;
}

/* Every example at batch 64: no kernel asks more than MOST_WORK_AT_64 trips of
 * one thread, and the table's closing line names the same worst. */
static void test_examples_at_64(void)
{
    static const char *const nets[] = {"examples/mnist.net", "examples/mlp.net", "examples/resnet.net",
                                       "examples/fashion_resnet.net", "examples/cifar10.net"};
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc_launch_XXXXXX");
    for (size_t i = 0; i < sizeof nets / sizeof *nets; i++) {
        char *out = emit_plan(at_batch(dir, nets[i], 64));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "launch table at batch 64:"));
        TableRead r = read_table(out, NULL);
        CU_ASSERT_TRUE(r.kernels >= 8); /* the table was read: every example has that many */
        if (r.most > MOST_WORK_AT_64)
            fprintf(stderr, "\n  %s at batch 64: %s does %ld trips a thread", nets[i], r.most_name, r.most);
        CU_ASSERT_TRUE(r.most >= 1 && r.most <= MOST_WORK_AT_64);
        char said[200];
        snprintf(said, sizeof said, "the most work of one thread: %ld (%s)", r.most, r.most_name);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, said));
        free(out);
    }
    test_remove_tmpdir(dir);
}

/* The table follows the batch, by the launches' own arithmetic worked out
 * by hand: at 4096, loss_reduce's 4096 rows go to 16 blocks of 256
 * threads, a row each (it was one thread for all, 4096 trips); conv1's bias
 * gradient (32 channels of 24 x 24) splits each channel over 16 blocks of
 * 256 samples, a sample's 576 pixels over 256 threads: 256 x 3 terms a
 * thread; maxpool1's windows, 4 taps an item; the optimizer's 184,588
 * floats (184,586 parameters, each on 16 bytes), one each. The products' bias and relu are in the library's
 * calls (ddp_conv_forward_bias, ddp_linear_forward_bias): 11 launches. So
 * the 256 limit above can fail. */
static void test_follows_the_batch(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc_launch_XXXXXX");
    char *out = emit_plan(at_batch(dir, "examples/mnist.net", 4096));
    CU_ASSERT_EQUAL(read_table(out, "loss_reduce").of_kernel, 1);
    CU_ASSERT_EQUAL(read_table(out, "conv1_bias_backward").of_kernel, 768);
    CU_ASSERT_PTR_NULL(strstr(out, "conv1_bias_relu_forward"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "ddp_conv_forward_bias (conv1)"));
    CU_ASSERT_EQUAL(read_table(out, "maxpool1_forward").of_kernel, 4);
    CU_ASSERT_EQUAL(read_table(out, "optimizer_sgd_step").of_kernel, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "the most work of one thread: 768 (conv1_bias_backward)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "a training step: 11 kernel launches and 11 library calls"));
    free(out);
    test_remove_tmpdir(dir);
}

/* OUT.cu ends with the same table as --emit plan prints, as comments. */
static void test_same_table_in_the_program(void)
{
    char *plan = emit_plan("examples/resnet.net"), *cu = NULL, *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/resnet.net --emit cu --target cpu", test_ddpc()) > 0);
    CU_ASSERT_EQUAL_FATAL(test_run(cmd, &cu), 0);
    free(cmd);
    const char *table = strstr(plan, "launch table at batch"), *commented = strstr(cu, "// launch table at batch");
    CU_ASSERT_PTR_NOT_NULL_FATAL(table);
    CU_ASSERT_PTR_NOT_NULL_FATAL(commented);
    /* line by line: "// " + the plan's line ("//" for an empty one) */
    int lines = 0;
    while (*table) {
        const char *end = strchr(table, '\n');
        size_t len = end ? (size_t)(end - table) : strlen(table);
        CU_ASSERT_EQUAL_FATAL(strncmp(commented, len ? "// " : "//", len ? 3 : 2), 0);
        commented += len ? 3 : 2;
        CU_ASSERT_EQUAL_FATAL(strncmp(commented, table, len), 0);
        commented += len + (end != NULL);
        table += len + (end != NULL);
        lines++;
    }
    CU_ASSERT_TRUE(lines > 20);
    CU_ASSERT_EQUAL(*commented, '\0'); /* the table ends the program */
    free(plan);
    free(cu);
}

void suite_launch_table(void)
{
    static const TestCase cases[] = {
        {"every example at batch 64: no kernel's thread works through more than 256 elements",
         test_examples_at_64},
        {"the table follows the batch (mnist.net at 4096, worked out by hand)", test_follows_the_batch},
        {"OUT.cu ends with the table --emit plan prints", test_same_table_in_the_program},
        {NULL, NULL},
    };
    test_add_suite("launch_table", cases);
}
