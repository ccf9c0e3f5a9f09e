/*
 * Tests of runtime/progress.c: what a person sees. On a terminal, one line
 * rewritten in place with a bar, the running loss, samples/s and the time
 * left; piped, only whole lines; under mpirun (which hands ranks a
 * pseudo-terminal) plain lines unless the launcher says otherwise; and the
 * closing summary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progress.h"  // DdpProgress, ddp_progress_*
#include "device_calls.h"  // ddp_device_call_note: calls made inside and outside steps
#include "testutil.h"

/* Everything written to F since it was opened, NUL-terminated (static). */
static const char *contents(FILE *f)
{
    static char buf[4096];
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    return buf;
}

/* A progress reporter on a temporary file, told it is (TTY "1") or is not
 * ("0") a terminal, or left to find out (NULL), under mpirun when MPIRUN. */
static FILE *open_progress(DdpProgress *p, const char *tty, int mpirun)
{
    FILE *f = tmpfile();
    CU_ASSERT_FATAL(f != NULL);
    if (tty)
        setenv(DDP_PROGRESS_TTY_ENV, tty, 1);
    else
        unsetenv(DDP_PROGRESS_TTY_ENV);
    if (mpirun)
        setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    ddp_progress_init(p, "prog", f, 0);
    unsetenv(DDP_PROGRESS_TTY_ENV);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    return f;
}

static void test_bar_on_a_terminal(void)
{
    DdpProgress p;
    FILE *f = open_progress(&p, "1", 1); /* the launcher's word wins over mpirun's pty */
    ddp_progress_update(&p, 2, 5, 50, 100, 0.5, 1234.4, 245, 0.05);
    CU_ASSERT_STRING_EQUAL(contents(f),
                           "\repoch 2/5 [############............] 50/100  loss 0.5000  1234 samples/s  ETA 4m05s\033[K");
    ddp_progress_update(&p, 2, 5, 100, 100, 0.25, 1000, 0, 0.25);
    /* a data wait over 10% of the step is shown; 5% above was not */
    CU_ASSERT_PTR_NOT_NULL(strstr(contents(f), "\repoch 2/5 [########################] 100/100  loss 0.2500  1000 samples/s  "
                                  "data 25%  ETA 0s"));
    /* a plain line first erases the progress line */
    DdpReport r = {.epoch = 2, .epochs = 5, .step = 200, .loss = 0.25, .lr = 0.1, .samples_per_s = 1000,
                   .seconds = 3, .evaluated = 1, .test_loss = 0.3, .test_acc = 0.9};
    CU_ASSERT_EQUAL(ddp_progress_epoch(&p, &r), DDP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(contents(f), "ETA 0s\033[K\r\033[Kepoch 2/5  step 200  loss 0.2500  test_loss 0.3000  "
                                  "test_acc 0.9000  lr 0.1  1000 samples/s  3.0s\n"));
    ddp_progress_summary(&p, 200, 7.5, 987.6);
    CU_ASSERT_PTR_NOT_NULL(strstr(contents(f), "done  200 steps  best test_acc 0.9000 (epoch 2)  7.5s  988 samples/s\n"));
    fclose(f);
}

/* A rank's sums for STEPS steps: BUSY ms of work per step (as forward) and
 * WAIT ms waiting in the all-reduce. */
static DdpRankTimes rank_row(double busy_ms, double wait_ms, double steps)
{
    DdpRankTimes r = {.steps = steps, .samples = 64 * steps};
    r.seconds[DDP_PHASE_FORWARD] = busy_ms * steps / 1e3;
    r.seconds[DDP_PHASE_ALLREDUCE] = wait_ms * steps / 1e3;
    r.calls[DDP_CALL_WAIT] = steps; /* a staging buffer's wait a step: the log's host_waits */
    return r;
}

static void test_straggler_rule(void)
{
    double median;
    int slowest;
    /* two ranks: the slower must be 20% over their mean; waiting is not work */
    DdpRankTimes even[] = {rank_row(10, 6, 5), rank_row(16, 0, 5)};
    CU_ASSERT_EQUAL(ddp_times_straggler(even, 2, &slowest, &median), 1);
    CU_ASSERT_DOUBLE_EQUAL(median, 13, 1e-9);
    DdpRankTimes close[] = {rank_row(10, 5, 5), rank_row(15, 0, 5)};
    CU_ASSERT_EQUAL(ddp_times_straggler(close, 2, &slowest, &median), -1); /* 15 is 20% over 12.5, not more */
    CU_ASSERT_EQUAL(slowest, 1);
    /* three: the median, not the mean, so one slow rank does not hide itself */
    DdpRankTimes three[] = {rank_row(10, 3, 4), rank_row(13, 0, 4), rank_row(10, 3, 4)};
    CU_ASSERT_EQUAL(ddp_times_straggler(three, 3, &slowest, &median), 1);
    CU_ASSERT_DOUBLE_EQUAL(median, 10, 1e-9);
    DdpRankTimes one[] = {rank_row(50, 0, 4)};
    CU_ASSERT_EQUAL(ddp_times_straggler(one, 1, &slowest, &median), -1);
    CU_ASSERT_DOUBLE_EQUAL(median, 50, 1e-9); /* the log's median_busy_ms: the one rank's, not 0 */
    DdpRankTimes none[] = {rank_row(0, 0, 0), rank_row(0, 0, 0)};
    CU_ASSERT_EQUAL(ddp_times_straggler(none, 2, &slowest, &median), -1);
}

