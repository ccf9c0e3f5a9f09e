/*
 * Tests of --save, --save-every and --resume (runtime/checkpoint.c and the
 * trainer's use of it), end to end with the tiny net (tiny_net.c) in a forked
 * child, as test_trainer.c does.
 *
 * The promise under test is SPEC.md's: a run stopped and resumed ends with
 * exactly the weights of an uninterrupted run, compared bit for bit through
 * --export; a kill at any moment, even while a checkpoint is being written,
 * loses nothing but the steps since the last one; and a checkpoint that is
 * damaged, cut short, of another net or of other settings is refused with a
 * message naming the file, or passed over for an older good one.
 */
#include <dirent.h>
#include <limits.h>  // PATH_MAX: a --save too deep for its checkpoints' names
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>  // setrlimit: a log file that cannot grow, as on a full disk
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>  // waitpid
#include <unistd.h>
#include <zlib.h>      // crc32: a checksum that holds over an edited value

#include "checkpoint.h"       // ddp_checkpoint_save, _load: files made and read directly
#include "conv_choices.h"     // DDP_CONV_CHOICES_TEXT
#include "dirs.h"             // ddp_make_dirs
#include "safetensors.h"      // ddp_safetensors_open: what a checkpoint holds
#include "testutil.h"
#include "tiny_net.h"         // tiny_net, tiny_net_train
#include "trainer_harness.h"  // harness_run, harness_start, harness_write_set, harness_has
#include "weights.h"          // DDP_STEP_COUNT_MAX

static char tmpdir[64], data_dir[160];

static const char *path(const char *name) { return test_tmp_path(tmpdir, name); }

/* tmpdir/data: 200 train (10 steps of 20 per epoch), 50 test, 28x28. */
static void setup(void)
{
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_checkpoint_XXXXXX");
    snprintf(data_dir, sizeof data_dir, "%s/data", tmpdir);
    mkdir(data_dir, 0755);
    harness_write_set(data_dir, "train", 200, 28, 28, 1);
    harness_write_set(data_dir, "t10k", 50, 28, 28, 2);
}

static const DdpNet *net(void)
{
    DdpTrainConfig train = tiny_net_train();
    return tiny_net(&train, 1, 10);
}

/* The checkpoint files in DIR (TMP: the temporary ones). */
static int count_files(const char *dir, int tmp)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        int is_tmp = strstr(e->d_name, ".safetensors.tmp") != NULL;
        int is_checkpoint = len > 12 && strcmp(e->d_name + len - 12, ".safetensors") == 0;
        n += strncmp(e->d_name, "checkpoint-", 11) == 0 && (tmp ? is_tmp : is_checkpoint);
    }
    if (d)
        closedir(d);
    return n;
}

/* When the newest temporary checkpoint file in DIR was written; 0 if none. */
static double newest_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    double newest = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (strstr(e->d_name, ".safetensors.tmp") && stat(test_tmp_path(dir, e->d_name), &st) == 0 &&
            st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9 > newest)
            newest = st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
    }
    if (d)
        closedir(d);
    return newest;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Flips one bit of PATH at byte OFFSET from its end. */
static void flip_bit(const char *file, long from_end)
{
    FILE *f = fopen(file, "r+b");
    CU_ASSERT_FATAL(f != NULL);
    fseek(f, -from_end, SEEK_END);
    int c = fgetc(f);
    fseek(f, -from_end, SEEK_END);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* Edits FILE's header in place: sed's FROM (a basic regular expression,
 * which must match) made TO, of the same length, so the file stays well formed. */
static void edit_header(const char *file, const char *from, const char *to)
{
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "grep -q '%s' %s && sed -i 's/%s/%s/' %s", from, file, from, to, file) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
}

static void cut_short(const char *file, long bytes)
{
    struct stat st;
    CU_ASSERT_FATAL(stat(file, &st) == 0);
    CU_ASSERT_FATAL(truncate(file, st.st_size - bytes) == 0);
}

/* ---- bit for bit ------------------------------------------------------------- */

/* Stopped at STOP with FLAGS, resumed, and compared with one uninterrupted
 * run of 3 epochs, STEPS steps (10 an epoch, fewer with --no-sync-every). */
static void stop_and_resume(const char *flags, int stop, int steps)
{
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s %s --export %s", data_dir, flags, path("whole.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s %s --max-steps %d --save %s --save-every 4", data_dir, flags,
                                stop, path("ck")), 0);
    char saved[64];
    snprintf(saved, sizeof saved, "checkpoint-tiny-%09d.safetensors", stop);
    CU_ASSERT(harness_has(out, saved)); /* the last state is kept whatever --save-every says */
    free(out);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s %s --save %s --resume --export %s", data_dir, flags,
                                path("ck"), path("resumed.st")), 0);
    char resumed[96];
    snprintf(resumed, sizeof resumed, "checkpoint-tiny-%09d.safetensors: step %d", stop, stop);
    CU_ASSERT(harness_has(out, resumed));
    char done[32];
    snprintf(done, sizeof done, "done  %d steps", steps);
    CU_ASSERT(harness_has(out, done));
    free(out);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("resumed.st")));
    test_remove_tmpdir(path("ck"));
}

static void test_resume_bit_for_bit(void)
{
    setup();
    stop_and_resume("--no-shuffle --lr 0.05", 21, 30);
    stop_and_resume("--eval-every 3", 7, 30);
    stop_and_resume("--no-sync-every 3", 2, 12);   /* 4 steps an epoch, the last of one batch */
    stop_and_resume("--no-sync-every 3", 4, 12);   /* at an epoch's end */
    stop_and_resume("", 10, 30);                   /* at an epoch's end */
    stop_and_resume("", 13, 30);
    /* explicitly named, an older checkpoint continues as well (whole.st is
     * the last call's, with no flags) */
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 9 --save %s --save-every 4", data_dir,
                                path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --resume %s/checkpoint-tiny-000000004.safetensors --export %s",
                                data_dir, path("ck"), path("from4.st")), 0);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("from4.st")));
    test_remove_tmpdir(tmpdir);
}

/* 1 when tensor NAME is the same in the safetensors files A and B. */
static int same_tensor(const char *a, const char *b, const char *name)
{
    DdpSafetensors *fa = NULL, *fb = NULL;
    int same = 0;
    if (ddp_safetensors_open(a, &fa) == DDP_OK && ddp_safetensors_open(b, &fb) == DDP_OK) {
        const DdpTensor *ta = ddp_safetensors_find(fa, name), *tb = ddp_safetensors_find(fb, name);
        same = ta && tb && ta->nbytes == tb->nbytes && memcmp(ta->data, tb->data, ta->nbytes) == 0;
    }
    if (fa)
        ddp_safetensors_close(fa);
    if (fb)
        ddp_safetensors_close(fb);
    return same;
}

/* The comparison above only means something if what a checkpoint carries is
 * used: the same checkpoint with its momentum zeroed (a valid file) must
 * end with other weights. */
static void test_optimizer_state_matters(void)
{
    setup();
    const DdpNet *n = net();
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --export %s", data_dir, path("whole.st")), 0);
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --max-steps 8 --save %s", data_dir, path("ck")), 0);
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    DdpCheckpointRun run;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_load(n, path("ck/checkpoint-tiny-000000008.safetensors"), &run, &state), DDP_OK);
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --resume %s/checkpoint-tiny-000000008.safetensors --export %s",
                                data_dir, path("ck"), path("resumed.st")), 0);
    CU_ASSERT(same_tensor(path("whole.st"), path("resumed.st"), "fc.weight"));
    memset(opt, 0, sizeof opt);
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("zeroed"), &run, &state, written, sizeof written), DDP_OK);
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --resume %s --export %s", data_dir, written,
                                path("no_momentum.st")), 0);
    CU_ASSERT(!same_tensor(path("whole.st"), path("no_momentum.st"), "fc.weight"));
    test_remove_tmpdir(tmpdir);
}

/* ---- what a directory holds ------------------------------------------------------- */

static void test_keeps_three_and_resumes_past_the_end(void)
{
    setup();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s/deep/er --save-every 1 --max-steps 12", data_dir,
                                path("ck")), 0);
    free(out);
    CU_ASSERT_EQUAL(count_files(path("ck/deep/er"), 0), DDP_CHECKPOINT_KEEP);
    CU_ASSERT_EQUAL(count_files(path("ck/deep/er"), 1), 0);
    CU_ASSERT_EQUAL(access(path("ck/deep/er/checkpoint-tiny-000000012.safetensors"), F_OK), 0);
    CU_ASSERT_EQUAL(access(path("ck/deep/er/checkpoint-tiny-000000010.safetensors"), F_OK), 0);
    /* --max-steps counts from the start: a run already past it ends at once */
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s/deep/er --resume --max-steps 5", data_dir,
                                path("ck")), 0);
    CU_ASSERT(harness_has(out, "step 12"));
    CU_ASSERT(harness_has(out, "done  12 steps"));
    CU_ASSERT(!harness_has(out, " samples/s\n")); /* it trained none */
    free(out);
    /* an empty directory: the restart command works for the first start too */
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --resume --max-steps 2", data_dir,
                                path("fresh")), 0);
    CU_ASSERT(harness_has(out, "no checkpoint in "));
    CU_ASSERT(harness_has(out, "fresh yet: starting from step 0"));
    free(out);
    test_remove_tmpdir(tmpdir);
}

/* The newest checkpoint damaged, cut short or not a file: skipped with a
 * warning, the one before it used. */
