/*
 * progress.c: rank 0's reports (see progress.h).
 *
 * Two audiences. A person at a terminal wants to see the run is alive, so a
 * terminal gets one line rewritten in place with \r (and erased with ESC [K
 * before anything else is printed); a pipe or a file gets only whole lines,
 * since a CI log full of carriage returns is unreadable. Programs read --log,
 * which holds the same numbers, exactly, as JSON lines, and TensorBoard reads
 * them from --tensorboard under the same names.
 *
 * The trainer decides when to report and hands over finished numbers; this
 * file only formats, so the format lives in one place.
 */
#include "progress.h"
#include "device_calls.h"  // ddp_device_call_name: the log's names of the counts

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BAR_WIDTH = 24 }; /* characters of the progress bar */

void ddp_progress_init(DdpProgress *p, const char *prog, FILE *out, int quiet)
{
    *p = (DdpProgress){.prog = prog, .out = out, .quiet = quiet, .straggler_said = -1};
    /* mpirun gives its ranks a pseudo-terminal even when its own output goes
     * to a file; unless told otherwise (our --nproc-per-node says), a rank
     * under mpirun writes plain lines, which read well in both places. */
    const char *said = getenv(DDP_PROGRESS_TTY_ENV);
    int tty = said && (strcmp(said, "0") == 0 || strcmp(said, "1") == 0) ? said[0] == '1'
              : getenv("OMPI_COMM_WORLD_SIZE")                          ? 0
                                                                        : isatty(fileno(out));
    p->tty = !quiet && tty;
}

void ddp_progress_attach(DdpProgress *p, DdpJsonLog *log, DdpTensorboard *tb)
{
    p->log = log;
    p->tb = tb;
}

/* Flushes OUT. A write that failed, most often to a pipe whose reader has
 * ended (`| head -1`: a training process ignores SIGPIPE, rank_signals.c,
 * rather than die of it with its work unsaved), is said once on stderr and
 * OUT gets nothing more: the run goes on to its end and its checkpoints,
 * --log and --tensorboard still get every record. (An evaluation, whose
 * result OUT holds, then fails: trainer.c.) */
static void flush_out(DdpProgress *p)
{
    errno = 0;
    if (fflush(p->out) == 0 && !ferror(p->out))
        return;
    int failure = errno;
    p->quiet = 1;
    p->tty = p->line_shown = 0;
    p->out_failed = failure ? failure : -1;
    if (!p->out_is_result)
        fprintf(stderr, "%s: warning: cannot write the reports to standard output (%s): the run goes on without "
                "them (--log FILE keeps them)\n", p->prog, failure ? strerror(failure) : "a write failed");
}

/* A record --log could not take, or a plot --tensorboard could not (a full
 * disk; their messages name the file): said once for that file, which gets
 * nothing more, and kept as the run's failure for its end (ddp_progress_
 * lost_records). The run goes on: stopping would lose its training since
 * the last checkpoint for the sake of a record. */
static void lose_file(DdpProgress *p, int is_log)
{
    if (!p->lost[0])
        snprintf(p->lost, sizeof p->lost, "%s", ddp_error_message());
    fprintf(stderr, "%s: warning: %s: the run goes on without it, to end with status 1\n", p->prog,
            ddp_error_message());
    ddp_error_clear();
    if (is_log)
        p->log = NULL;
    else
        p->tb = NULL;
}

static void log_record(DdpProgress *p, const DdpLogField *f, int n)
{
    if (p->log && ddp_jsonlog_write(p->log, f, n) != DDP_OK)
        lose_file(p, 1);
}

static void plot_scalar(DdpProgress *p, const char *tag, int64_t step, double value)
{
    if (p->tb && ddp_tensorboard_scalar(p->tb, tag, step, value) != DDP_OK)
        lose_file(p, 0);
}

DdpStatus ddp_progress_lost_records(const DdpProgress *p)
{
    if (!p->lost[0])
        return DDP_OK;
    return DDP_ERR(DDP_FAIL, "%s: the run went on without it to its end, and saved as it would", p->lost);
}

