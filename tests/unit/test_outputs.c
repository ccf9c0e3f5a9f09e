/*
 * What the generated program may write (runtime/dirs.h): --export,
 * checkpoints and --log name a regular file or nothing; links are followed,
 * never replaced; a device, a FIFO or a directory is refused and stays what
 * it was; a path under a regular file is "not a directory".
 *
 * The device is made in the test's own directory (mknod, as root) so that
 * nothing outside it can be harmed even when the rule is broken; without the
 * right to make one, that case is skipped and says so.
 */
#include <errno.h>
#include <fcntl.h>  // open: stderr sent to a file
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>  // makedev
#include <sys/wait.h>
#include <unistd.h>

#include "dirs.h"         // ddp_output_check, ddp_output_target, ddp_output_in_place_check
#include "jsonlog.h"      // ddp_jsonlog_open, ddp_jsonlog_check
#include "safetensors.h"  // ddp_safetensors_write
#include "testutil.h"
#include "trainer_harness.h"  // harness_write_file
#include "weights.h"      // ddp_weights_check_writable

static float one[1] = {1.0f};
static const DdpTensor tensor = {.name = "x", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {1}, .data = one};

static int message_has(const char *what)
{
    if (strstr(ddp_error_message(), what))
        return 1;
    fprintf(stderr, "\nmessage \"%s\" lacks \"%s\"", ddp_error_message(), what);
    return 0;
}

static mode_t kind_of(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 ? sb.st_mode & S_IFMT : 0;
}

/* The file is refused at start-up (--export's check) and when written, and
 * is still of kind KIND afterwards. */
static void refused(const char *path, mode_t kind, const char *says)
{
    CU_ASSERT_EQUAL(ddp_weights_check_writable("export", path), DDP_BAD_INPUT);
    CU_ASSERT(message_has(says));
    CU_ASSERT_EQUAL(ddp_safetensors_write(path, &tensor, 1, NULL, 0), DDP_BAD_INPUT);
    CU_ASSERT(message_has(says));
    CU_ASSERT_EQUAL(kind_of(path), kind);
}

static void test_export_refuses_what_is_not_a_file(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-outputs-XXXXXX");
    const char *fifo = test_tmp_path(dir, "fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    refused(fifo, S_IFIFO, "fifo: is a FIFO, not a regular file");

    const char *sub = test_tmp_path(dir, "sub");
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    refused(sub, S_IFDIR, "sub: is a directory, not a regular file");

    /* a link to the FIFO: refused as well, and still a link */
    const char *to_fifo = test_tmp_path(dir, "to-fifo");
    CU_ASSERT_EQUAL_FATAL(symlink("fifo", to_fifo), 0);
    refused(to_fifo, S_IFLNK, "to-fifo: links to");
    CU_ASSERT_EQUAL(kind_of(fifo), S_IFIFO);

    /* a link of the kernel's own, which leads where no path does: where
     * /dev/stdout leads when piped, /proc/self/fd/1 to "pipe:[N]" */
    int ends[2];
    CU_ASSERT_EQUAL_FATAL(pipe(ends), 0);
    char fd_path[64];
    snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", ends[1]);
    refused(fd_path, S_IFLNK, ", which is a FIFO, not a regular file; name a file");
    close(ends[0]);
    close(ends[1]);

    /* a character device like /dev/null, but our own */
    const char *null = test_tmp_path(dir, "null");
    if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) == 0)
        refused(null, S_IFCHR, "null: is a character device, not a regular file");
    else
        fprintf(stderr, "\n  (character device case skipped: mknod: %s)", strerror(errno));

    /* under a regular file: not "Permission denied" */
    const char *file = test_tmp_path(dir, "file");
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    const char *under = test_tmp_path(dir, "file/x.safetensors");
    CU_ASSERT_EQUAL(ddp_weights_check_writable("export", under), DDP_BAD_INPUT);
    CU_ASSERT(message_has("file is not a directory"));
    CU_ASSERT_EQUAL(ddp_safetensors_write(under, &tensor, 1, NULL, 0), DDP_BAD_INPUT);
    CU_ASSERT(message_has("file is not a directory"));
    CU_ASSERT_EQUAL(kind_of(file), S_IFREG);
    test_remove_tmpdir(dir);
}

/* A link to a file (or to where one will be) is followed: the target gets
 * the weights, the link stays a link. */
