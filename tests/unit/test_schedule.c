/*
 * Tests of runtime/schedule.c: values worked out by hand, then every step of
 * a few runs against PyTorch's own schedulers (StepLR stepped per epoch,
 * LambdaLR with the warm-up cosine, CosineAnnealingLR where warm-up is 0),
 * run through Debian's python3-torch; skipped where torch is absent.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "schedule.h"  // ddp_schedule_lr
#include "testutil.h"

static DdpTrainConfig config(DdpSchedule schedule, double lr, int64_t epochs)
{
    return (DdpTrainConfig){.schedule = schedule, .lr = lr, .epochs = epochs, .step_every = 1, .gamma = 1};
}

static void test_by_hand(void)
{
    DdpTrainConfig c = config(DDP_SCHED_CONSTANT, 0.01, 3);
    CU_ASSERT_EQUAL(ddp_schedule_lr(&c, 0, 0, 10), 0.01);
    CU_ASSERT_EQUAL(ddp_schedule_lr(&c, 29, 2, 10), 0.01);

    c = config(DDP_SCHED_STEP, 0.1, 6);
    c.step_every = 2;
    c.gamma = 0.1;
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 0, 0, 10), 0.1, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 19, 1, 10), 0.1, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 20, 2, 10), 0.01, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 39, 3, 10), 0.01, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 40, 4, 10), 0.001, 1e-15);

    /* cosine, warm-up 4, T = 2 epochs of 10 steps = 20 */
    c = config(DDP_SCHED_COSINE, 1.0, 2);
    c.warmup = 4;
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 0, 0, 10), 0.25, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 2, 0, 10), 0.75, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 3, 0, 10), 1.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 4, 0, 10), 1.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 12, 1, 10), 0.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 19, 1, 10), 0.5 * (1 + cos(M_PI * 15 / 16)), 1e-15);
    /* no warm-up: the first step at the full rate */
    c.warmup = 0;
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 0, 0, 10), 1.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 10, 1, 10), 0.5, 1e-15);
    /* a warm-up as long as the run: the span is clamped to 1, no division by zero */
    c.warmup = 20;
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 19, 1, 10), 1.0, 1e-15);
    c.warmup = 30;
    CU_ASSERT_DOUBLE_EQUAL(ddp_schedule_lr(&c, 19, 1, 10), 20.0 / 30.0, 1e-15);
    CU_ASSERT_STRING_EQUAL(ddp_schedule_name(DDP_SCHED_COSINE), "cosine");
}

/* Runs SCRIPT with torch's python; returns its whitespace-separated numbers
 * in a malloc'd array of *N, or NULL. */
static double *torch_numbers(const char *py, const char *script, int *n)
{
    char path[] = "/tmp/ddp_sched_XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(write(fd, script, strlen(script)) == (ssize_t)strlen(script));
    close(fd);
    char cmd[256], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s %s", py, path);
    int rc = test_run(cmd, &out);
    unlink(path);
    if (rc != 0) {
        fprintf(stderr, "\npython failed:\n%s", out ? out : "");
        free(out);
        return NULL;
    }
    int cap = 1024;
    double *v = malloc(sizeof *v * (size_t)cap);
    char *p = out, *end;
    *n = 0;
    for (double x = strtod(p, &end); end != p && v; x = strtod(p = end, &end)) {
        if (*n == cap)
            v = realloc(v, sizeof *v * (size_t)(cap *= 2));
        if (v)
            v[(*n)++] = x;
    }
    free(out);
    return v;
}

/* Every step's rate against torch's: within 1e-12 relative (the chained
 * forms PyTorch uses round differently from our closed forms). */
static void compare(const char *py, const char *script, const DdpTrainConfig *c, int64_t steps_per_epoch)
{
    int n = 0;
    double *want = torch_numbers(py, script, &n);
    CU_ASSERT_FATAL(want != NULL);
    CU_ASSERT_EQUAL(n, c->epochs * steps_per_epoch);
    int bad = 0;
    for (int s = 0; s < n; s++) {
        double got = ddp_schedule_lr(c, s, s / steps_per_epoch, steps_per_epoch);
        if (fabs(got - want[s]) > 1e-12 * fabs(want[s]) + 1e-300 && bad++ < 3)
            fprintf(stderr, "\nstep %d: torch %.17g, ddpc %.17g", s, want[s], got);
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(want);
}

static void test_against_torch(void)
{
    const char *py = test_python_with_torch();
    if (!py) {
        fprintf(stderr, "\n(skipped: no python3 with torch)");
        return;
    }
    /* The rate of each optimizer step: read before the step, as the trainer
     * sets it; StepLR steps at each epoch's end, LambdaLR after each step. */
    static const char prelude[] =
        "import math, torch\n"
        "p = torch.nn.Parameter(torch.zeros(1))\n"
        "def run(opt, sched, epochs, spe, per_step):\n"
        "    out = []\n"
        "    for e in range(epochs):\n"
        "        for s in range(spe):\n"
        "            out.append(opt.param_groups[0]['lr'])\n"
        "            opt.step()\n"
        "            if per_step: sched.step()\n"
        "        if not per_step: sched.step()\n"
        "    print(' '.join(repr(x) for x in out))\n";
    char script[2048];

    DdpTrainConfig c = config(DDP_SCHED_STEP, 0.05, 7);
    c.step_every = 3;
    c.gamma = 0.3;
    snprintf(script, sizeof script,
             "%sopt = torch.optim.SGD([p], lr=0.05)\n"
             "run(opt, torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.3), 7, 5, False)\n",
             prelude);
    compare(py, script, &c, 5);

    c = config(DDP_SCHED_COSINE, 0.1, 4);
    c.warmup = 7;
    snprintf(script, sizeof script,
             "%sopt = torch.optim.SGD([p], lr=0.1)\n"
             "T, W = 4 * 9, 7\n"
             "f = lambda s: (s + 1) / W if s < W else 0.5 * (1 + math.cos(math.pi * (s - W) / max(1, T - W)))\n"
             "run(opt, torch.optim.lr_scheduler.LambdaLR(opt, f), 4, 9, True)\n",
             prelude);
    compare(py, script, &c, 9);

    /* Without warm-up, the same curve as CosineAnnealingLR(T_max=T). */
    c.warmup = 0;
    snprintf(script, sizeof script,
             "%sopt = torch.optim.SGD([p], lr=0.1)\n"
             "run(opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4 * 9), 4, 9, True)\n",
             prelude);
    compare(py, script, &c, 9);
}

void suite_schedule(void)
{
    static const TestCase cases[] = {
        {"constant, step and cosine by hand", test_by_hand},
        {"every step's rate matches PyTorch's schedulers", test_against_torch},
        {NULL, NULL},
    };
    test_add_suite("schedule [python]", cases);
}