/* Erases the progress line, if one is showing, before a plain line. */
static void clear_line(DdpProgress *p)
{
    if (p->line_shown) {
        fputs("\r\033[K", p->out);
        p->line_shown = 0;
    }
}

DdpStatus ddp_progress_start(DdpProgress *p, const char *net, const char *data, int world, int64_t batch_per_rank,
                             int batch_global, int step_graphs, const char *not_invariant)
{
    if (!p->log)
        return DDP_OK;
    DdpLogField f[] = {DDP_LOG_S("event", "start"), DDP_LOG_S("net", net), DDP_LOG_S("data", data),
                       DDP_LOG_I("world_size", world),
                       DDP_LOG_I("batch_per_rank", batch_per_rank), DDP_LOG_I("global_batch", batch_per_rank * world),
                       DDP_LOG_B("global_batch_set", batch_global), DDP_LOG_B("step_graphs", step_graphs),
                       DDP_LOG_B("bit_invariant", !not_invariant), DDP_LOG_S("bit_invariant_why", not_invariant)};
    log_record(p, f, not_invariant ? 10 : 9);
    return DDP_OK;
}

DdpStatus ddp_progress_restart(DdpProgress *p, int64_t restart, const char *cause)
{
    if (!p->log)
        return DDP_OK;
    DdpLogField f[] = {DDP_LOG_S("event", "restart"), DDP_LOG_I("restart", restart), DDP_LOG_S("cause", cause)};
    log_record(p, f, 3);
    return DDP_OK;
}

DdpStatus ddp_progress_eval_only(DdpProgress *p, double test_loss, double test_acc, int64_t samples,
                                 const char *confusion)
{
    if (!p->log)
        return DDP_OK;
    DdpLogField f[] = {DDP_LOG_S("event", "eval_only"), DDP_LOG_D("test_loss", test_loss),
                       DDP_LOG_D("test_acc", test_acc), DDP_LOG_I("samples", samples),
                       DDP_LOG_J("confusion", confusion)};
    log_record(p, f, 5);
    return DDP_OK;
}

DdpStatus ddp_progress_stop(DdpProgress *p, const char *signal, int64_t step, const char *checkpoint)
{
    if (!p->log)
        return DDP_OK;
    DdpLogField f[] = {DDP_LOG_S("event", "stop"), DDP_LOG_S("signal", signal), DDP_LOG_I("step", step),
                       DDP_LOG_S("checkpoint", checkpoint ? checkpoint : "")};
    log_record(p, f, checkpoint ? 4 : 3);
    return DDP_OK;
}

/* X to the nearest 1/PER_UNIT (1000: to the microsecond, X in ms): what the
 * log's reader can use, without a double's noise digits (dividing, the
 * result is the double nearest the decimal, which prints as it; multiplying
 * by 1e-3 would not be: 36 * 1e-3 prints 0.036000000000000004). */
static double rounded(double x, double per_unit)
{
    return round(x * per_unit) / per_unit;
}