static void test_export_follows_links(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-outputs-XXXXXX");
    const char *link = test_tmp_path(dir, "latest.safetensors");
    CU_ASSERT_EQUAL_FATAL(mkdir(test_tmp_path(dir, "run3"), 0755), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("run3/w.safetensors", link), 0);
    for (int pass = 0; pass < 2; pass++) { /* a new target, then replacing it */
        CU_ASSERT_EQUAL(ddp_weights_check_writable("export", link), DDP_OK);
        CU_ASSERT_EQUAL(ddp_safetensors_write(link, &tensor, 1, NULL, 0), DDP_OK);
        CU_ASSERT_EQUAL(kind_of(link), S_IFLNK);
        CU_ASSERT_EQUAL(kind_of(test_tmp_path(dir, "run3/w.safetensors")), S_IFREG);
        CU_ASSERT_EQUAL(test_count_prefixed(test_tmp_path(dir, "run3"), "w.safetensors.tmp"), 0);
    }
    char *target = NULL;
    CU_ASSERT_EQUAL(ddp_output_target("export", link, &target), DDP_OK);
    CU_ASSERT_STRING_EQUAL(target ? target : "", test_tmp_path(dir, "run3/w.safetensors"));
    free(target);
    /* a loop of links ends */
    CU_ASSERT_EQUAL_FATAL(symlink("loop-b", test_tmp_path(dir, "loop-a")), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("loop-a", test_tmp_path(dir, "loop-b")), 0);
    CU_ASSERT_EQUAL(ddp_output_check("export", test_tmp_path(dir, "loop-a")), DDP_BAD_INPUT);
    CU_ASSERT(message_has("cannot follow the link"));
    test_remove_tmpdir(dir);
}

/* --log is written in place (appended to, read while it grows), never
 * renamed over anything: so a terminal, a pipe or a character device takes
 * it as it is (--log /dev/stderr), and stays what it was; a directory is
 * refused, and so is a path under a file. */
static void test_log_written_in_place(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-outputs-XXXXXX");
    DdpJsonLog *log = NULL;
    const char *null = test_tmp_path(dir, "null");
    if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        CU_ASSERT_EQUAL(ddp_jsonlog_open(null, 0, &log), DDP_OK);
        if (log)
            CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
        log = NULL;
        CU_ASSERT_EQUAL(kind_of(null), S_IFCHR);
    } else {
        fprintf(stderr, "\n  (character device case skipped: mknod: %s)", strerror(errno));
    }
    const char *fifo = test_tmp_path(dir, "fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    CU_ASSERT_EQUAL(ddp_output_in_place_check("log", fifo), DDP_OK);
    CU_ASSERT_EQUAL(kind_of(fifo), S_IFIFO);
    CU_ASSERT_EQUAL(ddp_jsonlog_open(dir, 0, &log), DDP_BAD_INPUT);
    CU_ASSERT(message_has("is a directory; name a file"));
    CU_ASSERT_PTR_NULL(log);
    const char *file = test_tmp_path(dir, "plain");
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_EQUAL(ddp_jsonlog_open(test_tmp_path(dir, "plain/log.jsonl"), 0, &log), DDP_BAD_INPUT);
    CU_ASSERT(message_has("is not a directory"));
    CU_ASSERT_PTR_NULL(log);
    const char *link = test_tmp_path(dir, "log-link");
    CU_ASSERT_EQUAL_FATAL(symlink("log.jsonl", link), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open(link, 0, &log), DDP_OK);
    ddp_jsonlog_close(log);
    CU_ASSERT_EQUAL(kind_of(link), S_IFLNK);
    CU_ASSERT_EQUAL(kind_of(test_tmp_path(dir, "log.jsonl")), S_IFREG);
    test_remove_tmpdir(dir);
}

/* Writes TEXT to DIR/NAME; returns the path, which a later test_tmp_path
 * call may reuse (copy it to keep it). */
static const char *file_with(const char *dir, const char *name, const char *text)
{
    const char *path = test_tmp_path(dir, name);
    harness_write_file(path, text, strlen(text));
    return path;
}

/* 1 when PATH holds the LEN bytes at BYTES (a file refused is left as it was). */
static int holds(const char *path, const void *bytes, size_t len)
{
    size_t got_len = 0;
    char *got = test_read_file(path, &got_len);
    int same = got && got_len == len && memcmp(got, bytes, len) == 0;
    free(got);
    return same;
}