static void test_skips_damaged(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --export %s", data_dir, path("whole.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --save-every 5 --max-steps 15", data_dir,
                                path("ck")), 0);
    flip_bit(path("ck/checkpoint-tiny-000000015.safetensors"), 100);
    cut_short(path("ck/checkpoint-tiny-000000010.safetensors"), 7);
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --resume --export %s", data_dir, path("ck"),
                                path("resumed.st")), 0);
    CU_ASSERT(harness_has(out, "tiny_train: warning: skipping "));
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000015.safetensors: damaged: its checksum is "));
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000010.safetensors: tensor "));
    CU_ASSERT(harness_has(out, "(truncated?)"));
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000005.safetensors: step 5"));
    free(out);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("resumed.st")));
    /* every one unusable: said, and a run from step 0 that nothing of theirs
     * reached, bit for bit a first run's. The first run starts from weights
     * of 2 steps (--init), so that the step counts the damaged ones hold
     * (a run from step 0's, weights.h) are not a first run's too. */
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --save-every 3 --max-steps 6", data_dir,
                                path("bad")), 0);
    cut_short(path("bad/checkpoint-tiny-000000003.safetensors"), 3);
    flip_bit(path("bad/checkpoint-tiny-000000006.safetensors"), 100);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 2 --export %s", data_dir, path("two.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --init %s --max-steps 4 --export %s", data_dir,
                                path("two.st"), path("first.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --init %s --save %s --resume --max-steps 4 --export %s",
                                data_dir, path("two.st"), path("bad"), path("over.st")), 0);
    CU_ASSERT(harness_has(out, "no usable checkpoint in "));
    CU_ASSERT(harness_has(out, "bad (2 skipped, above): starting from step 0"));
    free(out);
    CU_ASSERT(harness_same_tensors(path("first.st"), path("over.st")));
    /* one that cannot be opened (here a link to a volume not mounted; its
     * permissions, an I/O error) may be good: the run stops, saying so,
     * rather than start over above it and prune it */
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --max-steps 5", data_dir, path("gone")), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("/nonexistent/volume/checkpoint-tiny-000000010.safetensors",
                                  path("gone/checkpoint-tiny-000000010.safetensors")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --resume --max-steps 15", data_dir, path("gone")),
                    2);
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000010.safetensors: cannot open: No such file or directory: a "
                               "checkpoint that may be good is not skipped"));
    free(out);
    CU_ASSERT(access(path("gone/checkpoint-tiny-000000005.safetensors"), F_OK) == 0);
    /* a FIFO of a checkpoint's name, newest: skipped as not a file, never
     * waited on for a writer */
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --max-steps 5", data_dir, path("fifo")), 0);
    CU_ASSERT_EQUAL_FATAL(mkfifo(path("fifo/checkpoint-tiny-000000010.safetensors"), 0600), 0);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --resume --max-steps 5", data_dir, path("fifo")), 0);
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000010.safetensors: not a regular file"));
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000005.safetensors: step 5"));
    free(out);
    test_remove_tmpdir(tmpdir);
}

/* Damaged checkpoints among the newest do not count among the
 * DDP_CHECKPOINT_KEEP a save keeps: a good older one stays in their place,
 * and they go once that many good ones are newer. (Counted by name, the
 * saves after a damaged pair left one good checkpoint, the one just
 * written.) At most DDP_CHECKPOINT_KEEP go uncounted, and a FIFO of a
 * checkpoint's name is passed over unopened (its open would wait). */
static void test_damaged_not_counted(void)
{
    setup();
    const DdpNet *n = net();
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --save %s --save-every 1 --max-steps 8", data_dir, path("ck")),
                    0);
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    DdpCheckpointRun run;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_load(n, path("ck/checkpoint-tiny-000000008.safetensors"), &run, &state),
                          DDP_OK);
    cut_short(path("ck/checkpoint-tiny-000000008.safetensors"), 7);
    edit_header(path("ck/checkpoint-tiny-000000007.safetensors"), "\"hash\":\"[0-9a-f]", "\"hash\":\"g");
    char written[256];
    /* after the saves of steps 9, 10 and 11: which of steps 6 to 11 are there */
    static const int there[3][6] = {{1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 1, 0}, {0, 0, 0, 1, 1, 1}};
    for (int save = 0; save < 3; save++) {
        run.step = 9 + save;
        CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
        for (int i = 0; i < 6; i++) {
            char name[96];
            snprintf(name, sizeof name, "ck/checkpoint-tiny-%09d.safetensors", 6 + i);
            CU_ASSERT_EQUAL(access(path(name), F_OK) == 0, there[save][i]);
        }
    }
    CU_ASSERT_EQUAL(count_files(path("ck"), 0), DDP_CHECKPOINT_KEEP);
    /* 4 bad ones, 9 to 12, between good ones, 13 and 14 to come and an
     * older one, 5: the fourth, 9, counts, so 5 goes */
    CU_ASSERT_EQUAL_FATAL(mkfifo(path("ck/checkpoint-tiny-000000012.safetensors"), 0600), 0);
    for (int bad = 9; bad <= 11; bad++) {
        char name[96];
        snprintf(name, sizeof name, "ck/checkpoint-tiny-%09d.safetensors", bad);
        cut_short(path(name), 7);
    }
    for (int save = 0; save < 3; save++) {
        run.step = (int64_t[]){5, 13, 14}[save];
        CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    }
    CU_ASSERT_NOT_EQUAL(access(path("ck/checkpoint-tiny-000000005.safetensors"), F_OK), 0);
    CU_ASSERT_EQUAL(access(path("ck/checkpoint-tiny-000000009.safetensors"), F_OK), 0);
    CU_ASSERT_EQUAL(count_files(path("ck"), 0), 6); /* 9 to 14 */
    test_remove_tmpdir(tmpdir);
}

/* A flipped bit in the net's name or hash is damage like any other, not a
 * checkpoint of another net or version (which --resume refuses): skipped,
 * the older one used. A checkpoint without that checksum (written before
 * there was one) still reads. */
static void test_damaged_name_or_hash_skipped(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --export %s", data_dir, path("whole.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --save-every 5 --max-steps 15", data_dir,
                                path("ck")), 0);
    edit_header(path("ck/checkpoint-tiny-000000015.safetensors"), "\"net\":\"tiny\"", "\"net\":\"tinz\"");
    edit_header(path("ck/checkpoint-tiny-000000010.safetensors"), "\"hash\":\"[0-9a-f]", "\"hash\":\"g");
    edit_header(path("ck/checkpoint-tiny-000000005.safetensors"), "\"net_crc32\"", "\"net_crc3x\"");
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --resume --export %s", data_dir, path("ck"),
                                path("resumed.st")), 0);
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000015.safetensors: damaged: the checksum of its net's name and "
                               "version is "));
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000010.safetensors: damaged: the checksum of its net's name and "
                               "version is "));
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000005.safetensors: step 5"));
    free(out);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("resumed.st")));
    test_remove_tmpdir(tmpdir);
}

/* A checkpoint that cannot be written once training runs (the directory
 * changed since start-up: here a directory in the way of the step-10 file)
 * is a failure while running, exit 1, which --max-restarts retries, not bad
 * input; it names the newest good checkpoint, which stays. One written
 * whose directory's sync then fails is said to be written. */
static void test_failed_save_is_a_failure(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --save-every 5 --max-steps 5", data_dir,
                                path("ck")), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(path("ck/checkpoint-tiny-000000010.safetensors"), 0755), 0);
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --save-every 5 --max-steps 15 --resume", data_dir,
                                path("ck")), 1);
    CU_ASSERT(harness_has(out, "not saving the checkpoint of step 10: "));
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000010.safetensors: is a directory, not a regular file; name a "
                               "file; the newest good one is "));
    free(out);
    struct stat st;
    CU_ASSERT(stat(path("ck/checkpoint-tiny-000000005.safetensors"), &st) == 0 && S_ISREG(st.st_mode));
    CU_ASSERT_EQUAL(count_files(path("ck"), 1), 0); /* no temporary file left */
    /* the directory itself gone and a file in its place: nothing written,
     * PATH "" whatever it held (the trainer reads a PATH left as it was as
     * "written", and passed the make-dir failure on as exit 2, unretried) */
    {
        static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
        static int64_t counts[8];
        DdpCheckpointRun run = {.step = 10, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1, .shuffle = 1};
        DdpCheckpointState state = {params, buffers, opt, counts, NULL};
        char written[256] = "left over from before";
        FILE *f = fopen(path("not_a_dir"), "w");
        CU_ASSERT_FATAL(f != NULL);
        fclose(f);
        CU_ASSERT_NOT_EQUAL(ddp_checkpoint_save(net(), path("not_a_dir"), &run, &state, written, sizeof written),
                            DDP_OK);
        CU_ASSERT_STRING_EQUAL(written, "");
    }
    /* written, but its directory's sync failed: said so, not "not saving";
     * exit 1; the file stays, and a later --resume takes it */
    CU_ASSERT_EQUAL(rmdir(path("ck/checkpoint-tiny-000000010.safetensors")), 0);
    test_fail_directory_sync = 1;
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --save-every 5 --max-steps 15 --resume", data_dir,
                                path("ck")), 1);
    test_fail_directory_sync = 0;
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000010.safetensors: written, but its directory could not be synced: "
                               "Input/output error; a crash could still lose it"));
    CU_ASSERT(!harness_has(out, "not saving"));
    free(out);
    CU_ASSERT(stat(path("ck/checkpoint-tiny-000000010.safetensors"), &st) == 0 && S_ISREG(st.st_mode));
    test_remove_tmpdir(tmpdir);
}

/* A --log (or --tensorboard) whose file stops taking records (here its size
 * limit, as a disk that fills): said, and the run trains on to its end and
 * saves as it would, its weights those of a run without the log; then exit
 * 1, saying why. (Stopping there lost the training since the last
 * checkpoint.) */