/* The device calls made in a step's phases count; those between steps
 * (reports, evaluations, checkpoints: OUTSIDE) do not. A reset starts the
 * sums again, and the calls of the phase under way land in the window that
 * phase ends in, as its seconds do. */
static void test_device_calls_in_steps(void)
{
    int64_t step = 0;
    DdpStepTimes t;
    ddp_times_init(&t, NULL, &step);
    ddp_device_call_note(DDP_CALL_SYNC); /* before the first step */
    ddp_times_enter(&t, DDP_PHASE_DATA);
    ddp_device_call_note(DDP_CALL_WAIT);
    ddp_times_enter(&t, DDP_PHASE_FORWARD);
    ddp_device_call_note(DDP_CALL_ALLOC);
    ddp_device_call_note(DDP_CALL_ALLOC);
    ddp_times_enter(&t, DDP_PHASE_OUTSIDE);
    ddp_device_call_note(DDP_CALL_SYNC); /* a report's */
    ddp_times_enter(&t, DDP_PHASE_OPTIMIZER);
    ddp_device_call_note(DDP_CALL_SYNC);
    ddp_times_enter(&t, DDP_PHASE_OUTSIDE);
    DdpRankTimes row;
    ddp_times_row(&t, &row);
    CU_ASSERT_EQUAL(row.calls[DDP_CALL_SYNC], 1);
    CU_ASSERT_EQUAL(row.calls[DDP_CALL_WAIT], 1);
    CU_ASSERT_EQUAL(row.calls[DDP_CALL_ALLOC], 2);
    ddp_times_enter(&t, DDP_PHASE_BACKWARD);
    ddp_device_call_note(DDP_CALL_WAIT);
    ddp_times_reset(&t);
    ddp_times_row(&t, &row);
    CU_ASSERT_EQUAL(row.calls[DDP_CALL_SYNC] + row.calls[DDP_CALL_WAIT] + row.calls[DDP_CALL_ALLOC], 0);
    ddp_device_call_note(DDP_CALL_WAIT);
    ddp_times_enter(&t, DDP_PHASE_OUTSIDE);
    ddp_times_row(&t, &row);
    CU_ASSERT_EQUAL(row.calls[DDP_CALL_WAIT], 2);
    CU_ASSERT_STRING_EQUAL(ddp_device_call_name(DDP_CALL_ALLOC), "device_allocs");
}

/* A piped progress reporter (open_progress) whose records go to *LOG, a
 * new file at PATH (a mkstemp template, filled in). */
static FILE *open_logged_progress(DdpProgress *p, char *path, DdpJsonLog **log)
{
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    *log = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open(path, 0, log), DDP_OK);
    FILE *f = open_progress(p, "0", 0);
    ddp_progress_attach(p, *log, NULL);
    return f;
}

static void test_rank_times_logged(void)
{
    char path[] = "/tmp/ddp_rank_times_XXXXXX";
    DdpJsonLog *log;
    DdpProgress p;
    FILE *f = open_logged_progress(&p, path, &log);
    DdpRankTimes rows[] = {rank_row(10, 6, 5), rank_row(16, 0, 5)};
    int straggler = -2;
    CU_ASSERT_EQUAL(ddp_progress_rank_times(&p, 40, rows, 2, &straggler), DDP_OK);
    CU_ASSERT_EQUAL(straggler, 1);
    CU_ASSERT_EQUAL(ddp_progress_rank_times(&p, 80, rows, 2, &straggler), DDP_OK);
    /* one rank, 36 us of data a step: logged as written, its own time the median */
    DdpRankTimes alone = rank_row(10, 0, 5);
    alone.seconds[DDP_PHASE_DATA] = 0.036e-3 * alone.steps;
    CU_ASSERT_EQUAL(ddp_progress_rank_times(&p, 120, &alone, 1, &straggler), DDP_OK);
    CU_ASSERT_EQUAL(straggler, -1);
    /* said once while it stays the same */
    const char *said = contents(f), *first = strstr(said, "rank 1 is behind: 16.0 ms of work per step where the "
                                                          "ranks' median is 13.0");
    CU_ASSERT_PTR_NOT_NULL(first);
    CU_ASSERT(first && !strstr(first + strlen("rank 1 is behind"), "is behind"));
    CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
    char *text = test_read_file(path, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "{\"event\": \"rank_times\", \"step\": 40, \"rank\": 0, \"data_ms\": 0.0, "
                                               "\"forward_ms\": 10.0, \"backward_ms\": 0.0, \"allreduce_ms\": 6.0, "
                                               "\"optimizer_ms\": 0.0, \"samples_per_s\": 4000.0, \"device_syncs\": 0, "
                                               "\"host_waits\": 5, \"device_allocs\": 0}"));
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "{\"event\": \"ranks\", \"step\": 40, \"median_busy_ms\": 13.0, "
                                               "\"slowest\": 1, \"straggler\": 1}"));
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "{\"event\": \"rank_times\", \"step\": 120, \"rank\": 0, \"data_ms\": 0.036, "
                                               "\"forward_ms\": 10.0, "));
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "{\"event\": \"ranks\", \"step\": 120, \"median_busy_ms\": 10.036, "
                                               "\"slowest\": 0}"));
    if (text && !strstr(text, "\"median_busy_ms\": 13.0, \"slowest\": 1, \"straggler\": 1}"))
        fprintf(stderr, "\n%s\n", text);
    free(text);
    unlink(path);
    fclose(f);
}