/* What a mistyped --log or --export would destroy is refused at start-up,
 * and left as it was: --log empties (or appends to) what it names, so it
 * takes only an empty file or an earlier log; --export replaces what it
 * names, so it takes only weights (an earlier export, the --init file). */
static void test_outputs_keep_what_is_not_theirs(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-outputs-XXXXXX");
    /* copies: test_tmp_path's buffers are reused */
    char net[256], old_log[256], empty[256], weights[256], job[256], config[256];
    const char *net_text = "net mnist\ninput 784\nlinear 10\n";
    snprintf(net, sizeof net, "%s", file_with(dir, "mnist.net", net_text));
    const char *log_text = "{\"event\": \"start\"}\n";
    snprintf(old_log, sizeof old_log, "%s", file_with(dir, "old.jsonl", log_text));
    snprintf(empty, sizeof empty, "%s", file_with(dir, "empty", ""));
    snprintf(weights, sizeof weights, "%s", test_tmp_path(dir, "w.safetensors"));
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(weights, &tensor, 1, NULL, 0), DDP_OK);
    size_t weights_len = 0;
    char *weights_bytes = test_read_file(weights, &weights_len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(weights_bytes);

    DdpJsonLog *log = NULL;
    for (int append = 0; append <= 1; append++) { /* a fresh run, and a resumed one */
        CU_ASSERT_EQUAL(ddp_jsonlog_open(net, append, &log), DDP_BAD_INPUT);
        CU_ASSERT(message_has("mnist.net: the file there is not a log of this program's, which --log would write "
                              "into: name another file (or remove this one first)"));
        CU_ASSERT_EQUAL(ddp_jsonlog_open(weights, append, &log), DDP_BAD_INPUT);
        CU_ASSERT(message_has("w.safetensors: the file there is not a log of this program's"));
        CU_ASSERT_PTR_NULL(log);
    }
    CU_ASSERT(holds(net, net_text, strlen(net_text)));
    CU_ASSERT(holds(weights, weights_bytes, weights_len));
    CU_ASSERT_EQUAL(ddp_jsonlog_check(net), DDP_BAD_INPUT); /* start-up's check, on every rank */
    const char *config_text = "{\"lr\": 0.1}\n"; /* JSON, but not a log's lines */
    snprintf(config, sizeof config, "%s", file_with(dir, "config.json", config_text));
    CU_ASSERT_EQUAL(ddp_jsonlog_check(config), DDP_BAD_INPUT);
    CU_ASSERT(holds(config, config_text, strlen(config_text)));
    CU_ASSERT_EQUAL(ddp_jsonlog_check("-"), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_check(test_tmp_path(dir, "new.jsonl")), DDP_OK);
    const char *fifo = test_tmp_path(dir, "fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    CU_ASSERT_EQUAL(ddp_jsonlog_check(fifo), DDP_OK); /* not opened: that would wait for a writer */
    for (int i = 0; i < 2; i++) {
        const char *ok = i ? empty : old_log;
        CU_ASSERT_EQUAL(ddp_jsonlog_open(ok, 0, &log), DDP_OK);
        if (log)
            CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
        log = NULL;
    }

    /* --log /dev/stderr where stderr is the job's output file, opened as
     * `2>job.err` opens it (emptied, not appended to): the log is written at
     * the stream's place, between what the job wrote before and after it,
     * never emptying it or being written over; named by its file name too */
    snprintf(job, sizeof job, "%s", test_tmp_path(dir, "job.err"));
    for (int appended = 0; appended <= 1; appended++) { /* 2>job.err, then 2>>job.err */
        int saved = dup(2), to_job = open(job, O_WRONLY | O_CREAT | (appended ? O_APPEND : O_TRUNC), 0600);
        CU_ASSERT_FATAL(saved >= 0 && to_job >= 0);
        fflush(stderr);
        dup2(to_job, 2);
        close(to_job);
        DdpStatus st[5];
        st[0] = write(2, "before\n", 7) == 7 ? DDP_OK : DDP_FAIL;
        st[1] = ddp_jsonlog_check("/dev/stderr");
        st[2] = ddp_jsonlog_check(job);
        st[3] = ddp_jsonlog_open("/dev/stderr", 0, &log);
        DdpLogField record[] = {DDP_LOG_S("event", "start")};
        st[4] = log ? ddp_jsonlog_write(log, record, 1) : DDP_FAIL;
        if (log)
            ddp_jsonlog_close(log);
        log = NULL;
        ssize_t after = write(2, "after\n", 6);
        dup2(saved, 2);
        close(saved);
        for (int i = 0; i < 5; i++)
            CU_ASSERT_EQUAL(st[i], DDP_OK);
        CU_ASSERT_EQUAL(after, 6);
        const char *once = "before\n{\"event\": \"start\"}\nafter\n";
        char twice[128];
        snprintf(twice, sizeof twice, "%s%s", once, once);
        CU_ASSERT(appended ? holds(job, twice, strlen(twice)) : holds(job, once, strlen(once)));
    }
    /* stderr is elsewhere again: the file is a file, and no log (it begins "before") */
    CU_ASSERT_EQUAL(ddp_jsonlog_check(job), DDP_BAD_INPUT);

    /* a log cut short (a full disk) is still a log; a file that cannot be
     * read cannot be told from one: checked in a child that is not root
     * (root reads any file), where it gives that up */
    CU_ASSERT_EQUAL(ddp_jsonlog_check(file_with(dir, "short.jsonl", "{\"ev")), DDP_OK);
    const char *locked = file_with(dir, "locked.jsonl", log_text);
    CU_ASSERT_EQUAL_FATAL(chmod(locked, 0200), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(dir, 0755), 0); /* another user may look inside */
    pid_t child = fork();
    CU_ASSERT_FATAL(child >= 0);
    if (child == 0) {
        if (geteuid() == 0 && setuid(65534) != 0) /* nobody */
            _exit(3);
        _exit(ddp_jsonlog_check(locked) == DDP_BAD_INPUT &&
                      strstr(ddp_error_message(), "locked.jsonl: cannot read the file there to tell whether it is "
                                                  "a log (Permission denied)")
                  ? 0
                  : 1);
    }
    int ws = -1;
    CU_ASSERT_EQUAL_FATAL(waitpid(child, &ws, 0), child);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0); /* 3: setuid failed (no CAP_SETUID) */

    CU_ASSERT_EQUAL(ddp_weights_check_writable("export", net), DDP_BAD_INPUT);
    CU_ASSERT(message_has("mnist.net: the file there is not safetensors weights (not a safetensors file: header length "));
    CU_ASSERT(message_has("), and --export would replace it: name another file (or remove this one first)"));
    CU_ASSERT(holds(net, net_text, strlen(net_text)));
    CU_ASSERT_EQUAL(ddp_weights_check_writable("export", file_with(dir, "old2.jsonl", log_text)), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(ddp_weights_check_writable("export", weights), DDP_OK);
    CU_ASSERT_EQUAL(ddp_weights_check_writable("export", empty), DDP_OK);
    free(weights_bytes);
    test_remove_tmpdir(dir);
}

/* Two processes writing one path over and over, at once: every write
 * succeeds (each has its own temporary name), the file is always a whole
 * one of the two, and no temporary file is left. */
static void test_concurrent_writers(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-outputs-XXXXXX");
    const char *target = test_tmp_path(dir, "w.safetensors");
    pid_t pids[2];
    for (int w = 0; w < 2; w++) {
        pids[w] = fork();
        CU_ASSERT_FATAL(pids[w] >= 0);
        if (pids[w] == 0) {
            float v[4096];
            for (int i = 0; i < 4096; i++)
                v[i] = (float)w;
            DdpTensor mine = {.name = "w", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {4096}, .data = v};
            int failures = 0;
            for (int i = 0; i < 200; i++)
                failures += ddp_safetensors_write(target, &mine, 1, NULL, 0) != DDP_OK;
            _exit(failures ? 1 : 0);
        }
    }
    for (int w = 0; w < 2; w++) {
        int ws = -1;
        CU_ASSERT_EQUAL_FATAL(waitpid(pids[w], &ws, 0), pids[w]);
        CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    DdpSafetensors *f = NULL;
    CU_ASSERT_EQUAL(ddp_safetensors_open(target, &f), DDP_OK);
    if (f)
        ddp_safetensors_close(f);
    CU_ASSERT_EQUAL(test_count_prefixed(dir, "w.safetensors.tmp"), 0);
    test_remove_tmpdir(dir);
}

/* No two outputs share a file, nor take a name of --save DIR's own: each is
 * compared where it would be written (links followed, the directory by
 * inode, so "d/../d/x" is "d/x"); "-", a pipe and a terminal replace
 * nothing and are passed over. */
static void test_outputs_apart(void)
{
    char dir[64], save[128], sub_dir[128], log[256], link[256], fifo[256];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-apart-XXXXXX");
    snprintf(save, sizeof save, "%s/ck", dir);
    snprintf(sub_dir, sizeof sub_dir, "%s/sub", dir);
    CU_ASSERT_FATAL(mkdir(save, 0700) == 0 && mkdir(sub_dir, 0700) == 0);
    snprintf(log, sizeof log, "%s/run.x", dir);
    snprintf(link, sizeof link, "%s/sub/../link.x", dir);
    CU_ASSERT_FATAL(symlink("run.x", test_tmp_path(dir, "link.x")) == 0);
    snprintf(fifo, sizeof fifo, "%s", test_tmp_path(dir, "fifo"));
    CU_ASSERT_FATAL(mkfifo(fifo, 0600) == 0);
    const char *const flags[] = {"log", "export", "conv-algorithms"};
    static const char *const reserved = "checkpoint-";

    const char *apart[] = {log, test_tmp_path(dir, "w.safetensors"), NULL};
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, apart, 3, save, reserved), DDP_OK);
    const char *through_link[] = {log, link, NULL}; /* not there yet: the link's target, by name */
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, through_link, 3, NULL, reserved), DDP_BAD_INPUT);
    CU_ASSERT(message_has("--log ") && message_has(" and --export ") &&
              message_has("link.x name one file, which each would write over the other's: give each its own"));
    const char *last_two[] = {NULL, log, test_tmp_path(dir, "sub/../run.x")};
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, last_two, 3, NULL, reserved), DDP_BAD_INPUT);
    CU_ASSERT(message_has("--export ") && message_has(" and --conv-algorithms "));
    const char *nothing_replaced[] = {"-", "-", NULL};
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, nothing_replaced, 3, NULL, reserved), DDP_OK);
    const char *pipes[] = {fifo, fifo, NULL};
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, pipes, 3, NULL, reserved), DDP_OK);

    /* --save DIR's names: refused however DIR is spelt; others there are fine */
    char in_save[256], beside[256];
    snprintf(in_save, sizeof in_save, "%s/sub/../ck/checkpoint-mnist-000000008.safetensors", dir);
    snprintf(beside, sizeof beside, "%s/ck/weights.safetensors", dir);
    const char *checkpoint_name[] = {NULL, in_save, NULL};
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, checkpoint_name, 3, save, reserved), DDP_BAD_INPUT);
    CU_ASSERT(message_has("--export ") && message_has(": names beginning checkpoint- in --save ") &&
              message_has(" are kept for its checkpoints (written, replaced and pruned there): name another file"));
    const char *other_name[] = {NULL, beside, NULL};
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, other_name, 3, save, reserved), DDP_OK);
    CU_ASSERT_EQUAL(ddp_outputs_apart(flags, checkpoint_name, 3, NULL, reserved), DDP_OK); /* no --save */
    CU_ASSERT_EQUAL(kind_of(log), 0); /* nothing was written */
    test_remove_tmpdir(dir);
}