static void test_full_log_trains_on(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --max-steps 1", data_dir, path("size")), 0);
    struct stat one;
    CU_ASSERT_EQUAL_FATAL(stat(path("size/checkpoint-tiny-000000001.safetensors"), &one), 0);
    const char *flags = "--epochs 40 --eval-every 1 --log-every 1 --no-augment";
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s %s --export %s", data_dir, flags, path("whole.st")), 0);
    /* every file this process and the run write may hold a checkpoint and a
     * little more; the log's 400 steps of records pass that */
    struct rlimit was, cap = {.rlim_cur = (rlim_t)one.st_size + 4096, .rlim_max = RLIM_INFINITY};
    CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &was), 0);
    cap.rlim_max = was.rlim_max;
    void (*xfsz)(int) = signal(SIGXFSZ, SIG_IGN); /* a write past it fails (EFBIG), as on a full disk */
    CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &cap), 0);
    char *out = NULL, *plotted = NULL;
    int rc = harness_run(net(), &out, "--data %s %s --save %s --log %s --export %s", data_dir, flags, path("ck"),
                         path("log.jsonl"), path("logged.st"));
    int plotted_rc = harness_run(net(), &plotted, "--data %s %s --save %s --tensorboard %s --export %s", data_dir,
                                 flags, path("ck_tb"), path("tb"), path("plotted.st"));
    setrlimit(RLIMIT_FSIZE, &was);
    signal(SIGXFSZ, xfsz);
    /* --tensorboard's file the same */
    CU_ASSERT_EQUAL(plotted_rc, 1);
    CU_ASSERT(harness_has(plotted, ": cannot write the TensorBoard event file: File too large: the run goes on without "
                                   "it, to end with status 1"));
    CU_ASSERT(harness_has(plotted, ": the run went on without it to its end, and saved as it would"));
    free(plotted);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("plotted.st")));
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT(harness_has(out, "log.jsonl: cannot write the log: File too large: the run goes on without it, to end "
                               "with status 1"));
    CU_ASSERT(harness_has(out, "log.jsonl: cannot write the log: File too large: the run went on without it to its "
                               "end, and saved as it would"));
    free(out);
    struct stat st;
    CU_ASSERT(stat(path("ck/checkpoint-tiny-000000400.safetensors"), &st) == 0);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("logged.st")));
    test_remove_tmpdir(tmpdir);
}

/* ---- refused ------------------------------------------------------------------------ */

static void refused(const char *args, const char *message)
{
    char *out = NULL;
    int rc = harness_run(net(), &out, "--data %s %s", data_dir, args);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT(harness_has(out, message));
    free(out);
}

static void test_refused(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --max-steps 3 --export %s", data_dir, path("ck"),
                                path("w.st")), 0);
    const char *ck = path("ck/checkpoint-tiny-000000003.safetensors");
    char args[512];
    snprintf(args, sizeof args, "--resume %s --batch-size 10", ck);
    refused(args, "checkpoint-tiny-000000003.safetensors: the checkpoint was made with a global batch of 20 (20 per "
                  "rank x 1 rank), this run has 10 (10 x 1); a run continues bit for bit only with the same global "
                  "batch (--global-batch 20, on any world size that divides it)");
    snprintf(args, sizeof args, "--resume %s --seed 8", ck);
    refused(args, "made with seed 7, this run has 8");
    snprintf(args, sizeof args, "--resume %s --no-shuffle", ck);
    refused(args, "the checkpoint was made without --no-shuffle; resume it the same way");
    snprintf(args, sizeof args, "--resume %s", path("w.st"));
    refused(args, "w.st: not a ddpc checkpoint but a weights file (--export writes those; --init loads them)");
    snprintf(args, sizeof args, "--resume %s", path("absent.safetensors"));
    refused(args, "absent.safetensors");
    /* an export the step-9 checkpoint would replace, then take for its own */
    snprintf(args, sizeof args, "--save %s --resume --max-steps 9 --export %s/checkpoint-tiny-000000009.safetensors",
             path("ck"), path("ck"));
    refused(args, "checkpoint-tiny-000000009.safetensors: names beginning checkpoint- in --save ");
    /* weights to start from, under a checkpoint's name there: the run would
     * write over them, then prune them; they are left as they were */
    char kept[512];
    snprintf(kept, sizeof kept, "%s/checkpoint-tiny-000000001.safetensors", path("ck"));
    size_t weights_len = 0;
    char *weights = test_read_file(path("w.st"), &weights_len);
    CU_ASSERT_FATAL(weights != NULL);
    harness_write_file(kept, weights, weights_len);
    char init_args[1100];
    snprintf(init_args, sizeof init_args, "--save %s --resume --max-steps 9 --save-every 1 --init %s", path("ck"), kept);
    refused(init_args, "--init ");
    refused(init_args, "checkpoint-tiny-000000001.safetensors: names beginning checkpoint- in --save ");
    size_t after_len = 0;
    char *after = test_read_file(kept, &after_len);
    CU_ASSERT(after && after_len == weights_len && memcmp(after, weights, weights_len) == 0);
    free(after);
    free(weights);
    CU_ASSERT_EQUAL(unlink(kept), 0);

    /* another net's checkpoint, and this net's of another version */
    DdpNet other = *net();
    other.name = "other";
    DdpCheckpointRun run = {.step = 3, .seed = 7, .batch = 20, .world = 1, .no_sync_every = 1, .shuffle = 1};
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(&other, path("other"), &run, &state, written, sizeof written), DDP_OK);
    snprintf(args, sizeof args, "--resume %s", written);
    refused(args, "checkpoint-other-000000003.safetensors: a checkpoint of net 'other', not of 'tiny'");
    snprintf(args, sizeof args, "--save %s --resume", path("other"));
    other.name = "tiny";
    other.hash = "fedcba9876543210";
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(&other, path("other"), &run, &state, written, sizeof written), DDP_OK);
    refused(args, "a checkpoint of another version of net 'tiny' (its layers differ from this program's)");

    /* --save where no directory can be */
    snprintf(args, sizeof args, "--max-steps 1 --save %s/sub", path("w.st"));
    refused(args, "w.st is not a directory");

    /* a directory whose checkpoints' names (their writer's temporary ones
     * the longest) would not fit a path: refused at start-up, the reason
     * whole at the end of a message that holds all of the path */
    char deep[PATH_MAX], part[PATH_MAX];
    snprintf(deep, sizeof deep, "%s", path("deep"));
    while (strlen(deep) < PATH_MAX - 50) /* past the longest name that fits, short of PATH_MAX */
        strcat(deep, "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); /* 41 bytes a part */
    CU_ASSERT_EQUAL_FATAL(ddp_make_dirs(deep, part, sizeof part) >= 0, 1);
    char long_args[PATH_MAX + 64];
    snprintf(long_args, sizeof long_args, "--max-steps 1 --save %s", deep);
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s %s", data_dir, long_args), 2);
    CU_ASSERT(harness_has(out, ": the directory's name is too long\n"));
    CU_ASSERT(!harness_has(out, "epoch 1/"));
    free(out);
    test_remove_tmpdir(tmpdir);
}

/* The checksum covers the data and the step: a flipped bit in a weight and an
 * edited step are both "damaged"; the file itself reads back. */
static void test_checksum(void)
{
    setup();
    const DdpNet *n = net();
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10], back[784 * 10 + 10];
    static int64_t counts[8];
    for (int i = 0; i < 784 * 10 + 10; i++)
        params[i] = (float)i / 7, opt[i] = (float)-i;
    DdpCheckpointRun run = {.step = 42, .epoch = 4, .seed = 18446744073709551615ull, .batch = 20, .world = 3,
                            .no_sync_every = 2, .shuffle = 0};
    DdpCheckpointState state = {params, buffers, opt, counts, NULL}, loaded = {back, buffers, opt, counts, NULL};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    DdpCheckpointRun got;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_OK);
    CU_ASSERT(got.step == 42 && got.epoch == 4 && got.seed == run.seed && got.batch == 20 && got.world == 3 && got.no_sync_every == 2 &&
              got.shuffle == 0);
    CU_ASSERT(memcmp(back, params, sizeof params) == 0);
    /* the optimizer state is under PyTorch's name */
    DdpSafetensors *f;
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open(written, &f), DDP_OK);
    CU_ASSERT_PTR_NOT_NULL(ddp_safetensors_find(f, "optim.fc.weight.momentum_buffer"));
    CU_ASSERT_PTR_NOT_NULL(ddp_safetensors_find(f, "fc.weight"));
    ddp_safetensors_close(f);

    flip_bit(written, 5); /* in the last tensor's data */
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its checksum is ") != NULL);

    /* the step edited in the header: same length, so the file stays well formed */
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "sed -i 's/\"step\":\"42\"/\"step\":\"43\"/' %s", written) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its checksum is ") != NULL);

    /* counts that would overflow once steps are added to them (found by
     * tests/fuzz/fuzz_safetensors.c): refused, not wrapped around */
    run.step = DDP_STEP_COUNT_MAX + 1;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "not a usable checkpoint: its metadata 'step' is") != NULL);
    run.step = 42;
    counts[4] = INT64_MAX - 42; /* norm.num_batches_tracked, written as counts + step */
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "tensor 'norm.num_batches_tracked' is 9223372036854775807, not a step count")
              != NULL);
    counts[4] = 0;
    test_remove_tmpdir(tmpdir);
}

/* The precision: recorded, checked on resuming, covered by the checksum; a
 * checkpoint that does not name one (written before there was a choice)
 * is fp32's, and its checksum still holds. */
