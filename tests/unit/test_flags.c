/*
 * Tests of runtime/flags.c: every flag in both spellings, the defaults the
 * net supplies, each kind of bad value with the message the user sees, the
 * "did you mean", and which flags this one-rank build refuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"  // ddp_flags_init, _parse, _check_available, _apply, _usage
#include "testutil.h"

static DdpTrainConfig train(void)
{
    return (DdpTrainConfig){.batch = 64, .epochs = 10, .lr = 0.01, .seed = 5, .bucket_cap_bytes = 25 << 20};
}

/* Parses the space-separated ARGS over the defaults of train(). */
static DdpStatus parse(DdpFlags *f, const char *args)
{
    static char buf[1024];
    static char *argv[64];
    snprintf(buf, sizeof buf, "%s", args);
    int argc = 0;
    argv[argc++] = "prog";
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ", &save); tok && argc < 63; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = strcmp(tok, "EMPTY") == 0 ? tok + 5 : tok; /* EMPTY: an empty argument */
    DdpTrainConfig t = train();
    ddp_flags_init(f, &t);
    ddp_error_clear();
    return ddp_flags_parse(f, argc, argv);
}

/* ARGS must fail with exactly MESSAGE. */
static int refused(const char *args, const char *message)
{
    DdpFlags f;
    DdpStatus st = parse(&f, args);
    if (st == DDP_BAD_INPUT && strcmp(ddp_error_message(), message) == 0)
        return 1;
    fprintf(stderr, "\n'%s': status %d, message \"%s\"\n  expected \"%s\"", args, (int)st, ddp_error_message(),
            message);
    return 0;
}

static void test_defaults(void)
{
    DdpFlags f;
    CU_ASSERT_EQUAL_FATAL(parse(&f, ""), DDP_OK);
    CU_ASSERT_EQUAL(f.epochs, 10);
    CU_ASSERT_EQUAL(f.batch_size, 64);
    CU_ASSERT_EQUAL(f.lr, 0.01);
    CU_ASSERT_EQUAL(f.seed, 5);
    CU_ASSERT_EQUAL(f.precision, DDP_PRECISION_FP32); /* the net's, as train() leaves it */
    CU_ASSERT_EQUAL(f.max_steps, -1);
    CU_ASSERT_EQUAL(f.shuffle, 1);
    CU_ASSERT_EQUAL(f.eval_every, 0);
    CU_ASSERT_EQUAL(f.bucket_cap_mb, 25);
    CU_ASSERT_EQUAL(f.no_sync_every, 1);
    CU_ASSERT_EQUAL(f.timeout, 600);
    CU_ASSERT(f.data == NULL && f.log == NULL && f.export_path == NULL && f.init == NULL && f.save == NULL);
    CU_ASSERT(!f.quiet && !f.help && !f.resume);
    DdpTrainConfig t = train();
    ddp_flags_apply(&f, &t);
    CU_ASSERT(t.batch == 64 && t.epochs == 10 && t.lr == 0.01 && t.seed == 5 && t.bucket_cap_bytes == 25 << 20);
}