/* mkdir -p, saying whether it made the directory itself: --save's start-up
 * removes a DIR only on that word (trainer.c), never one that was there or
 * that another process made meanwhile. */
static void test_make_dirs(void)
{
    char dir[64], nested[128], failed[256];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-dirs-XXXXXX");
    snprintf(nested, sizeof nested, "%s/a//b/", dir);
    CU_ASSERT_EQUAL(ddp_make_dirs(nested, failed, sizeof failed), 1);
    CU_ASSERT_EQUAL(kind_of(test_tmp_path(dir, "a/b")), S_IFDIR);
    CU_ASSERT_EQUAL(ddp_make_dirs(nested, failed, sizeof failed), 0); /* there already */
    CU_ASSERT_EQUAL(ddp_make_dirs(test_tmp_path(dir, "a"), failed, sizeof failed), 0);
    CU_ASSERT_EQUAL(ddp_make_dirs(test_tmp_path(dir, "a/b/c"), failed, sizeof failed), 1);
    const char *file = file_with(dir, "file", "x");
    CU_ASSERT_EQUAL(ddp_make_dirs(test_tmp_path(dir, "file/d"), failed, sizeof failed), -1);
    CU_ASSERT_EQUAL(errno, ENOTDIR);
    CU_ASSERT_STRING_EQUAL(failed, file); /* the part in the way */
    CU_ASSERT_EQUAL(kind_of(file), S_IFREG);
    test_remove_tmpdir(dir);
}