static void test_precision_recorded(void)
{
    setup();
    const DdpNet *n = net();
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointRun run = {.step = 42, .epoch = 4, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1,
                            .shuffle = 1, .precision = DDP_PRECISION_BF16};
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    DdpCheckpointRun got;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT_EQUAL(got.precision, DDP_PRECISION_BF16);
    DdpCheckpointRun now = run;
    CU_ASSERT_EQUAL(ddp_checkpoint_check_run(written, &got, &now), DDP_OK);
    now.precision = DDP_PRECISION_FP32;
    CU_ASSERT_EQUAL(ddp_checkpoint_check_run(written, &got, &now), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "made with --precision bf16, this run has fp32; a run continues bit for bit "
                                          "only with the same settings (--precision bf16)") != NULL);
    edit_header(written, "\"bf16\"", "\"tf32\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its checksum is ") != NULL);

    run.precision = DDP_PRECISION_FP32;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    edit_header(written, "\"precision\"", "\"precisiom\""); /* as an older checkpoint: no precision */
    got.precision = DDP_PRECISION_TF32;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT_EQUAL(got.precision, DDP_PRECISION_FP32);
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    edit_header(written, "\"fp32\"", "\"fp64\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "not a usable checkpoint: its metadata 'precision' is 'fp64'") != NULL);
    test_remove_tmpdir(tmpdir);
}

/* The epoch's loss sums (DdpCheckpointRun): read back exactly, under a
 * checksum of their own, checked; a checkpoint without them (written
 * before) reads 0, and the contents' checksum leaves them out, so that an
 * older version, which does not know them, still resumes a newer file. */
static void test_loss_sums_recorded(void)
{
    setup();
    const DdpNet *n = net();
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointRun run = {.step = 42, .epoch = 4, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1,
                            .shuffle = 1, .epoch_loss = {0.1 * 3, 40}, .span_loss = {1.0 / 3, 8}};
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    DdpCheckpointRun got;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT(got.epoch_loss.sum == 0.1 * 3 && got.epoch_loss.samples == 40);
    CU_ASSERT(got.span_loss.sum == 1.0 / 3 && got.span_loss.samples == 8);
    /* without them all, as an older version reads it: the rest holds */
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "cp %s %s.copy", written, written) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    edit_header(written, "\"epoch_loss_sum\"", "\"epoch_loss_sux\"");
    edit_header(written, "\"epoch_loss_samples\"", "\"epoch_loss_samplex\"");
    edit_header(written, "\"span_loss_sum\"", "\"span_loss_sux\"");
    edit_header(written, "\"span_loss_samples\"", "\"span_loss_samplex\"");
    edit_header(written, "\"loss_crc32\"", "\"loss_crc3x\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT(got.epoch_loss.sum == 0 && got.epoch_loss.samples == 0 && got.span_loss.samples == 0);
    CU_ASSERT(got.step == 42);
    /* one edited, or one left out: damaged */
    CU_ASSERT_FATAL(asprintf(&cmd, "cp %s.copy %s", written, written) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    edit_header(written, "\"epoch_loss_samples\":\"40\"", "\"epoch_loss_samples\":\"41\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: the checksum of its loss sums is ") != NULL);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    edit_header(written, "\"span_loss_sum\"", "\"span_loss_sux\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its loss sums are incomplete ('span_loss_sum' missing)") != NULL);
    /* values no run writes: refused, naming them */
    run.epoch_loss.samples = 7; /* fewer than the span's */
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "not a usable checkpoint: its metadata 'span_loss_samples' is '8'") != NULL);
    run.epoch_loss.samples = -7;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "not a usable checkpoint: its metadata 'epoch_loss_samples' is '-7'") != NULL);
    run.epoch_loss = (DdpLossSum){NAN, 40};
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "its metadata 'epoch_loss_sum' is 'nan'") != NULL);
    test_remove_tmpdir(tmpdir);
}

/* A report a stop left out: its kind and loss read back exactly, with the
 * conv choices after them; no keys at all where there is none; without
 * them (a version before them reads it so), the rest holds; one edited,
 * missing, or of an unknown kind, refused. */
static void test_left_out_report_recorded(void)
{
    setup();
    const DdpNet *n = net();
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    static char back[DDP_CONV_CHOICES_TEXT];
    DdpCheckpointRun run = {.step = 48, .epoch = 4, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1,
                            .shuffle = 1, .epoch_loss = {0.9, 80}, .left_out = DDP_LEFT_OUT_EVAL,
                            .left_out_loss = {1.0 / 3, 40}, .left_out_lr = 0.25};
    char kept[] = "cudnn=91900|device=NVIDIA H200|workspace=4096|0:1.3.1,1.3.1,0.3.1,0.3.1,0.3.1,0.3.1";
    DdpCheckpointState state = {params, buffers, opt, counts, kept}, loaded = {params, buffers, opt, counts, back};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    DdpCheckpointRun got;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_OK);
    CU_ASSERT_EQUAL(got.left_out, DDP_LEFT_OUT_EVAL);
    CU_ASSERT(got.left_out_loss.sum == 1.0 / 3 && got.left_out_loss.samples == 40 && got.left_out_lr == 0.25);
    CU_ASSERT(got.epoch_loss.sum == 0.9 && got.span_loss.samples == 0);
    CU_ASSERT_STRING_EQUAL(back, kept);
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "cp %s %s.copy", written, written) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    CU_ASSERT_FATAL(asprintf(&cmd, "cp %s.copy %s", written, written) > 0);
    static const char *const keys[] = {"left_out_report", "left_out_loss_sum", "left_out_loss_samples",
                                       "left_out_lr", "left_out_crc32"};
    for (int k = 0; k < 5; k++) {
        char key[40], renamed[40];
        snprintf(key, sizeof key, "\"%s\"", keys[k]);
        snprintf(renamed, sizeof renamed, "\"%.*sx\"", (int)strlen(keys[k]) - 1, keys[k]);
        edit_header(written, key, renamed);
    }
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_OK);
    CU_ASSERT(got.left_out == DDP_LEFT_OUT_NONE && got.left_out_loss.samples == 0 && got.epoch_loss.sum == 0.9);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    edit_header(written, "\"left_out_loss_samples\":\"40\"", "\"left_out_loss_samples\":\"41\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: the checksum of its report left out is ") != NULL);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    edit_header(written, "\"left_out_report\"", "\"left_out_reporx\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its report left out is incomplete ('left_out_report' missing)") != NULL);
    /* values no run writes, under a checksum that holds: a kind unknown, a
     * report of no sample (each edit keeps the header's length) */
    static const struct {
        const char *key, *from, *to, *values, *says; /* VALUES: the four, each with its NUL */
        size_t len;
    } bad[] = {
        {"left_out_report", "eval", "evil", "evil\0" "0.33333333333333331\0" "40\0" "0.25", "'left_out_report' is 'evil'",
         sizeof "evil\0" "0.33333333333333331\0" "40\0" "0.25"},
        {"left_out_loss_samples", "40", "00", "eval\0" "0.33333333333333331\0" "00\0" "0.25",
         "'left_out_loss_samples' is '00'", sizeof "eval\0" "0.33333333333333331\0" "00\0" "0.25"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
        char from[64], to[64], crc[16], *fix_crc;
        snprintf(from, sizeof from, "\"%s\":\"%s\"", bad[i].key, bad[i].from);
        snprintf(to, sizeof to, "\"%s\":\"%s\"", bad[i].key, bad[i].to);
        edit_header(written, from, to);
        snprintf(crc, sizeof crc, "%08lx",
                 (unsigned long)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)bad[i].values, (uInt)bad[i].len));
        CU_ASSERT_FATAL(asprintf(&fix_crc, "sed -i 's/\"left_out_crc32\":\"[0-9a-f]*\"/\"left_out_crc32\":\"%s\"/' %s",
                                 crc, written) > 0);
        CU_ASSERT_EQUAL(test_run(fix_crc, NULL), 0);
        free(fix_crc);
        CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
        CU_ASSERT(strstr(ddp_error_message(), "not a usable checkpoint: its metadata ") != NULL &&
                  strstr(ddp_error_message(), bad[i].says) != NULL);
    }
    free(cmd);
    /* none, or one of no sample: no keys */
    for (int none = 0; none < 2; none++) {
        run.left_out = none ? DDP_LEFT_OUT_NONE : DDP_LEFT_OUT_EPOCH;
        run.left_out_loss.samples = 0;
        CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
        char *text = test_read_file(written, NULL);
        CU_ASSERT(text && !strstr(text, "left_out"));
        free(text);
    }
    test_remove_tmpdir(tmpdir);
}

/* cuDNN's timed algorithms (conv_choices.h) kept in the metadata, under the
 * checksum, and read back; a checkpoint without them reads "". */
static void test_conv_choices_recorded(void)
{
    setup();
    const DdpNet *n = net();
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    static char back[DDP_CONV_CHOICES_TEXT];
    char kept[] = "cudnn=91900|device=NVIDIA H200|workspace=4096|0:1.3.1,1.3.1,0.3.1,0.3.1,0.3.1,0.3.1";
    DdpCheckpointRun run = {.step = 42, .epoch = 4, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1,
                            .shuffle = 1};
    DdpCheckpointState state = {params, buffers, opt, counts, kept}, loaded = {params, buffers, opt, counts, back};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    DdpCheckpointRun got;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_OK);
    CU_ASSERT_STRING_EQUAL(back, kept);
    edit_header(written, "H200", "H100");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its checksum is ") != NULL);

    state.conv_choices = NULL; /* none: no metadata, and "" read back */
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    snprintf(back, sizeof back, "left over");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &loaded), DDP_OK);
    CU_ASSERT_STRING_EQUAL(back, "");
    size_t bytes = 0;
    char *file = test_read_file(written, &bytes);
    CU_ASSERT(file && !memmem(file, bytes, "conv_choices", 12));
    free(file);
    test_remove_tmpdir(tmpdir);
}