static void test_plain_when_piped(void)
{
    static const struct {
        const char *tty;
        int mpirun;
    } cases[] = {{"0", 0}, {NULL, 0}, {NULL, 1}, {"0", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        DdpProgress p;
        FILE *f = open_progress(&p, cases[i].tty, cases[i].mpirun); /* a file is no terminal */
        ddp_progress_update(&p, 1, 1, 1, 2, 1.0, 10, 1, 0);
        CU_ASSERT_STRING_EQUAL(contents(f), "");
        DdpReport r = {.epoch = 1, .epochs = 1, .step = 2, .loss = 1, .lr = 0.5, .samples_per_s = 10, .seconds = 1};
        CU_ASSERT_EQUAL(ddp_progress_epoch(&p, &r), DDP_OK);
        CU_ASSERT_STRING_EQUAL(contents(f), "epoch 1/1  step 2  loss 1.0000  lr 0.5  10 samples/s  1.0s\n");
        fclose(f);
    }
}

/* A report a stop left out, made by the resumed run: the loss and the
 * evaluation, but no throughput or time (the stopped run's), on the line
 * and in the log. */
static void test_left_out_report(void)
{
    char path[] = "/tmp/ddp_left_out_XXXXXX";
    DdpJsonLog *log;
    DdpProgress p;
    FILE *f = open_logged_progress(&p, path, &log);
    DdpReport r = {.epoch = 1, .epochs = 2, .step = 10, .loss = 0.5, .lr = 0.1, .samples_per_s = 10, .seconds = 1,
                   .data_wait_s = 0.5, .evaluated = 1, .test_loss = 0.25, .test_acc = 0.75, .untimed = 1};
    CU_ASSERT_EQUAL(ddp_progress_epoch(&p, &r), DDP_OK);
    r.step = 14;
    CU_ASSERT_EQUAL(ddp_progress_eval(&p, &r), DDP_OK);
    CU_ASSERT_STRING_EQUAL(contents(f), "epoch 1/2  step 10  loss 0.5000  test_loss 0.2500  test_acc 0.7500  lr 0.1  "
                                        "(trained before the stop)\n"
                                        "  step 14  loss 0.5000  test_loss 0.2500  test_acc 0.7500  lr 0.1  "
                                        "(trained before the stop)\n");
    CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
    char *text = test_read_file(path, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "{\"event\": \"epoch\", \"epoch\": 1, \"step\": 10, \"loss\": 0.5, "
                                               "\"lr\": 0.1, \"test_loss\": 0.25, \"test_acc\": 0.75}\n"
                                               "{\"event\": \"eval\", \"epoch\": 1, \"step\": 14, \"loss\": 0.5, "
                                               "\"lr\": 0.1, \"test_loss\": 0.25, \"test_acc\": 0.75}\n"));
    if (text && !strstr(text, "\"test_acc\": 0.75}\n{"))
        fprintf(stderr, "\n%s\n", text);
    free(text);
    unlink(path);
    fclose(f);
}

void suite_progress(void)
{
    static const TestCase cases[] = {
        {"a terminal gets a bar with loss, samples/s and ETA, erased before lines", test_bar_on_a_terminal},
        {"piped, or under mpirun: whole lines only", test_plain_when_piped},
        {"a report a stop left out, made after the resume: its loss and evaluation, no time or throughput",
         test_left_out_report},
        {"a straggler: the slowest rank's work 20% over the median's; waiting is not work", test_straggler_rule},
        {"the ranks' times: a record per rank and a summary; a straggler said once", test_rank_times_logged},
        {"device calls count inside a step's phases, not between steps", test_device_calls_in_steps},
        {NULL, NULL},
    };
    test_add_suite("progress", cases);
}