/* A write that fails (the disk full: /dev/full stands in for the temporary
 * file's stream) is reported with its reason, under the target's name, and
 * leaves neither the target nor the temporary file; a failed sync of the
 * directory after the rename fails the output too: the file is in place,
 * but a crash could still lose it. */
static void test_output_failures_say_why(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-fails-XXXXXX");
    const char *target = test_tmp_path(dir, "w.st");
    DdpOutput out;
    CU_ASSERT_EQUAL_FATAL(ddp_output_open("export", target, &out), DDP_OK);
    fclose(out.f);
    out.f = fopen("/dev/full", "wb");
    CU_ASSERT_FATAL(out.f != NULL);
    static char block[1 << 20]; /* past the stream's buffer, so that fwrite itself fails */
    CU_ASSERT_EQUAL(ddp_output_write(&out, block, sizeof block), 0);
    CU_ASSERT_EQUAL(ddp_output_write(&out, block, 1), 0); /* the file is lost: no write succeeds after */
    char *tmp = strdup(out.tmp);
    CU_ASSERT_EQUAL(ddp_output_commit(&out), DDP_FAIL);
    CU_ASSERT(message_has("w.st: cannot write: No space left on device"));
    CU_ASSERT(strstr(ddp_error_message(), ".tmp-") == NULL);
    CU_ASSERT_EQUAL(kind_of(tmp), 0);
    CU_ASSERT_EQUAL(kind_of(target), 0);
    free(tmp);

    test_fail_directory_sync = 1;
    CU_ASSERT_EQUAL(ddp_safetensors_write(target, &tensor, 1, NULL, 0), DDP_FAIL);
    test_fail_directory_sync = 0;
    CU_ASSERT(message_has("w.st: written, but its directory could not be synced: Input/output error"));
    CU_ASSERT_EQUAL(kind_of(target), S_IFREG);
    CU_ASSERT_EQUAL(ddp_safetensors_write(target, &tensor, 1, NULL, 0), DDP_OK);
    test_remove_tmpdir(dir);
}