/* On a CPU build, which runs no cuDNN: a checkpoint holding its timed
 * algorithms resumes (its weights are weights), and the run's own
 * checkpoints hold none; one whose record is unreadable is refused at
 * loading, exit 2, naming the file. */
static void test_conv_choices_resumed(void)
{
    setup();
    const DdpNet *n = net();
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --max-steps 8 --save %s", data_dir, path("ck")), 0);
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    static char back[DDP_CONV_CHOICES_TEXT];
    DdpCheckpointState state = {params, buffers, opt, counts, NULL}, loaded = {params, buffers, opt, counts, back};
    DdpCheckpointRun run;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_load(n, path("ck/checkpoint-tiny-000000008.safetensors"), &run, &state),
                          DDP_OK);
    char kept[] = "cudnn=91900|device=NVIDIA H200|workspace=0|0:1.3.1,1.3.1,0.3.1,0.3.1,0.3.1,0.3.1";
    state.conv_choices = kept;
    char written[256], args[512];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("kept"), &run, &state, written, sizeof written), DDP_OK);
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --resume %s --max-steps 10 --save %s", data_dir, written,
                                path("after")), 0);
    snprintf(back, sizeof back, "left over");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, path("after/checkpoint-tiny-000000010.safetensors"), &run, &loaded),
                    DDP_OK);
    CU_ASSERT_STRING_EQUAL(back, "");

    char unreadable[] = "cudnn=91900|device=NVIDIA H200|workspace=0|0:1.3.1";
    state.conv_choices = unreadable;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("bad"), &run, &state, written, sizeof written), DDP_OK);
    snprintf(args, sizeof args, "--resume %s", written);
    refused(args, "checkpoint-tiny-000000010.safetensors: not a usable checkpoint: the convs' recorded cuDNN "
                  "algorithms are not readable (a conv's algorithms)");
    test_remove_tmpdir(tmpdir);
}

/* The training set's size: recorded under a checksum of its own, checked
 * on resuming (a step is a place in epochs of that many samples: on another
 * set the resumed run went on from another place without a word); a
 * checkpoint without it (written before) reads 0 and resumes on any set. */
static void test_train_samples_recorded(void)
{
    setup();
    const DdpNet *n = net();
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointRun run = {.step = 70, .epoch = 1, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1,
                            .shuffle = 1, .train_samples = 1000};
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    DdpCheckpointRun got, now = run;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT_EQUAL(got.train_samples, 1000);
    CU_ASSERT_EQUAL(ddp_checkpoint_check_run(written, &got, &now), DDP_OK);
    now.train_samples = 2000;
    CU_ASSERT_EQUAL(ddp_checkpoint_check_run(written, &got, &now), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "the checkpoint was made on a training set of 1000 samples, this run's "
                                          "--data has 2000; a run continues bit for bit only on the same data") != NULL);
    edit_header(written, "\"train_samples\":\"1000\"", "\"train_samples\":\"2000\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: the checksum of its training set's size is ") != NULL);
    /* its checksum alone gone: damaged, not an older file */
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    edit_header(written, "\"train_samples_crc32\"", "\"train_samples_crc3x\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its training set's size is incomplete ('train_samples_crc32' "
                                          "missing)") != NULL);
    /* as an older version wrote it: neither key; any set */
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    edit_header(written, "\"train_samples\"", "\"train_samplex\"");
    edit_header(written, "\"train_samples_crc32\"", "\"train_samples_crc3x\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT_EQUAL(got.train_samples, 0);
    CU_ASSERT_EQUAL(ddp_checkpoint_check_run(written, &got, &now), DDP_OK);
    /* a program's run: its training set's size written, and a resume on a
     * set of 300 samples refused (status 2), on the 200 of its own taken */
    char other[PATH_MAX + 16];
    snprintf(other, sizeof other, "%s/other", tmpdir);
    mkdir(other, 0755);
    harness_write_set(other, "train", 300, 28, 28, 1);
    harness_write_set(other, "t10k", 50, 28, 28, 2);
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --max-steps 7 --save %s", data_dir, path("run")), 0);
    CU_ASSERT_EQUAL(harness_run(n, &out, "--data %s --max-steps 9 --save %s --resume", other, path("run")), 2);
    CU_ASSERT(harness_has(out, "the checkpoint was made on a training set of 200 samples, this run's --data has 300"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(n, NULL, "--data %s --max-steps 9 --save %s --resume", data_dir, path("run")), 0);
    test_remove_tmpdir(tmpdir);
}

/* The program's layout (ddpc --layout) is recorded like the precision: a
 * channels-last program's checkpoint resumes only in a channels-last
 * program; one that does not say is NCHW's. */
static void test_layout_recorded(void)
{
    setup();
    const DdpNet *n = net();
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointRun run = {.step = 7, .epoch = 0, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1,
                            .shuffle = 1, .channels_last = 1};
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    char written[256];
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    DdpCheckpointRun got;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT_EQUAL(got.channels_last, 1);
    DdpCheckpointRun now = run;
    CU_ASSERT_EQUAL(ddp_checkpoint_check_run(written, &got, &now), DDP_OK);
    now.channels_last = 0;
    CU_ASSERT_EQUAL(ddp_checkpoint_check_run(written, &got, &now), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "made by a program built with ddpc --layout nhwc, this one was built with "
                                          "--layout nchw; a run continues bit for bit only in the same layout (build "
                                          "it again with --layout nhwc)") != NULL);
    edit_header(written, "\"nhwc\"", "\"nchw\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), ": damaged: its checksum is ") != NULL);

    run.channels_last = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    edit_header(written, "\"layout\"", "\"layouu\""); /* as an older checkpoint: no layout */
    got.channels_last = 1;
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_OK);
    CU_ASSERT_EQUAL(got.channels_last, 0);
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("ck"), &run, &state, written, sizeof written), DDP_OK);
    edit_header(written, "\"nchw\"", "\"chwn\"");
    CU_ASSERT_EQUAL(ddp_checkpoint_load(n, written, &got, &state), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "not a usable checkpoint: its metadata 'layout' is 'chwn'") != NULL);
    test_remove_tmpdir(tmpdir);
}

/* ---- never worse than what it replaces ----------------------------------------------- */

/* The checkpoint file in DIR whose name ends in STEP (whatever the rest of
 * its name), into OUT; 0 if none. */
static int find_step(const char *dir, int step, char *out, size_t len)
{
    char tail[48];
    snprintf(tail, sizeof tail, "%09d.safetensors", step);
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        size_t n = strlen(e->d_name), t = strlen(tail);
        if (strncmp(e->d_name, "checkpoint-", 11) == 0 && n >= t && strcmp(e->d_name + n - t, tail) == 0) {
            snprintf(out, len, "%s/%s", dir, e->d_name);
            found = 1;
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* 1 when every float of every tensor in the safetensors file FILE is finite. */
static int file_finite(const char *file)
{
    DdpSafetensors *f;
    if (ddp_safetensors_open(file, &f) != DDP_OK)
        return 0;
    int finite = 1;
    for (int i = 0; i < ddp_safetensors_count(f); i++) {
        const DdpTensor *t = ddp_safetensors_tensor(f, i);
        for (size_t j = 0; t->dtype == DDP_DTYPE_F32 && j < t->nbytes / sizeof(float); j++)
            finite &= isfinite(((const float *)t->data)[j]) != 0;
    }
    ddp_safetensors_close(f);
    return finite;
}

/* Every checkpoint in DIR finite; how many there are in *N. */
static int dir_finite(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    int finite = 1;
    *n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "checkpoint-", 11) != 0 || strcmp(e->d_name + len - 12, ".safetensors") != 0)
            continue;
        ++*n;
        finite &= file_finite(test_tmp_path(dir, e->d_name));
    }
    if (d)
        closedir(d);
    return finite;
}

/* The report: a run that goes NaN with --save-every 1 used to write
 * NaN checkpoints and prune the good ones. Now it stops at the first save
 * whose state is not finite, naming the last good checkpoint, and every file
 * left in the directory is finite and resumes. */
static void test_diverged_run_keeps_good_checkpoints(void)
{
    setup();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 3 --save %s --save-every 1", data_dir,
                                path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 40 --save %s --save-every 1 --resume --lr 1e30",
                                data_dir, path("ck")), 1);
    CU_ASSERT(harness_has(out, "tiny_train: error: not saving the checkpoint of step "));
    CU_ASSERT(harness_has(out, "training has diverged; the newest good one is "));
    free(out);
    int n;
    CU_ASSERT(dir_finite(path("ck"), &n));
    CU_ASSERT(n >= 1 && n <= DDP_CHECKPOINT_KEEP);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --resume --max-steps 3 --export %s", data_dir,
                                path("ck"), path("w.st")), 0);
    CU_ASSERT(harness_has(out, "resuming from "));
    free(out);
    test_remove_tmpdir(tmpdir);
}

/* Reads all of FILE into a malloc'd buffer; its length in *LEN. */
static unsigned char *slurp(const char *file, size_t *len)
{
    FILE *f = fopen(file, "rb");
    CU_ASSERT_FATAL(f != NULL);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*len + 1);
    CU_ASSERT_FATAL(b != NULL && fread(b, 1, *len, f) == *len);
    fclose(f);
    return b;
}