DdpStatus ddp_progress_rank_times(DdpProgress *p, int64_t step, const DdpRankTimes *rows, int n, int *straggler)
{
    double median;
    int slowest;
    *straggler = ddp_times_straggler(rows, n, &slowest, &median);
    for (int r = 0; r < n; r++) {
        const DdpRankTimes *row = &rows[r];
        double seconds = 1e-3 * ddp_times_step_ms(row) * row->steps;
        double samples_per_s = seconds > 0 ? row->samples / seconds : 0;
        char keys[DDP_PHASE_COUNT][24];
        DdpLogField f[4 + DDP_PHASE_COUNT + DDP_CALL_KINDS];
        int k = 0;
        f[k++] = DDP_LOG_S("event", "rank_times");
        f[k++] = DDP_LOG_I("step", step);
        f[k++] = DDP_LOG_I("rank", r);
        for (int ph = 0; ph < DDP_PHASE_COUNT; ph++) {
            snprintf(keys[ph], sizeof keys[ph], "%s_ms", ddp_phase_name((DdpPhase)ph));
            f[k++] = DDP_LOG_D(keys[ph], rounded(ddp_times_ms(row, (DdpPhase)ph), 1000));
        }
        f[k++] = DDP_LOG_D("samples_per_s", rounded(samples_per_s, 10));
        int plotted = k; /* the times and the rate; the counts below are the log's */
        for (int c = 0; c < DDP_CALL_KINDS; c++)
            f[k++] = DDP_LOG_I(ddp_device_call_name((DdpDeviceCall)c), (int64_t)row->calls[c]);
        log_record(p, f, k);
        for (int i = 3; p->tb && i < plotted; i++) {
            char tag[48];
            snprintf(tag, sizeof tag, "rank%d/%s", r, f[i].key);
            plot_scalar(p, tag, step, f[i].f);
        }
    }
    DdpLogField s[] = {DDP_LOG_S("event", "ranks"), DDP_LOG_I("step", step), DDP_LOG_D("median_busy_ms", rounded(median, 1000)),
                       DDP_LOG_I("slowest", slowest), DDP_LOG_I("straggler", *straggler)};
    log_record(p, s, *straggler >= 0 ? 5 : 4);
    if (*straggler >= 0 && *straggler != p->straggler_said) {
        const DdpRankTimes *row = &rows[*straggler];
        ddp_progress_note(p, "rank %d is behind: %.1f ms of work per step where the ranks' median is %.1f (data "
                          "%.1f, forward %.1f, backward %.1f, optimizer %.1f ms)", *straggler,
                          ddp_times_busy_ms(row), median, ddp_times_ms(row, DDP_PHASE_DATA),
                          ddp_times_ms(row, DDP_PHASE_FORWARD), ddp_times_ms(row, DDP_PHASE_BACKWARD),
                          ddp_times_ms(row, DDP_PHASE_OPTIMIZER));
    }
    p->straggler_said = *straggler;
    return DDP_OK;
}

void ddp_progress_note(DdpProgress *p, const char *fmt, ...)
{
    if (p->quiet)
        return;
    clear_line(p);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    flush_out(p);
}

/* "9s", "4m05s", "2h13m". */
static void duration(char *buf, size_t len, double s)
{
    if (!(s >= 0) || s > 1e9)
        snprintf(buf, len, "?");
    else if (s < 60)
        snprintf(buf, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, len, "%dh%02dm", (int)(s / 3600), ((int)s % 3600) / 60);
}

void ddp_progress_update(DdpProgress *p, int64_t epoch, int64_t epochs, int64_t batch, int64_t batches,
                         double loss, double samples_per_s, double eta_s, double data_share)
{
    if (!p->tty)
        return;
    char eta[32], bar[BAR_WIDTH + 1];
    duration(eta, sizeof eta, eta_s);
    int filled = batches > 0 ? (int)(BAR_WIDTH * (batch < batches ? batch : batches) / batches) : 0;
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    char data[32] = "";
    if (data_share > DDP_PROGRESS_DATA_SHARE_SHOWN)
        snprintf(data, sizeof data, "  data %.0f%%", 100 * data_share);
    fprintf(p->out, "\repoch %lld/%lld [%s] %lld/%lld  loss %.4f  %.0f samples/s%s  ETA %s\033[K", (long long)epoch,
            (long long)epochs, bar, (long long)batch, (long long)batches, loss, samples_per_s, data, eta);
    flush_out(p);
    p->line_shown = 1;
}

/* The numbers both line kinds share: "loss 0.5123  test_loss ...  lr ...  N samples/s". */
static void print_numbers(DdpProgress *p, const DdpReport *r)
{
    fprintf(p->out, "step %lld  loss %.4f", (long long)r->step, r->loss);
    if (r->evaluated)
        fprintf(p->out, "  test_loss %.4f  test_acc %.4f", r->test_loss, r->test_acc);
    fprintf(p->out, "  lr %.3g", r->lr);
    if (r->untimed)
        fputs("  (trained before the stop)", p->out);
    else
        fprintf(p->out, "  %.0f samples/s", r->samples_per_s);
}