/* A program started with stderr closed (2>&-) holds it on /dev/null:
 * the --log file opened next would otherwise take descriptor 2, and the
 * stop's messages land in it among the JSON lines. */
static void test_closed_stderr_spares_the_log(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "d=$(mktemp -d); trap 'rm -rf $d' EXIT; python3 tests/fault/small_data.py $d/data 256 64 "
                             "> /dev/null; %s examples/mlp.net --target cpu -o $d/p > /dev/null || exit 9; "
                             "DDP_TEST_STOP_AFTER=3 $d/p --data $d/data --epochs 2 --log $d/lg.jsonl 2>&- > /dev/null; "
                             "echo status=$?; python3 -c 'import json, sys; n = [json.loads(l) for l in "
                             "open(sys.argv[1])]; print(\"json lines:\", len(n))' $d/lg.jsonl",
                             test_ddpc()) > 0);
    test_run(cmd, &out);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "status=75\njson lines: "));
    if (!out || !strstr(out, "json lines: "))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

void suite_outputs(void)
{
    static const TestCase cases[] = {
        {"--export refuses a FIFO, a directory, a device, a path under a file", test_export_refuses_what_is_not_a_file},
        {"--export follows links: the target is written, the link stays", test_export_follows_links},
        {"--log is written in place: a pipe or a character device stays one, a directory is refused",
         test_log_written_in_place},
        {"two writers of one path at once: each renames a whole file of its own", test_concurrent_writers},
        {"--log takes an empty file or a log, --export weights: anything else there is refused and kept",
         test_outputs_keep_what_is_not_theirs},
        {"no two outputs write one file, and none takes a name of --save DIR's checkpoints", test_outputs_apart},
        {"mkdir -p says whether it made the directory itself", test_make_dirs},
        {"a full disk and a failed directory sync are reported, with their reasons", test_output_failures_say_why},
        {"stderr closed at start-up: the stop's messages stay out of --log", test_closed_stderr_spares_the_log},
        {NULL, NULL},
    };
    test_add_suite("outputs", cases);
}