/* Makes FILE, a good checkpoint of NET, one whose fc.weight[0] is a NaN and
 * whose checksum matches, as an earlier version wrote after a divergence.
 * The checkpoint code will not write one, so it is made from three it does
 * write, the same but for fc.weight[0] = A, B, C with A ^ B ^ C a NaN's bits:
 * CRC-32 is linear, so the byte-wise XOR of three files of one length has the
 * XOR of their checksums as its checksum; the metadata's hex text of it is
 * then written in. */
static void make_nan_checkpoint(const DdpNet *n, const char *file)
{
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    DdpCheckpointRun run;
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_load(n, file, &run, &state), DDP_OK);
    const uint32_t bits[3] = {0x3f800000u, 0x40000000u, 0x7fc00000u ^ 0x3f800000u ^ 0x40000000u};
    unsigned char *bytes[3];
    size_t len[3];
    uint32_t crc = 0;
    for (int i = 0; i < 3; i++) {
        memcpy(&params[0], &bits[i], sizeof bits[i]);
        char written[512];
        CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_save(n, path("poison"), &run, &state, written, sizeof written), DDP_OK);
        bytes[i] = slurp(written, &len[i]);
        CU_ASSERT_FATAL(len[i] == len[0]);
        DdpSafetensors *f;
        CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open(written, &f), DDP_OK);
        crc ^= (uint32_t)strtoul(ddp_safetensors_meta(f, "crc32"), NULL, 16);
        ddp_safetensors_close(f);
        unlink(written);
    }
    for (size_t j = 0; j < len[0]; j++)
        bytes[0][j] ^= bytes[1][j] ^ bytes[2][j];
    unsigned char *at = memmem(bytes[0], len[0], "\"crc32\":\"", 9);
    CU_ASSERT_FATAL(at != NULL);
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", crc);
    memcpy(at + 9, hex, 8);
    harness_write_file(file, bytes[0], len[0]);
    for (int i = 0; i < 3; i++)
        free(bytes[i]);
    CU_ASSERT(!file_finite(file));
}

/* A NaN checkpoint (an earlier version's) is refused by --resume FILE and
 * skipped, with a warning, by --resume, which takes the one before it. */
static void test_resume_skips_nonfinite(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --export %s", data_dir, path("whole.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --save %s --save-every 5 --max-steps 15", data_dir,
                                path("ck")), 0);
    char newest[512], args[600], *out = NULL;
    CU_ASSERT_FATAL(find_step(path("ck"), 15, newest, sizeof newest));
    make_nan_checkpoint(net(), newest);
    snprintf(args, sizeof args, "--resume %s", newest);
    refused(args, "000000015.safetensors: tensor 'fc.weight' is not finite (nan or inf): training had diverged "
                  "when it was written");
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --save %s --resume --export %s", data_dir, path("ck"),
                                path("resumed.st")), 0);
    CU_ASSERT(harness_has(out, "tiny_train: warning: skipping "));
    CU_ASSERT(harness_has(out, "000000015.safetensors: tensor 'fc.weight' is not finite (nan or inf)"));
    CU_ASSERT(harness_has(out, "000000010.safetensors: step 10"));
    free(out);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("resumed.st")));
    test_remove_tmpdir(tmpdir);
}

/* A --save directory that holds this net's checkpoints, without --resume:
 * refused before anything is overwritten, suggesting --resume. */
static void test_forgotten_resume(void)
{
    setup();
    char *out = NULL, three[512];
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 3 --save %s", data_dir, path("ck")), 0);
    CU_ASSERT_FATAL(find_step(path("ck"), 3, three, sizeof three));
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 5 --save %s", data_dir, path("ck")), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: --save "));
    CU_ASSERT(harness_has(out, "ck already holds checkpoints of net 'tiny' (the newest: "));
    CU_ASSERT(harness_has(out, "000000003.safetensors): add --resume to continue from them, or give --save a new "
                               "directory to start afresh"));
    free(out);
    CU_ASSERT_EQUAL(count_files(path("ck"), 0), 1);
    /* with --resume it continues, and past --max-steps it ends at once */
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 5 --save %s --resume", data_dir, path("ck")), 0);
    CU_ASSERT(harness_has(out, "000000003.safetensors: step 3"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 2 --save %s --resume", data_dir, path("ck")), 0);
    CU_ASSERT(harness_has(out, "done  5 steps"));
    free(out);
    test_remove_tmpdir(tmpdir);
}

/* A roll-back, --resume PATH to an older checkpoint with --save DIR holding
 * newer ones: refused, since a later bare --resume (the command a stop
 * prints) would take the newer ones, and this run's saves would be pruned
 * in their place. Into another directory, or from the newest, it runs.
 * --export onto a checkpoint is refused too, the file kept: weights alone
 * would replace its optimizer state and step. */
static void test_rollback_and_export_keep_checkpoints(void)
{
    setup();
    char *out = NULL, two[512], six[512];
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 6 --save %s --save-every 2", data_dir,
                                path("ck")), 0);
    CU_ASSERT_FATAL(find_step(path("ck"), 2, two, sizeof two) && find_step(path("ck"), 6, six, sizeof six));
    /* step 2's file kept apart, as a run's beginning (ck's will be pruned) */
    size_t begin_len = 0;
    char *begin_bytes = test_read_file(two, &begin_len), begin[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(begin_bytes);
    snprintf(begin, sizeof begin, "%s", path("begin.safetensors"));
    harness_write_file(begin, begin_bytes, begin_len);
    free(begin_bytes);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --resume %s --save %s --max-steps 8", data_dir, two,
                                path("ck")), 2);
    CU_ASSERT(harness_has(out, "ck holds checkpoints of net 'tiny' past step 2 of --resume "));
    CU_ASSERT(!harness_has(out, "resuming from ")); /* refused: it did not */
    CU_ASSERT(harness_has(out, "000000006.safetensors), which a later --resume would take instead of this run's: "
                               "move them away, give --save another directory, or give --resume without PATH to go "
                               "on from the newest"));
    free(out);
    CU_ASSERT_EQUAL(count_files(path("ck"), 0), 3);
    CU_ASSERT(find_step(path("ck"), 2, two, sizeof two) && find_step(path("ck"), 6, six, sizeof six));
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --resume %s --save %s --max-steps 8", data_dir, two,
                                path("ck2")), 0);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --resume %s --save %s --max-steps 8", data_dir, six,
                                path("ck")), 0);
    /* Under torchrun's agent, which restarts the ranks with the same flags,
     * --resume PATH may only have begun the run: --save's newest valid one
     * past PATH's step is this run's, and it goes on from there, whatever
     * the per-node count says; an older one there is not gone back to, and
     * an evaluation takes PATH. */
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 1 --save %s", data_dir, path("older")), 0);
    for (int count = 1; count >= 0; count--) {
        setenv("TORCHELASTIC_RESTART_COUNT", count ? "1" : "0", 1);
        CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --resume %s --save %s --max-steps %d", data_dir, begin,
                                    path("ck"), 10 - count), 0);
        char said[256];
        snprintf(said, sizeof said, "torchrun (restart %d of this node): going on from --save's newest, past step 2 of "
                 "--resume's file, as this run's (a roll-back under torchrun needs a --save of its own)", count);
        CU_ASSERT(harness_has(out, said));
        CU_ASSERT(harness_has(out, count ? "000000008.safetensors: step 8" : "000000009.safetensors: step 9"));
        free(out);
    }
    /* PATH one of DIR's own, pruned by the saves since: DIR's newest */
    CU_ASSERT_EQUAL(access(two, F_OK), -1);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --resume %s --save %s --max-steps 11", data_dir, two,
                                path("ck")), 0);
    CU_ASSERT(harness_has(out, "torchrun (restart 0 of this node): --resume's file is gone (pruned?): going on from "
                               "--save's newest"));
    CU_ASSERT(harness_has(out, "000000010.safetensors: step 10"));
    free(out);
    /* DIR older than PATH: PATH's weights, as outside torchrun */
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --resume %s --save %s --max-steps 3 --export %s", data_dir,
                                begin, path("older"), path("agent.st")), 0); /* older holds step 1 */
    CU_ASSERT(harness_has(out, "begin.safetensors: step 2"));
    CU_ASSERT(!strstr(out ? out : "", "going on from"));
    free(out);
    unsetenv("TORCHELASTIC_RESTART_COUNT");
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --resume %s --save %s --max-steps 3 --export %s", data_dir,
                                begin, path("plain"), path("plain.st")), 0);
    CU_ASSERT(harness_same_tensors(path("agent.st"), path("plain.st")));
    setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --eval-only --resume %s --save %s", data_dir, begin,
                                path("ck")), 0);
    CU_ASSERT(harness_has(out, "begin.safetensors"));
    CU_ASSERT(!strstr(out ? out : "", "going on from"));
    free(out);
    unsetenv("TORCHELASTIC_RESTART_COUNT");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");

    char ten[512];
    CU_ASSERT_FATAL(find_step(path("ck"), 10, ten, sizeof ten));
    size_t len = 0, after_len = 0;
    char *bytes = test_read_file(ten, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 1 --export %s", data_dir, ten), 2);
    CU_ASSERT(harness_has(out, "000000010.safetensors: a checkpoint (--save writes those), whose optimizer state "
                               "and step the weights alone would replace: name another file"));
    free(out);
    char *after = test_read_file(ten, &after_len);
    CU_ASSERT(after && after_len == len && memcmp(after, bytes, len) == 0);
    free(after);
    free(bytes);
    test_remove_tmpdir(tmpdir);
}

/* Two nets in one --save directory: each writes, prunes and resumes its own
 * checkpoints only. A file named the older way (checkpoint-STEP) is resumed
 * from if it is this net's, passed over if not, and never pruned. */