/* The report's numbers as TensorBoard scalars at its step, named as in the
 * log. Its `loss` is always the mean since the previous point: an epoch
 * report's own, the epoch's mean, would jump back at each epoch's end of a
 * run that reports within epochs (--eval-every). */
static void plot(DdpProgress *p, const DdpReport *r)
{
    plot_scalar(p, "loss", r->step, r->span_loss);
    plot_scalar(p, "lr", r->step, r->lr);
    if (!r->untimed)
        plot_scalar(p, "samples_per_s", r->step, r->samples_per_s);
    if (r->evaluated) {
        plot_scalar(p, "test_loss", r->step, r->test_loss);
        plot_scalar(p, "test_acc", r->step, r->test_acc);
    }
}

/* Keeps the best accuracy for the summary, and writes the log line and the plots. */
static DdpStatus record(DdpProgress *p, const DdpReport *r, int is_epoch)
{
    if (r->evaluated && (p->best_epoch == 0 || r->test_acc > p->best_acc)) {
        p->best_acc = r->test_acc;
        p->best_epoch = r->epoch;
    }
    plot(p, r);
    if (!p->log)
        return DDP_OK;
    DdpLogField f[12];
    int n = 0;
    f[n++] = DDP_LOG_S("event", is_epoch ? "epoch" : "eval");
    f[n++] = DDP_LOG_I("epoch", r->epoch);
    f[n++] = DDP_LOG_I("step", r->step);
    f[n++] = DDP_LOG_D("loss", r->loss);
    f[n++] = DDP_LOG_F("lr", r->lr);
    if (!r->untimed)
        f[n++] = DDP_LOG_D("samples_per_s", r->samples_per_s);
    if (r->evaluated) {
        f[n++] = DDP_LOG_D("test_loss", r->test_loss);
        f[n++] = DDP_LOG_D("test_acc", r->test_acc);
    }
    if (is_epoch && !r->untimed) {
        f[n++] = DDP_LOG_D("time_s", r->seconds);
        f[n++] = DDP_LOG_D("data_wait_s", r->data_wait_s);
    }
    log_record(p, f, n);
    return DDP_OK;
}

DdpStatus ddp_progress_epoch(DdpProgress *p, const DdpReport *r)
{
    if (!p->quiet) {
        clear_line(p);
        fprintf(p->out, "epoch %lld/%lld  ", (long long)r->epoch, (long long)r->epochs);
        print_numbers(p, r);
        if (!r->untimed)
            fprintf(p->out, "  %.1fs", r->seconds);
        fputc('\n', p->out);
        flush_out(p);
    }
    return record(p, r, 1);
}

DdpStatus ddp_progress_eval(DdpProgress *p, const DdpReport *r)
{
    if (!p->quiet) {
        clear_line(p);
        fputs("  ", p->out);
        print_numbers(p, r);
        fputc('\n', p->out);
        flush_out(p);
    }
    return record(p, r, 0);
}

void ddp_progress_summary(DdpProgress *p, int64_t steps, double seconds, double samples_per_s)
{
    if (p->quiet)
        return;
    clear_line(p);
    fprintf(p->out, "done  %lld steps", (long long)steps);
    if (p->best_epoch)
        fprintf(p->out, "  best test_acc %.4f (epoch %lld)", p->best_acc, (long long)p->best_epoch);
    fprintf(p->out, "  %.1fs", seconds);
    if (samples_per_s > 0) /* none where this run trained no step (resumed past --max-steps) */
        fprintf(p->out, "  %.0f samples/s", samples_per_s);
    fputc('\n', p->out);
    flush_out(p);
}

void ddp_progress_end(DdpProgress *p)
{
    if (p->line_shown) {
        fputc('\n', p->out);
        flush_out(p);
        p->line_shown = 0;
    }
}