static void test_every_flag(void)
{
    DdpFlags f;
    CU_ASSERT_EQUAL_FATAL(parse(&f, "--data /d --epochs 3 --batch-size=32 --lr 0.5 --seed=18446744073709551615 "
                                    "--max-steps 0 --no-shuffle --eval-every 100 --log l.jsonl --export=e.st "
                                    "--init i.st --quiet --backend mpi --init-method tcp://10.0.0.1:29500 "
                                    "--rank 1 --world-size 2 --bucket-cap-mb 2.5 --no-sync-every 4 --save ck "
                                    "--save-every 50 --resume --timeout 60 --tensorboard tb --precision bf16"),
                          DDP_OK);
    CU_ASSERT_STRING_EQUAL(f.data, "/d");
    CU_ASSERT_EQUAL(f.epochs, 3);
    CU_ASSERT_EQUAL(f.batch_size, 32);
    CU_ASSERT_EQUAL(f.lr, 0.5);
    CU_ASSERT_EQUAL(f.seed, UINT64_MAX);
    CU_ASSERT_EQUAL(f.max_steps, 0);
    CU_ASSERT_EQUAL(f.shuffle, 0);
    CU_ASSERT_EQUAL(f.eval_every, 100);
    CU_ASSERT_STRING_EQUAL(f.log, "l.jsonl");
    CU_ASSERT_STRING_EQUAL(f.export_path, "e.st");
    CU_ASSERT_STRING_EQUAL(f.init, "i.st");
    CU_ASSERT_EQUAL(f.quiet, 1);
    CU_ASSERT_EQUAL(f.backend, DDP_BACKEND_MPI);
    CU_ASSERT_STRING_EQUAL(f.init_method, "tcp://10.0.0.1:29500");
    CU_ASSERT_EQUAL(f.rank, 1);
    CU_ASSERT_EQUAL(f.world_size, 2);
    CU_ASSERT_EQUAL(f.bucket_cap_mb, 2.5);
    CU_ASSERT_EQUAL(f.no_sync_every, 4);
    CU_ASSERT_STRING_EQUAL(f.save, "ck");
    CU_ASSERT_EQUAL(f.save_every, 50);
    CU_ASSERT_EQUAL(f.resume, 1);
    CU_ASSERT_PTR_NULL(f.resume_path);
    CU_ASSERT_EQUAL(f.timeout, 60);
    CU_ASSERT_STRING_EQUAL(f.tensorboard, "tb");
    DdpTrainConfig t = train();
    ddp_flags_apply(&f, &t);
    CU_ASSERT(t.batch == 32 && t.epochs == 3 && t.lr == 0.5 && t.seed == UINT64_MAX);
    CU_ASSERT_EQUAL(t.bucket_cap_bytes, 2621440);
    CU_ASSERT_EQUAL(f.precision, DDP_PRECISION_BF16);
    CU_ASSERT_EQUAL(t.precision, DDP_PRECISION_BF16);
    CU_ASSERT(!t.batch_global);
    /* the global batch: the net's batch replaced, and marked as all ranks' */
    CU_ASSERT_EQUAL_FATAL(parse(&f, "--global-batch 256"), DDP_OK);
    CU_ASSERT_EQUAL(f.global_batch, 256);
    t = train();
    ddp_flags_apply(&f, &t);
    CU_ASSERT(t.batch == 256 && t.batch_global);
    /* and --batch-size makes a net's global batch a rank's again */
    CU_ASSERT_EQUAL_FATAL(parse(&f, "--batch-size 16"), DDP_OK);
    t = train();
    t.batch_global = 1;
    ddp_flags_apply(&f, &t);
    CU_ASSERT(t.batch == 16 && !t.batch_global);

    /* --resume's optional path, both spellings; the last of a repeated flag wins. */
    CU_ASSERT_EQUAL(parse(&f, "--resume ck/step_100.safetensors --epochs 2 --epochs 4"), DDP_OK);
    CU_ASSERT_STRING_EQUAL(f.resume_path, "ck/step_100.safetensors");
    CU_ASSERT_EQUAL(f.epochs, 4);
    CU_ASSERT_EQUAL(parse(&f, "--resume=x.st"), DDP_OK);
    CU_ASSERT_STRING_EQUAL(f.resume_path, "x.st");
    CU_ASSERT_EQUAL(parse(&f, "--resume --quiet --save ck"), DDP_OK);
    CU_ASSERT(f.resume && f.resume_path == NULL && f.quiet);
    /* but --resume's two forms name different checkpoints: not both */
    CU_ASSERT_EQUAL(parse(&f, "--resume ck/a.st --save ck --resume"), DDP_BAD_INPUT);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(),
                           "--resume given twice, as 'ck/a.st' and without a value: give it once");
    CU_ASSERT_EQUAL(parse(&f, "--resume --resume=ck/b.st"), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(parse(&f, "--resume ck/a.st --resume=ck/b.st"), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(parse(&f, "--resume ck/a.st --resume=ck/a.st"), DDP_OK);
    CU_ASSERT_EQUAL(parse(&f, "--resume --save ck --resume"), DDP_OK);
    CU_ASSERT_EQUAL(parse(&f, "--backend=nccl --init-method env:// --init-method=tcp://[::1]:1"), DDP_OK);
    CU_ASSERT_EQUAL(f.backend, DDP_BACKEND_NCCL);
    CU_ASSERT_EQUAL(parse(&f, "--lr 0 --lr=1e-3 --seed 0"), DDP_OK);
    CU_ASSERT_EQUAL(f.lr, 1e-3);

    /* --help wins over everything, even bad flags. */
    CU_ASSERT_EQUAL(parse(&f, "--epochs 0 --bogus --help"), DDP_OK);
    CU_ASSERT_EQUAL(f.help, 1);
    CU_ASSERT_EQUAL(parse(&f, "-h"), DDP_OK);
    CU_ASSERT_EQUAL(f.help, 1);
}

static void test_bad_values(void)
{
    CU_ASSERT(refused("--epochs 0", "--epochs expects a whole number from 1 to 1000000, got '0'"));
    CU_ASSERT(refused("--epochs=abc", "--epochs expects a whole number from 1 to 1000000, got 'abc'"));
    CU_ASSERT(refused("--epochs 3x", "--epochs expects a whole number from 1 to 1000000, got '3x'"));
    CU_ASSERT(refused("--epochs 99999999999999999999999", "--epochs expects a whole number from 1 to 1000000, "
                                                         "got '99999999999999999999999'"));
    CU_ASSERT(refused("--epochs", "--epochs needs a value: a whole number from 1 to 1000000"));
    CU_ASSERT(refused("--epochs --lr 1", "--epochs needs a value: a whole number from 1 to 1000000"));
    CU_ASSERT(refused("--batch-size 1048577", "--batch-size expects a whole number from 1 to 1048576, got '1048577'"));
    CU_ASSERT(refused("--max-restarts 2 --save ck", "--max-restarts needs --nproc-per-node N: it restarts the ranks "
                      "that launcher starts (under mpirun or srun, restart the job there)"));
    CU_ASSERT(refused("--max-restarts 2 --nproc-per-node 2",
                      "--max-restarts needs --save DIR: the ranks restart from its newest checkpoint"));
    CU_ASSERT(refused("--max-restarts 2 --nproc-per-node 2 --save ck --resume ck/x.safetensors",
                      "--max-restarts restarts from the newest checkpoint in --save ck, not from --resume "
                      "ck/x.safetensors: give --resume alone, with ck's newest (copy the file there under its "
                      "checkpoint-NET-STEP.safetensors name, which --resume looks for)"));
    CU_ASSERT(refused("--batch-size 8 --global-batch 16",
                      "--batch-size (each rank's) and --global-batch (all ranks') both set the batch: give one"));
    CU_ASSERT(refused("--max-steps -1", "--max-steps expects a whole number >= 0, got '-1'"));
    CU_ASSERT(refused("--lr -0.1", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got '-0.1'"));
    CU_ASSERT(refused("--lr nan", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got 'nan'"));
    CU_ASSERT(refused("--lr inf", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got 'inf'"));
    CU_ASSERT(refused("--lr=", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got ''"));
    /* decimal only, as the whole numbers: strtod's hexadecimal, a leading
     * space or plus are not what was meant */
    CU_ASSERT(refused("--lr 0x1p-3", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got '0x1p-3'"));
    CU_ASSERT(refused("--lr \t0.1", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got '\t0.1'"));
    CU_ASSERT(refused("--bucket-cap-mb +1",
                      "--bucket-cap-mb expects a number >= 3.814697265625e-06 and at most 65536, got '+1'"));
    CU_ASSERT(refused("--seed -1", "--seed expects a whole number from 0 to 18446744073709551615, got '-1'"));
    CU_ASSERT(refused("--seed 18446744073709551616",
                      "--seed expects a whole number from 0 to 18446744073709551615, got '18446744073709551616'"));
    /* the .net's bucket line's range, 4 bytes to 64 GiB (buckets.h), in MiB */
    CU_ASSERT(refused("--bucket-cap-mb 0",
                      "--bucket-cap-mb expects a number >= 3.814697265625e-06 and at most 65536, got '0'"));
    CU_ASSERT(refused("--bucket-cap-mb 65536.5",
                      "--bucket-cap-mb expects a number >= 3.814697265625e-06 and at most 65536, got '65536.5'"));
    CU_ASSERT(refused("--timeout 0", "--timeout expects a number > 0 and at most 31536000, got '0'"));
    CU_ASSERT(refused("--backend gloo", "--backend expects nccl or mpi, got 'gloo'"));
    CU_ASSERT(refused("--precision fp16", "--precision expects fp32, tf32 or bf16, got 'fp16'"));
    /* DDP_ALLOW_TF32=1: tf32 on GPU builds where nothing else chose; CPU builds ignore it */
    DdpFlags g;
    CU_ASSERT_EQUAL_FATAL(parse(&g, ""), DDP_OK);
    ddp_flags_allow_tf32(&g, "1", 0);
    CU_ASSERT_EQUAL(g.precision, DDP_PRECISION_FP32);
    ddp_flags_allow_tf32(&g, "0", 1);
    CU_ASSERT_EQUAL(g.precision, DDP_PRECISION_FP32);
    ddp_flags_allow_tf32(&g, NULL, 1);
    CU_ASSERT_EQUAL(g.precision, DDP_PRECISION_FP32);
    ddp_flags_allow_tf32(&g, "1", 1);
    CU_ASSERT_EQUAL(g.precision, DDP_PRECISION_TF32);
    CU_ASSERT_EQUAL_FATAL(parse(&g, "--precision fp32"), DDP_OK);
    ddp_flags_allow_tf32(&g, "1", 1);
    CU_ASSERT_EQUAL(g.precision, DDP_PRECISION_FP32);
    CU_ASSERT_EQUAL_FATAL(parse(&g, ""), DDP_OK);
    g.precision = DDP_PRECISION_BF16; /* the net's */
    ddp_flags_allow_tf32(&g, "1", 1);
    CU_ASSERT_EQUAL(g.precision, DDP_PRECISION_BF16);
    /* tcp://'s host and port are judged by topology.c (test_rendezvous), which says which is wrong */
    CU_ASSERT(refused("--init-method tcp:/h:80", "--init-method expects env:// or tcp://HOST:PORT, got 'tcp:/h:80'"));
    CU_ASSERT(refused("--nproc-per-node 0", "--nproc-per-node expects a whole number from 1 to 1024, got '0'"));
    CU_ASSERT(refused("--data EMPTY", "--data expects a directory, got ''"));
    CU_ASSERT(refused("--export=", "--export expects a file name, got ''"));
    CU_ASSERT(refused("--resume=", "--resume expects a checkpoint path, or nothing, got ''"));
    CU_ASSERT(refused("--quiet=1", "--quiet takes no value, got '--quiet=1'"));
    CU_ASSERT(refused("--rank 1", "--rank needs --world-size"));
    CU_ASSERT(refused("--rank 2 --world-size 2", "--rank 2 is out of range for --world-size 2 (ranks are 0 to 1)"));
    CU_ASSERT(refused("--save-every 5", "--save-every needs --save DIR"));
}

static void test_unknown(void)
{
    CU_ASSERT(refused("--epoch 3", "unknown option '--epoch'; did you mean '--epochs'?"));
    CU_ASSERT(refused("--epoch=3", "unknown option '--epoch'; did you mean '--epochs'?"));
    CU_ASSERT(refused("--batchsize 3", "unknown option '--batchsize'; did you mean '--batch-size'?"));
    CU_ASSERT(refused("--maxsteps 3", "unknown option '--maxsteps'; did you mean '--max-steps'?"));
    CU_ASSERT(refused("-epochs 3", "unknown option '-epochs'; did you mean '--epochs'?"));
    CU_ASSERT(refused("--lr 1 --qiuet", "unknown option '--qiuet'; did you mean '--quiet'?"));
    CU_ASSERT(refused("--verbose", "unknown option '--verbose' (--help lists them)"));
    CU_ASSERT(refused("--xyzzyxyzzyxyzzyxyzzyxyzzyxyzzyxyzzyxyzzy",
                      "unknown option '--xyzzyxyzzyxyzzyxyzzyxyzzyxyzzyxyzzyxyzzy' (--help lists them)"));
    CU_ASSERT(refused("mnist.net", "unexpected argument 'mnist.net': every option starts with --"));
}

static void test_checkpoint_flags(void)
{
    DdpFlags f;
    CU_ASSERT_EQUAL(parse(&f, "--resume"), DDP_BAD_INPUT);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(), "--resume without a PATH takes the newest checkpoint in --save DIR: "
                                                "give one or the other");
    CU_ASSERT_EQUAL(parse(&f, "--save-every 9"), DDP_BAD_INPUT);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(), "--save-every needs --save DIR");
    CU_ASSERT_EQUAL(parse(&f, "--save ck --save-every 9 --resume"), DDP_OK);
    CU_ASSERT(f.resume && !f.resume_path && strcmp(f.save, "ck") == 0 && f.save_every == 9);
    CU_ASSERT_EQUAL(parse(&f, "--resume ck/checkpoint-000000009.safetensors"), DDP_OK);
    CU_ASSERT(f.resume && f.resume_path && strcmp(f.resume_path, "ck/checkpoint-000000009.safetensors") == 0);
    /* a checkpoint named and --init: two sources of the weights, one of them
     * silently lost; bare --resume with --init is a restartable first run */
    CU_ASSERT(refused("--init w.safetensors --resume ck/x.safetensors",
                      "--init w.safetensors and --resume ck/x.safetensors both give the weights: give one"));
    CU_ASSERT(refused("--eval-only --init w.safetensors --resume ck/x.safetensors",
                      "--init w.safetensors and --resume ck/x.safetensors both give the weights: give one"));
    CU_ASSERT_EQUAL(parse(&f, "--init w.safetensors --save ck --resume"), DDP_OK);
    CU_ASSERT_EQUAL(parse(&f, "--nproc-per-node 4 --world-size 4 --rank 3 --no-sync-every 2 --timeout 30 "
                              "--bucket-cap-mb 100 --backend nccl --init-method tcp://127.0.0.1:29500"), DDP_OK);
    CU_ASSERT_EQUAL(f.nproc_per_node, 4);
    CU_ASSERT_EQUAL(f.rank, 3);
    CU_ASSERT_EQUAL(f.no_sync_every, 2);
}

static void test_usage(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    CU_ASSERT_FATAL(m != NULL);
    DdpTrainConfig t = train();
    ddp_flags_usage(m, "mnist_train", "mnist", &t);
    fclose(m);
    CU_ASSERT(strstr(text, "usage: mnist_train [options]") != NULL);
    CU_ASSERT(strstr(text, "'mnist'") != NULL);
    static const char *const shown[] = {
        "--data DIR", "--epochs N", "(default 10)", "--batch-size N", "(default 64)", "--global-batch N", "--lr X",
        "(default 0.01)",
        "--seed N", "--max-steps N", "--no-shuffle", "--nproc-per-node N", "--backend nccl|mpi",
        "--init-method env://|tcp://HOST:PORT", "--rank R", "--world-size W", "--bucket-cap-mb X", "(default 25)",
        "--no-sync-every K", "--save DIR", "--save-every N", "--resume [PATH]", "--eval-every N",
        "--log FILE.jsonl", "--export FILE.safetensors", "--init FILE.safetensors", "--timeout SECONDS",
        "--quiet", "--help", "/usr/share/datasets/fashion-mnist", "--precision fp32|tf32|bf16", "(default fp32)",
    };
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
        if (!strstr(text, shown[i])) {
            fprintf(stderr, "\n--help lacks '%s'", shown[i]);
            CU_FAIL("--help incomplete");
        }
    free(text);
    CU_ASSERT_STRING_EQUAL(ddp_prog_name("/a/b/mnist_train"), "mnist_train");
    CU_ASSERT_STRING_EQUAL(ddp_prog_name("mnist_train"), "mnist_train");
    CU_ASSERT_STRING_EQUAL(ddp_prog_name(NULL), "ddp");
}

/* Every flag says whether ranks must agree on it (ddp_dist_check_same
 * compares those): a new row that says nothing fails here. The flags that
 * change what a rank sends, or whether rank 0 acts, are among them. */
static void test_every_flag_classified(void)
{
    for (int i = 0; i < DDP_FLAG_COUNT; i++) {
        DdpAgree a = ddp_flags_agreement((DdpFlagId)i);
        if (a != DDP_AGREE_VALUE && a != DDP_AGREE_GIVEN && a != DDP_AGREE_LOCAL)
            fprintf(stderr, "\n--%s is not classified", ddp_flags_name((DdpFlagId)i));
        CU_ASSERT(a == DDP_AGREE_VALUE || a == DDP_AGREE_GIVEN || a == DDP_AGREE_LOCAL);
    }
    static const DdpFlagId values[] = {DDP_FLAG_EPOCHS, DDP_FLAG_BATCH_SIZE, DDP_FLAG_LR, DDP_FLAG_SEED,
                                       DDP_FLAG_MAX_STEPS, DDP_FLAG_NO_SHUFFLE, DDP_FLAG_EVAL_EVERY,
                                       DDP_FLAG_BUCKET_CAP_MB, DDP_FLAG_NO_SYNC_EVERY, DDP_FLAG_SAVE_EVERY};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        CU_ASSERT_EQUAL(ddp_flags_agreement(values[i]), DDP_AGREE_VALUE);
    CU_ASSERT_EQUAL(ddp_flags_agreement(DDP_FLAG_SAVE), DDP_AGREE_GIVEN);
    CU_ASSERT_EQUAL(ddp_flags_agreement(DDP_FLAG_RESUME), DDP_AGREE_GIVEN);
    CU_ASSERT_EQUAL(ddp_flags_agreement(DDP_FLAG_RANK), DDP_AGREE_LOCAL);
    /* compared by their effect: the world size itself (distributed.c), and
     * ranks on different backends never form a group */
    CU_ASSERT_EQUAL(ddp_flags_agreement(DDP_FLAG_WORLD_SIZE), DDP_AGREE_LOCAL);
    CU_ASSERT_EQUAL(ddp_flags_agreement(DDP_FLAG_BACKEND), DDP_AGREE_LOCAL);

    DdpFlags f;
    char v[48];
    CU_ASSERT_EQUAL_FATAL(parse(&f, "--eval-every 2 --save /d --no-shuffle"), DDP_OK);
    ddp_flags_agreed_value(&f, DDP_FLAG_EVAL_EVERY, v, sizeof v);
    CU_ASSERT_STRING_EQUAL(v, "2");
    ddp_flags_agreed_value(&f, DDP_FLAG_LR, v, sizeof v);
    CU_ASSERT_STRING_EQUAL(v, "0.01");
    ddp_flags_agreed_value(&f, DDP_FLAG_SAVE, v, sizeof v);
    CU_ASSERT_STRING_EQUAL(v, "given");
    ddp_flags_agreed_value(&f, DDP_FLAG_RESUME, v, sizeof v);
    CU_ASSERT_STRING_EQUAL(v, "not given");
    ddp_flags_agreed_value(&f, DDP_FLAG_NO_SHUFFLE, v, sizeof v);
    CU_ASSERT_STRING_EQUAL(v, "given");
}

/* --lr is used as a float: what no float holds is refused, not a NaN later. */
static void test_float_flags(void)
{
    CU_ASSERT(refused("--lr 1e39", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got '1e39'"));
    CU_ASSERT(refused("--lr 1e-50", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got '1e-50'"));
    /* below a double's least: strtod gives 0, which would train at lr 0 */
    CU_ASSERT(refused("--lr 1e-400", "--lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), "
                      "got '1e-400'"));
    CU_ASSERT(refused("--bucket-cap-mb 1e-400",
                      "--bucket-cap-mb expects a number >= 3.814697265625e-06 and at most 65536, got '1e-400'"));
    DdpFlags f;
    CU_ASSERT_EQUAL(parse(&f, "--lr 3e38"), DDP_OK);
    CU_ASSERT_EQUAL(parse(&f, "--lr 0"), DDP_OK);
}

void suite_flags(void)
{
    static const TestCase cases[] = {
        {"defaults come from the net", test_defaults},
        {"every flag, --flag value and --flag=value", test_every_flag},
        {"bad values name the flag and the range", test_bad_values},
        {"unknown options get a suggestion", test_unknown},
        {"checkpoint flags: --resume needs a PATH or --save; the rest parse", test_checkpoint_flags},
        {"--help lists every flag with the net's defaults", test_usage},
        {"every flag says whether ranks must agree on it; values as ranks compare them", test_every_flag_classified},
        {"--lr refuses what no float holds", test_float_flags},
        {NULL, NULL},
    };
    test_add_suite("flags", cases);
}