static void test_two_nets_share_a_directory(void)
{
    setup();
    DdpNet other = *net();
    other.name = "other";
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 3 --save %s --save-every 1", data_dir,
                                path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(&other, NULL, "--data %s --max-steps 6 --save %s --save-every 1", data_dir,
                                path("ck")), 0);
    CU_ASSERT_EQUAL(count_files(path("ck"), 0), 2 * DDP_CHECKPOINT_KEEP);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 4 --save %s --resume", data_dir, path("ck")), 0);
    CU_ASSERT(harness_has(out, "000000003.safetensors: step 3"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(&other, &out, "--data %s --max-steps 7 --save %s --resume", data_dir, path("ck")), 0);
    CU_ASSERT(harness_has(out, "000000006.safetensors: step 6"));
    free(out);
    CU_ASSERT_EQUAL(count_files(path("ck"), 0), 2 * DDP_CHECKPOINT_KEEP);

    /* the older names: tiny's step 4 as checkpoint-000000020, other's step 7 as checkpoint-000000030 */
    char from[512], *cmd;
    CU_ASSERT_FATAL(find_step(path("ck"), 4, from, sizeof from));
    CU_ASSERT_FATAL(asprintf(&cmd, "cp %s %s/checkpoint-000000020.safetensors", from, path("ck")) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    CU_ASSERT_FATAL(find_step(path("ck"), 7, from, sizeof from));
    CU_ASSERT_FATAL(asprintf(&cmd, "cp %s %s/checkpoint-000000030.safetensors", from, path("ck")) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 9 --save %s --save-every 1 --resume", data_dir,
                                path("ck")), 0);
    CU_ASSERT(harness_has(out, "checkpoint-000000020.safetensors: step 4"));
    CU_ASSERT(!strstr(out ? out : "", "warning"));
    free(out);
    CU_ASSERT_EQUAL(access(path("ck/checkpoint-000000020.safetensors"), F_OK), 0);
    CU_ASSERT_EQUAL(access(path("ck/checkpoint-000000030.safetensors"), F_OK), 0);
    test_remove_tmpdir(tmpdir);
}

/* Nets whose names differ only in '-' and '.' against '_' share a --save
 * directory, each with files of its own (earlier versions filed both under
 * one name, so the second was refused as a run over the first's
 * checkpoints). A file an earlier version named so is still resumed from,
 * counts for the refusal of a run without --resume, and is never pruned. */
static void test_names_alike_share_a_directory(void)
{
    setup();
    DdpNet dashed = *net(), plain = *net();
    dashed.name = "tiny-net.v2";
    plain.name = "tiny_net_v2";
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(&dashed, NULL, "--data %s --max-steps 3 --save %s --save-every 1", data_dir,
                                path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(&plain, NULL, "--data %s --max-steps 2 --save %s --save-every 1", data_dir,
                                path("ck")), 0);
    CU_ASSERT_EQUAL(access(path("ck/checkpoint-tiny-net.v2-000000003.safetensors"), F_OK), 0);
    CU_ASSERT_EQUAL(access(path("ck/checkpoint-tiny_net_v2-000000002.safetensors"), F_OK), 0);
    CU_ASSERT_EQUAL(harness_run(&dashed, &out, "--data %s --max-steps 4 --save %s --resume", data_dir, path("ck")),
                    0);
    CU_ASSERT(harness_has(out, "tiny-net.v2-000000003.safetensors: step 3"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(&plain, &out, "--data %s --max-steps 3 --save %s --resume", data_dir, path("ck")),
                    0);
    CU_ASSERT(harness_has(out, "tiny_net_v2-000000002.safetensors: step 2"));
    free(out);

    /* dashed's step 4 as an earlier version named it, alone in ck2 */
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "mkdir %s && cp %s/checkpoint-tiny-net.v2-000000004.safetensors "
                                   "%s/checkpoint-tiny_net_v2-000000004.safetensors", path("ck2"), path("ck"),
                             path("ck2")) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    CU_ASSERT_EQUAL(harness_run(&dashed, &out, "--data %s --max-steps 5 --save %s", data_dir, path("ck2")), 2);
    CU_ASSERT(harness_has(out, "already holds checkpoints of net 'tiny-net.v2'"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(&dashed, &out, "--data %s --max-steps 8 --save %s --save-every 1 --resume", data_dir,
                                path("ck2")), 0);
    CU_ASSERT(harness_has(out, "checkpoint-tiny_net_v2-000000004.safetensors: step 4"));
    free(out);
    CU_ASSERT_EQUAL(access(path("ck2/checkpoint-tiny-net.v2-000000008.safetensors"), F_OK), 0);
    CU_ASSERT_EQUAL(access(path("ck2/checkpoint-tiny-net.v2-000000005.safetensors"), F_OK), -1);
    CU_ASSERT_EQUAL(access(path("ck2/checkpoint-tiny_net_v2-000000004.safetensors"), F_OK), 0);
    test_remove_tmpdir(tmpdir);
}

/* A run refused by the checks of --save or --init leaves --log as it was:
 * the log is opened (and emptied) only once they have passed, so a
 * mistyped command does not wipe the log of the run it meant to continue,
 * or of one still writing it. */
static void test_refused_run_keeps_the_log(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 3 --save %s --log %s --quiet", data_dir,
                                path("ck"), path("run.jsonl")), 0);
    size_t len = 0;
    char *before = test_read_file(path("run.jsonl"), &len);
    CU_ASSERT_FATAL(before && len > 0);
    static const struct {
        const char *flag, *in_ck, *says; /* FLAG ck/IN_CK */
    } cases[] = {
        {"--save", "", "already holds checkpoints of net 'tiny'"}, /* --resume forgotten */
        {"--init", "/checkpoint-tiny-000000003.safetensors", "a checkpoint (--save writes those), not a weights file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[600], *out = NULL;
        snprintf(args, sizeof args, "%s %s%s", cases[i].flag, path("ck"), cases[i].in_ck);
        CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 6 %s --log %s", data_dir, args,
                                    path("run.jsonl")), 2);
        CU_ASSERT(harness_has(out, cases[i].says));
        free(out);
        size_t after_len = 0;
        char *after = test_read_file(path("run.jsonl"), &after_len);
        CU_ASSERT(after && after_len == len && memcmp(after, before, len) == 0);
        free(after);
    }
    free(before);
    test_remove_tmpdir(tmpdir);
}

/* --save DIR is made before the other outputs are checked, so that they may
 * lie in it on a first run; a run those checks refuse leaves no DIR. */
static void test_outputs_in_a_new_save_dir(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 2 --save %s --log %s --export %s --quiet", data_dir,
                                path("run"), path("run/log.jsonl"), path("run/w.safetensors")), 0);
    CU_ASSERT_EQUAL(access(path("run/log.jsonl"), F_OK), 0);
    CU_ASSERT_EQUAL(access(path("run/w.safetensors"), F_OK), 0);
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net(), &out, "--data %s --max-steps 2 --save %s --log %s --export %s", data_dir,
                                path("run2"), path("same.x"), path("same.x")), 2);
    CU_ASSERT(harness_has(out, "name one file, which each would write over the other's"));
    free(out);
    CU_ASSERT_EQUAL(access(path("run2"), F_OK), -1);
    test_remove_tmpdir(tmpdir);
}

/* --init given a checkpoint: refused, pointing at --resume. */
static void test_init_of_a_checkpoint(void)
{
    setup();
    char three[512], args[600];
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --max-steps 3 --save %s", data_dir, path("ck")), 0);
    CU_ASSERT_FATAL(find_step(path("ck"), 3, three, sizeof three));
    snprintf(args, sizeof args, "--max-steps 4 --init %s", three);
    refused(args, "000000003.safetensors: a checkpoint (--save writes those), not a weights file: to continue "
                  "training from it, use --resume ");
    test_remove_tmpdir(tmpdir);
}

/* ---- killed ---------------------------------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* kill -9 while checkpoints are written (one every step): three kills that
 * left a torn temporary file behind, each followed by a --resume of the same
 * command, then one to the end; it must end with the uninterrupted run's
 * weights. The file system decides how long a write takes, so kills are
 * tried at spread delays until three of them caught a write in progress. */
static void test_kill_during_checkpoint(void)
{
    setup();
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "--data %s --epochs 40 --quiet --export %s", data_dir,
                                path("whole.st")), 0);
    char args[512];
    snprintf(args, sizeof args, "--data %s --epochs 40 --quiet --save %s --save-every 1 --resume", data_dir,
             path("ck"));
    int torn = 0, tries = 0;
    srand(1);
    while (torn < 3 && tries < 200) {
        tries++;
        int fd;
        double started = wall_now();
        pid_t pid = harness_start(net(), &fd, "%s", args);
        sleep_ms(20 + rand() % 60);
        kill(pid, SIGKILL);
        char *out = NULL;
        int rc = test_child_output(pid, fd, &out);
        free(out);
        if (rc == 0) /* it finished before the kill: start over */
            test_remove_tmpdir(path("ck"));
        /* torn: this run left a temporary file (older ones are a past run's) */
        torn += rc == -1 && newest_tmp(path("ck")) >= started;
    }
    fprintf(stderr, "\n    %d kills, %d of them while a checkpoint was being written", tries, torn);
    CU_ASSERT_EQUAL(torn, 3);
    CU_ASSERT_EQUAL(harness_run(net(), NULL, "%s --export %s", args, path("resumed.st")), 0);
    CU_ASSERT(harness_same_tensors(path("whole.st"), path("resumed.st")));
    CU_ASSERT_EQUAL(count_files(path("ck"), 1), 0);
    test_remove_tmpdir(tmpdir);
}

/* One run per net and --save directory: a second process is refused while
 * the first holds the lock, and may take it once the first has ended. */
static void test_one_run_per_directory(void)
{
    setup();
    const DdpNet *n = net();
    CU_ASSERT_EQUAL_FATAL(ddp_checkpoint_make_dir(path("ck"), NULL), DDP_OK);
    int ready[2], go[2];
    CU_ASSERT_EQUAL_FATAL(pipe(ready), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(go), 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) { /* the first run: holds the lock until told */
        char c = ddp_checkpoint_lock(n, path("ck")) == DDP_OK ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(2);
        _exit(0);
    }
    char c = 0;
    CU_ASSERT_EQUAL(read(ready[0], &c, 1), 1);
    CU_ASSERT_EQUAL(c, 'y');
    CU_ASSERT_EQUAL(ddp_checkpoint_lock(n, path("ck")), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "is in use by another run of net 'tiny' (it holds "));
    CU_ASSERT_EQUAL(write(go[1], "x", 1), 1);
    int ws = 0;
    waitpid(pid, &ws, 0);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    /* the first has ended: a new run takes the lock (in a child of its own,
     * since a process keeps the lock it takes until it exits) */
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(ddp_checkpoint_lock(n, path("ck")) == DDP_OK ? 0 : 1);
    waitpid(pid, &ws, 0);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    test_remove_tmpdir(tmpdir);
}

/* A step of the run in the child of test_moved_directory: saves STEP into
 * DIR, and answers 'y' when the save did as WANT says (DDP_OK, or refused
 * as another run's directory). */
static char save_step(const char *dir, int64_t step, DdpStatus want)
{
    static float params[784 * 10 + 10], buffers[20], opt[784 * 10 + 10];
    static int64_t counts[8];
    DdpCheckpointRun run = {.step = step, .seed = 1, .batch = 20, .world = 1, .no_sync_every = 1, .shuffle = 1};
    DdpCheckpointState state = {params, buffers, opt, counts, NULL};
    char written[512];
    DdpStatus st = ddp_checkpoint_save(net(), dir, &run, &state, written, sizeof written);
    if (want != DDP_OK)
        return st != DDP_OK && strstr(ddp_error_message(), "is in use by another run of net 'tiny'") ? 'y' : 'n';
    return st == DDP_OK ? 'y' : 'n';
}

/* --save DIR moved away mid-run (or removed), then made again by the
 * run's next save: the run takes the new DIR's lock, so that no other run
 * takes it too; where another run already holds it, the save fails rather
 * than write among that run's checkpoints. */
static void test_moved_directory(void)
{
    setup();
    /* Each process keeps only its own ends, so that a child gone shows as
     * an end of file, not a hang; the children give up after a minute; a
     * write to one gone fails here rather than kill the runner. */
    void (*sigpipe_was)(int) = signal(SIGPIPE, SIG_IGN);
    int to_run[2], from_run[2];
    CU_ASSERT_EQUAL_FATAL(pipe(to_run), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(from_run), 0);
    const char *ck = path("ck");
    pid_t run = fork();
    CU_ASSERT_FATAL(run >= 0);
    if (run == 0) { /* the run: a save at each word from the test */
        alarm(60);
        close(to_run[1]);
        close(from_run[0]);
        char c = ddp_checkpoint_make_dir(ck, NULL) == DDP_OK && ddp_checkpoint_lock(net(), ck) == DDP_OK ? 'y' : 'n';
        for (int64_t step = 1; c != 'q'; step++) {
            c = c == 'y' || c == 'n' ? save_step(ck, step, c == 'n' ? DDP_BAD_INPUT : DDP_OK) : c;
            if (write(from_run[1], &c, 1) != 1 || read(to_run[0], &c, 1) != 1)
                _exit(2);
        }
        _exit(0);
    }
    close(to_run[0]);
    close(from_run[1]);
    char c = 0;
    CU_ASSERT(read(from_run[0], &c, 1) == 1 && c == 'y'); /* locked, step 1 saved */
    CU_ASSERT_EQUAL(rename(ck, path("ck.old")), 0);
    CU_ASSERT(write(to_run[1], "y", 1) == 1 && read(from_run[0], &c, 1) == 1 && c == 'y'); /* step 2, in a new ck */
    struct stat st;
    CU_ASSERT(stat(path("ck/checkpoint-tiny-000000002.safetensors"), &st) == 0);
    CU_ASSERT(stat(path("ck.old/checkpoint-tiny-000000001.safetensors"), &st) == 0);
    int ws = 0;
    pid_t rival = fork(); /* the new ck is the run's: another is refused */
    if (rival == 0)
        _exit(ddp_checkpoint_lock(net(), ck) == DDP_BAD_INPUT ? 0 : 1);
    waitpid(rival, &ws, 0);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    /* moved again, and another run takes the new one first: the run's
     * save is refused, and writes nothing there */
    CU_ASSERT_EQUAL(rename(ck, path("ck.older")), 0);
    int held[2], release[2]; /* the rival's own, so that the run's words reach the run alone */
    CU_ASSERT_EQUAL_FATAL(pipe(held), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(release), 0);
    rival = fork();
    if (rival == 0) {
        alarm(60);
        close(held[0]);
        close(release[1]);
        char r = ddp_checkpoint_make_dir(ck, NULL) == DDP_OK && ddp_checkpoint_lock(net(), ck) == DDP_OK ? 'y' : 'n';
        if (write(held[1], &r, 1) != 1 || read(release[0], &r, 1) != 1) /* holds it until the test says */
            _exit(2);
        _exit(0);
    }
    close(held[1]);
    close(release[0]);
    CU_ASSERT(read(held[0], &c, 1) == 1 && c == 'y');
    CU_ASSERT(write(to_run[1], "n", 1) == 1 && read(from_run[0], &c, 1) == 1 && c == 'y'); /* step 3 refused */
    CU_ASSERT(stat(path("ck/checkpoint-tiny-000000003.safetensors"), &st) != 0);
    CU_ASSERT(write(release[1], "q", 1) == 1 && write(to_run[1], "q", 1) == 1); /* the rival and the run end */
    waitpid(rival, &ws, 0);
    waitpid(run, &ws, 0);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    close(to_run[1]);
    close(from_run[0]);
    close(held[0]);
    close(release[1]);
    signal(SIGPIPE, sigpipe_was);
    test_remove_tmpdir(tmpdir);
}

void suite_checkpoint(void)
{
    static const TestCase cases[] = {
        {"stopped and resumed = uninterrupted, bit for bit (mid-epoch, eval, no_sync)", test_resume_bit_for_bit},
        {"the optimizer state is carried: zeroed momentum gives other weights", test_optimizer_state_matters},
        {"three kept, none torn; past --max-steps ends at once; empty dir starts", test_keeps_three_and_resumes_past_the_end},
        {"damaged or truncated newest: skipped, the older one used", test_skips_damaged},
        {"a damaged net name or hash: skipped as damage, not refused as another net's", test_damaged_name_or_hash_skipped},
        {"damaged checkpoints do not count among the three kept: a good older one stays", test_damaged_not_counted},
        {"a checkpoint that cannot be written mid-run: exit 1, the newest good one named and kept",
         test_failed_save_is_a_failure},
        {"other settings, a weights file, another net: status 2, named", test_refused},
        {"--save moved away mid-run: the next save takes the new directory's lock, or fails where another run "
         "holds it", test_moved_directory},
        {"a --log or --tensorboard that fills its disk mid-run: trained to the end and saved as without it, then "
         "status 1, said",
         test_full_log_trains_on},
        {"the checksum covers weights and metadata; counts that would overflow are refused", test_checksum},
        {"the precision recorded, checked on resuming, in the checksum; none recorded is fp32", test_precision_recorded},
        {"the layout recorded, checked on resuming, in the checksum; none recorded is NCHW", test_layout_recorded},
        {"the training set's size recorded, checked on resuming, under its checksum; none recorded resumes anywhere",
         test_train_samples_recorded},
        {"cuDNN's timed algorithms kept, in the checksum, read back; none kept reads \"\"", test_conv_choices_recorded},
        {"the epoch's loss sums kept exactly, under a checksum of their own, checked; none kept reads 0", test_loss_sums_recorded},
        {"a report a stop left out: kept exactly, under a checksum of its own, checked; no keys where none",
         test_left_out_report_recorded},
        {"a checkpoint with cuDNN's timed algorithms resumes on a CPU; an unreadable record: status 2",
         test_conv_choices_resumed},
        {"kill -9 during checkpointing x3, then --resume: bit for bit", test_kill_during_checkpoint},
        {"a run that diverges writes no NaN checkpoint and keeps the good ones", test_diverged_run_keeps_good_checkpoints},
        {"a NaN checkpoint: --resume FILE refuses it, --resume skips it", test_resume_skips_nonfinite},
        {"--save DIR of this net's checkpoints without --resume: status 2", test_forgotten_resume},
        {"--resume PATH with newer checkpoints in --save DIR, and --export onto a checkpoint: status 2, files kept",
         test_rollback_and_export_keep_checkpoints},
        {"two nets share a --save directory; older names resumed, never pruned", test_two_nets_share_a_directory},
        {"nets named alike but for '-' and '.' share a --save directory", test_names_alike_share_a_directory},
        {"a run refused by --save's or --init's checks leaves --log as it was", test_refused_run_keeps_the_log},
        {"outputs may lie in a new --save DIR; a run refused at start-up leaves no DIR", test_outputs_in_a_new_save_dir},
        {"--init of a checkpoint: status 2, suggesting --resume", test_init_of_a_checkpoint},
        {"one run of a net per --save directory: a second is refused while the first holds it",
         test_one_run_per_directory},
        {NULL, NULL},
    };
    test_add_suite("checkpoint", cases);
}
