/*
 * Tests of runtime/safetensors.c: round trips, the exact bytes written, the
 * messages a mismatched file gets, files exchanged with a Python reader and
 * writer built from the format's spec alone (struct + json + numpy), and a
 * corpus of corrupt files, each of which must be refused cleanly.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>  // setrlimit: a write cut short
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "safetensors.h"  // ddp_safetensors_write, _open, _find, _expect, _close
#include "testutil.h"

static char tmpdir[64];

static void make_tmpdir(void) { test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_st_XXXXXX"); }

static int message_has(const char *what)
{
    if (strstr(ddp_error_message(), what))
        return 1;
    fprintf(stderr, "\nmessage \"%s\" lacks \"%s\"", ddp_error_message(), what);
    return 0;
}

/* A python3 with numpy, or NULL. */
static const char *python_numpy(void)
{
    const char *p = getenv("PYTHON");
    if (!p || !*p)
        p = "/usr/bin/python3";
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -c 'import numpy, json, struct' >/dev/null 2>&1", p);
    return test_run(cmd, NULL) == 0 ? p : NULL;
}

/* The tensors of a small net: weights, a running mean in double, a
 * BatchNorm step count (int64 scalar), bytes, and an empty tensor. */
static float weight[2 * 3];
static double running[4];
static int64_t steps = 123456789012;
static unsigned char mask[3] = {1, 0, 255};

static int fill_net(DdpTensor *t)
{
    for (int i = 0; i < 6; i++)
        weight[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 4; i++)
        running[i] = 1.0 / (i + 3);
    t[0] = (DdpTensor){.name = "conv1.weight", .dtype = DDP_DTYPE_F32, .ndim = 2, .shape = {2, 3}, .data = weight};
    t[1] = (DdpTensor){.name = "bn1.running_mean", .dtype = DDP_DTYPE_F64, .ndim = 1, .shape = {4}, .data = running};
    t[2] = (DdpTensor){.name = "bn1.num_batches_tracked", .dtype = DDP_DTYPE_I64, .ndim = 0, .data = &steps};
    t[3] = (DdpTensor){.name = "mask", .dtype = DDP_DTYPE_U8, .ndim = 1, .shape = {3}, .data = mask};
    t[4] = (DdpTensor){.name = "empty", .dtype = DDP_DTYPE_F32, .ndim = 2, .shape = {0, 5}, .data = NULL};
    return 5;
}

static const DdpMeta net_meta[] = {{"epoch", "3"}, {"net", "mnist \xe2\x98\x83 \"quoted\"\n"}};

static void test_round_trip(void)
{
    make_tmpdir();
    DdpTensor t[5];
    int n = fill_net(t);
    const char *path = test_tmp_path(tmpdir, "w.safetensors");
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(path, t, n, net_meta, 2), DDP_OK);
    CU_ASSERT_EQUAL(test_count_prefixed(tmpdir, "w.safetensors.tmp"), 0);
    /* A second write replaces the first. */
    steps++;
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(path, t, n, net_meta, 2), DDP_OK);

    DdpSafetensors *f;
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open(path, &f), DDP_OK);
    CU_ASSERT_EQUAL(ddp_safetensors_count(f), 5);
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_path(f), path);
    for (int i = 0; i < n; i++) {
        const DdpTensor *got = ddp_safetensors_find(f, t[i].name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got);
        CU_ASSERT_EQUAL(got->dtype, t[i].dtype);
        CU_ASSERT_EQUAL(got->ndim, t[i].ndim);
        for (int d = 0; d < t[i].ndim; d++)
            CU_ASSERT_EQUAL(got->shape[d], t[i].shape[d]);
        if (got->nbytes)
            CU_ASSERT(memcmp(got->data, t[i].data, got->nbytes) == 0);
        CU_ASSERT_EQUAL((uintptr_t)got->data % ddp_dtype_size(got->dtype), 0);
    }
    CU_ASSERT_EQUAL(*(const int64_t *)ddp_safetensors_find(f, "bn1.num_batches_tracked")->data, 123456789013);
    CU_ASSERT_PTR_NULL(ddp_safetensors_find(f, "conv2.weight"));
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "epoch"), "3");
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "net"), net_meta[1].value);
    CU_ASSERT_PTR_NULL(ddp_safetensors_meta(f, "seed"));
    /* Data order: 8-byte elements first, then 4, then 1, names ascending. */
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_tensor(f, 0)->name, "bn1.num_batches_tracked");
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_tensor(f, 1)->name, "bn1.running_mean");
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_tensor(f, 2)->name, "conv1.weight");
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_tensor(f, 4)->name, "mask");
    CU_ASSERT_PTR_NULL(ddp_safetensors_tensor(f, 5));
    ddp_safetensors_close(f);

    /* The header alone: the same names, shapes and metadata, no data. */
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open_header(path, &f), DDP_OK);
    CU_ASSERT_EQUAL(ddp_safetensors_count(f), 5);
    for (int i = 0; i < n; i++) {
        const DdpTensor *got = ddp_safetensors_find(f, t[i].name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got);
        CU_ASSERT_EQUAL(got->ndim, t[i].ndim);
        CU_ASSERT_PTR_NULL(got->data);
    }
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "net"), net_meta[1].value);
    ddp_safetensors_close(f);
    test_remove_tmpdir(tmpdir);
}

/* The bytes on disk, pinned: what the reference implementation writes. */
static void test_exact_bytes(void)
{
    make_tmpdir();
    float b[2] = {1.0f, -2.0f};
    int64_t a = 7;
    DdpTensor t[2] = {
        {.name = "b", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {2}, .data = b},
        {.name = "a", .dtype = DDP_DTYPE_I64, .ndim = 0, .data = &a},
    };
    DdpMeta meta = {"format", "pt"};
    const char *path = test_tmp_path(tmpdir, "x.safetensors");
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(path, t, 2, &meta, 1), DDP_OK);
    size_t len;
    char *bytes = test_read_file(path, &len);
    CU_ASSERT_FATAL(bytes != NULL);
    static const char json[] = "{\"__metadata__\":{\"format\":\"pt\"},"
                               "\"a\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
                               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    size_t header = (sizeof json - 1 + 7) / 8 * 8;
    CU_ASSERT_EQUAL_FATAL(len, 8 + header + 16);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | (unsigned char)bytes[i];
    CU_ASSERT_EQUAL(n, header);
    CU_ASSERT(memcmp(bytes + 8, json, sizeof json - 1) == 0);
    for (size_t i = sizeof json - 1; i < header; i++)
        CU_ASSERT_EQUAL(bytes[8 + i], ' ');
    CU_ASSERT(memcmp(bytes + 8 + header, &a, 8) == 0);
    CU_ASSERT(memcmp(bytes + 8 + header + 8, b, 8) == 0);
    free(bytes);

    /* No tensors at all is a valid file too. */
    CU_ASSERT_EQUAL(ddp_safetensors_write(path, NULL, 0, NULL, 0), DDP_OK);
    bytes = test_read_file(path, &len);
    CU_ASSERT_FATAL(bytes != NULL);
    CU_ASSERT_EQUAL(len, 16);
    CU_ASSERT(memcmp(bytes + 8, "{}      ", 8) == 0);
    free(bytes);
    DdpSafetensors *f;
    CU_ASSERT_EQUAL(ddp_safetensors_open(path, &f), DDP_OK);
    CU_ASSERT_EQUAL(ddp_safetensors_count(f), 0);
    ddp_safetensors_close(f);
    test_remove_tmpdir(tmpdir);
}

static void test_expect_messages(void)
{
    make_tmpdir();
    static float w[32 * 5 * 5];
    static float bias[32];
    DdpTensor t[4] = {
        {.name = "conv1.weight", .dtype = DDP_DTYPE_F32, .ndim = 4, .shape = {32, 1, 5, 5}, .data = w},
        {.name = "conv1.bias", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {32}, .data = bias},
        {.name = "fc3.weight", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {32}, .data = bias},
        {.name = "fc3.bias", .dtype = DDP_DTYPE_F64, .ndim = 1, .shape = {16}, .data = bias},
    };
    char cwd[4096];
    CU_ASSERT_FATAL(getcwd(cwd, sizeof cwd) != NULL);
    CU_ASSERT_EQUAL_FATAL(chdir(tmpdir), 0);  /* so the messages name the file as a user would */
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write("w.safetensors", t, 4, NULL, 0), DDP_OK);
    DdpSafetensors *f;
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open("w.safetensors", &f), DDP_OK);
    const void *data = NULL;
    int64_t want[4] = {32, 1, 3, 3};
    CU_ASSERT_EQUAL(ddp_safetensors_expect(f, "conv1.weight", DDP_DTYPE_F32, want, 4, &data), DDP_BAD_INPUT);
    CU_ASSERT(message_has("w.safetensors: tensor 'conv1.weight' has shape [32,1,5,5], the net expects [32,1,3,3]"));
    CU_ASSERT_PTR_NULL(data);
    CU_ASSERT_EQUAL(ddp_safetensors_expect(f, "conv1.weight", DDP_DTYPE_F32, want, 2, &data), DDP_BAD_INPUT);
    CU_ASSERT(message_has("the net expects [32,1]"));
    CU_ASSERT_EQUAL(ddp_safetensors_expect(f, "conv2.weight", DDP_DTYPE_F32, want, 4, &data), DDP_BAD_INPUT);
    CU_ASSERT(message_has("w.safetensors: has no tensor 'conv2.weight'"));
    int64_t bias_shape[1] = {32};
    CU_ASSERT_EQUAL(ddp_safetensors_expect(f, "conv1.bias", DDP_DTYPE_F64, bias_shape, 1, &data), DDP_BAD_INPUT);
    CU_ASSERT(message_has("w.safetensors: tensor 'conv1.bias' has dtype F32, the net expects F64"));
    want[2] = want[3] = 5;
    CU_ASSERT_EQUAL(ddp_safetensors_expect(f, "conv1.weight", DDP_DTYPE_F32, want, 4, &data), DDP_OK);
    CU_ASSERT_PTR_NOT_NULL(data);
    CU_ASSERT_EQUAL(ddp_safetensors_expect(f, "conv1.bias", DDP_DTYPE_F32, bias_shape, 1, &data), DDP_OK);
    CU_ASSERT_EQUAL(ddp_safetensors_check_unused(f), DDP_BAD_INPUT);
    CU_ASSERT(message_has("w.safetensors: unexpected tensors 'fc3.bias', 'fc3.weight': "
                          "the net has no such parameters"));
    ddp_safetensors_close(f);

    /* Many extra names: the list ends with a count. */
    enum { MANY = 200 };
    DdpTensor *lots = calloc(MANY, sizeof *lots);
    char (*names)[48] = calloc(MANY, sizeof *names);
    CU_ASSERT_FATAL(lots && names);
    for (int i = 0; i < MANY; i++) {
        snprintf(names[i], sizeof names[i], "layer%03d.some_long_parameter_name", i);
        lots[i] = (DdpTensor){.name = names[i], .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {1}, .data = w};
    }
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write("many.safetensors", lots, MANY, NULL, 0), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open("many.safetensors", &f), DDP_OK);
    CU_ASSERT_EQUAL(ddp_safetensors_check_unused(f), DDP_BAD_INPUT);
    CU_ASSERT(message_has("many.safetensors: unexpected tensors 'layer000.some_long_parameter_name', "));
    CU_ASSERT(message_has(" more: the net has no such parameters"));
    ddp_safetensors_close(f);
    free(lots);
    free(names);
    CU_ASSERT_EQUAL(chdir(cwd), 0);
    test_remove_tmpdir(tmpdir);
}

static void test_write_failures(void)
{
    make_tmpdir();
    float v[2] = {0, 0};
    DdpTensor t[2] = {
        {.name = "x", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {2}, .data = v},
        {.name = "x", .dtype = DDP_DTYPE_F64, .ndim = 1, .shape = {1}, .data = v},
    };
    CU_ASSERT_EQUAL(ddp_safetensors_write(test_tmp_path(tmpdir, "dup.safetensors"), t, 2, NULL, 0), DDP_FAIL);
    CU_ASSERT(message_has("two tensors named 'x'"));
    CU_ASSERT_EQUAL(test_count_prefixed(tmpdir, "dup.safetensors.tmp"), 0);
    t[1].name = "y";
    t[1].shape[0] = -1;
    CU_ASSERT_EQUAL(ddp_safetensors_write(test_tmp_path(tmpdir, "neg.safetensors"), t, 2, NULL, 0), DDP_FAIL);
    CU_ASSERT(message_has("internal error: tensor 'y' has a bad shape"));
    t[1].name = "__metadata__";
    CU_ASSERT_EQUAL(ddp_safetensors_write(test_tmp_path(tmpdir, "meta.safetensors"), t, 2, NULL, 0), DDP_FAIL);
    CU_ASSERT_EQUAL(ddp_safetensors_write("/nonexistent/dir/w.safetensors", t, 1, NULL, 0), DDP_FAIL);
    CU_ASSERT(message_has("/nonexistent/dir/w.safetensors: cannot create a temporary file beside it: No such file"));
    /* A write that fails half-way (a file size limit, in a child) leaves the
     * previous file as it was, and no temporary file. */
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(test_tmp_path(tmpdir, "keep.safetensors"), t, 1, NULL, 0), DDP_OK);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit = {16, 16};
        setrlimit(RLIMIT_FSIZE, &limit);
        _exit(ddp_safetensors_write(test_tmp_path(tmpdir, "keep.safetensors"), t, 1, NULL, 0) == DDP_FAIL ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CU_ASSERT_EQUAL(test_count_prefixed(tmpdir, "keep.safetensors.tmp"), 0);
    DdpSafetensors *f;
    CU_ASSERT_EQUAL(ddp_safetensors_open(test_tmp_path(tmpdir, "keep.safetensors"), &f), DDP_OK);
    ddp_safetensors_close(f);
    test_remove_tmpdir(tmpdir);
}

/* ---- interop with a reader and a writer written from the spec in Python ---- */

static const char py_read[] =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "raw = open(sys.argv[1], 'rb').read()\n"
    "n, = struct.unpack('<Q', raw[:8])\n"
    "assert n % 8 == 0, n\n"
    "h = json.loads(raw[8:8 + n].decode('utf-8'))\n"
    "meta = h.pop('__metadata__')\n"
    "assert meta == {'epoch': '3', 'net': 'mnist \\u2603 \"quoted\"\\n'}, meta\n"
    "types = {'F32': '<f4', 'F64': '<f8', 'I64': '<i8', 'U8': 'u1'}\n"
    "data = raw[8 + n:]\n"
    "t = {}\n"
    "for name, info in h.items():\n"
    "    b, e = info['data_offsets']\n"
    "    t[name] = np.frombuffer(data[b:e], dtype=types[info['dtype']]).reshape(info['shape'])\n"
    "assert sorted(t) == ['bn1.num_batches_tracked', 'bn1.running_mean', 'conv1.weight', 'empty', 'mask']\n"
    "assert t['conv1.weight'].dtype == np.float32\n"
    "assert np.array_equal(t['conv1.weight'], (np.arange(6) * 0.5 - 1).astype('<f4').reshape(2, 3))\n"
    "assert np.array_equal(t['bn1.running_mean'], 1.0 / (np.arange(4) + 3))\n"
    "assert t['bn1.num_batches_tracked'].shape == () and t['bn1.num_batches_tracked'] == 123456789012\n"
    "assert np.array_equal(t['mask'], np.array([1, 0, 255], dtype='u1'))\n"
    "assert t['empty'].shape == (0, 5)\n"
    "print('python read it')\n";

/* Writes tensors as the spec describes; with 'misaligned', a 3-byte tensor
 * goes first so the float data after it is off its alignment. */
static const char py_write[] =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "t = {'conv1.weight': (np.arange(24) / 7).astype('<f4').reshape(2, 3, 4),\n"
    "     'bn.num_batches_tracked': np.array(123456789012, dtype='<i8'),\n"
    "     'x': np.array([1.5, -2.25], dtype='<f8'),\n"
    "     'b': np.array([7, 8, 9], dtype='u1')}\n"
    "names = {'float32': 'F32', 'float64': 'F64', 'int64': 'I64', 'uint8': 'U8'}\n"
    "order = sorted(t, key=lambda k: (-t[k].itemsize, k))\n"
    "if sys.argv[2] == 'misaligned':\n"
    "    order = ['b'] + [k for k in order if k != 'b']\n"
    "header, blobs, at = {'__metadata__': {'format': 'pt'}}, [], 0\n"
    "for k in order:\n"
    "    b = t[k].tobytes()\n"
    "    header[k] = {'dtype': names[str(t[k].dtype)], 'shape': list(t[k].shape), 'data_offsets': [at, at + len(b)]}\n"
    "    at += len(b)\n"
    "    blobs.append(b)\n"
    "hb = json.dumps(header, indent=1).encode()\n"
    "hb += b' ' * ((8 - len(hb) % 8) % 8)\n"
    "open(sys.argv[1], 'wb').write(struct.pack('<Q', len(hb)) + hb + b''.join(blobs))\n";

static void test_python_interop(void)
{
    const char *py = python_numpy();
    if (!py) {
        fprintf(stderr, "\n(skipped: no python3 with numpy)");
        return;
    }
    make_tmpdir();
    FILE *s = fopen(test_tmp_path(tmpdir, "read.py"), "w");
    CU_ASSERT_FATAL(s != NULL);
    fputs(py_read, s);
    fclose(s);
    s = fopen(test_tmp_path(tmpdir, "write.py"), "w");
    CU_ASSERT_FATAL(s != NULL);
    fputs(py_write, s);
    fclose(s);

    /* ours -> Python */
    DdpTensor t[5];
    int n = fill_net(t);
    steps = 123456789012;
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(test_tmp_path(tmpdir, "c.safetensors"), t, n, net_meta, 2), DDP_OK);
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", py, test_tmp_path(tmpdir, "read.py"), test_tmp_path(tmpdir, "c.safetensors"));
    int rc = test_run(cmd, &out);
    if (rc != 0)
        fprintf(stderr, "\n%s", out ? out : "");
    CU_ASSERT_EQUAL(rc, 0);
    free(out);

    /* Python -> ours, aligned as the reference writes, and misaligned. */
    for (int misaligned = 0; misaligned < 2; misaligned++) {
        snprintf(cmd, sizeof cmd, "%s '%s' '%s' %s", py, test_tmp_path(tmpdir, "write.py"), test_tmp_path(tmpdir, "py.safetensors"),
                 misaligned ? "misaligned" : "aligned");
        CU_ASSERT_EQUAL_FATAL(test_run(cmd, NULL), 0);
        DdpSafetensors *f;
        CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open(test_tmp_path(tmpdir, "py.safetensors"), &f), DDP_OK);
        const void *data;
        int64_t shape[3] = {2, 3, 4};
        CU_ASSERT_EQUAL_FATAL(ddp_safetensors_expect(f, "conv1.weight", DDP_DTYPE_F32, shape, 3, &data), DDP_OK);
        CU_ASSERT_EQUAL((uintptr_t)data % 4, 0);
        int bad = 0;
        for (int i = 0; i < 24; i++)
            bad += ((const float *)data)[i] != (float)(i / 7.0);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL_FATAL(ddp_safetensors_expect(f, "bn.num_batches_tracked", DDP_DTYPE_I64, NULL, 0, &data),
                              DDP_OK);
        CU_ASSERT_EQUAL(*(const int64_t *)data, 123456789012);
        int64_t two = 2, three = 3;
        CU_ASSERT_EQUAL_FATAL(ddp_safetensors_expect(f, "x", DDP_DTYPE_F64, &two, 1, &data), DDP_OK);
        CU_ASSERT_EQUAL(((const double *)data)[1], -2.25);
        CU_ASSERT_EQUAL_FATAL(ddp_safetensors_expect(f, "b", DDP_DTYPE_U8, &three, 1, &data), DDP_OK);
        CU_ASSERT_EQUAL(((const unsigned char *)data)[2], 9);
        CU_ASSERT_EQUAL(ddp_safetensors_check_unused(f), DDP_OK);
        CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "format"), "pt");
        ddp_safetensors_close(f);
        /* the header alone, misaligned or not: what it says, no data */
        CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open_header(test_tmp_path(tmpdir, "py.safetensors"), &f), DDP_OK);
        CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "format"), "pt");
        CU_ASSERT_PTR_NULL(ddp_safetensors_find(f, "conv1.weight")->data);
        ddp_safetensors_close(f);
    }
    test_remove_tmpdir(tmpdir);
}

/* ---- corrupt files ------------------------------------------------------------ */

/* Writes the 8-byte length of JSON (or LEN_OVERRIDE when not -1), the JSON,
 * then DATA_LEN bytes of data, and expects the reader to refuse the file
 * with a message holding WHAT. */
static void expect_corrupt(const char *json, int64_t len_override, size_t data_len, const char *what)
{
    const char *path = test_tmp_path(tmpdir, "bad.safetensors");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    uint64_t n = len_override >= 0 ? (uint64_t)len_override : strlen(json);
    for (int b = 0; b < 8; b++)
        putc((int)(n >> (8 * b) & 0xff), f);
    fputs(json, f);
    for (size_t i = 0; i < data_len; i++)
        putc((int)i, f);
    fclose(f);
    /* the header alone is held to the same checks, the file's size included */
    for (int header_only = 0; header_only <= 1; header_only++) {
        DdpSafetensors *st = (DdpSafetensors *)1;
        DdpStatus status = header_only ? ddp_safetensors_open_header(path, &st) : ddp_safetensors_open(path, &st);
        CU_ASSERT_EQUAL(status, DDP_BAD_INPUT);
        CU_ASSERT_PTR_NULL(st);
        if (status == DDP_OK)
            ddp_safetensors_close(st);
        CU_ASSERT(message_has(what));
    }
}

#define T(name, dtype, shape, b, e) "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_corrupt_corpus(void)
{
    make_tmpdir();
    /* too short for even the length */
    FILE *f = fopen(test_tmp_path(tmpdir, "bad.safetensors"), "wb");
    CU_ASSERT_FATAL(f != NULL);
    fputs("abc", f);
    fclose(f);
    DdpSafetensors *st;
    CU_ASSERT_EQUAL(ddp_safetensors_open(test_tmp_path(tmpdir, "bad.safetensors"), &st), DDP_BAD_INPUT);
    CU_ASSERT(message_has("bad.safetensors: truncated: 3 bytes, too short for the 8-byte header length"));
    CU_ASSERT_EQUAL(ddp_safetensors_open(test_tmp_path(tmpdir, "none.safetensors"), &st), DDP_BAD_INPUT);
    CU_ASSERT(message_has("none.safetensors: cannot open: No such file"));
    CU_ASSERT_EQUAL(ddp_safetensors_open(tmpdir, &st), DDP_BAD_INPUT);
    CU_ASSERT(message_has("not a regular file"));

    const char *ok1 = "{" T("w", "F32", "[2]", 0, 8) "}";
    /* lengths */
    expect_corrupt(ok1, INT64_MAX, 8, "header length 9223372036854775807 is over the 100000000-byte limit");
    expect_corrupt(ok1, 100000001, 8, "is over the 100000000-byte limit");
    expect_corrupt(ok1, 5000, 8, "truncated: the header length says 5000 bytes, the file holds");
    expect_corrupt(ok1, 0, 8, "not a safetensors file: header length 0");
    expect_corrupt("[1,2,3]  ", -1, 0, "the header does not start with '{'");
    /* JSON */
    expect_corrupt("{\"w\" {}}", -1, 0, "malformed header: expected ':' at byte 5 of the header");
    expect_corrupt("{\"w\":{\"dtype\":\"F32\",}}", -1, 0, "malformed header: expected a string");
    expect_corrupt("{\"w\":{\"dtype\":\"F32", -1, 0, "unterminated string");
    expect_corrupt("{\"w\\q\":{}}", -1, 0, "bad escape in a string");
    expect_corrupt("{\"w\\ud800\":{}}", -1, 0, "unpaired surrogate");
    expect_corrupt("{\"w\\u0000\":{}}", -1, 0, "NUL character in a string");
    expect_corrupt("{\"w\xff\":{}}", -1, 0, "invalid UTF-8");
    expect_corrupt("{\"\xc0\xaf\":{}}", -1, 0, "invalid UTF-8");
    expect_corrupt("{\"w\t\":{}}", -1, 0, "control character");
    expect_corrupt("{" T("w", "F32", "[2]", 0, 8) ",}", -1, 8, "expected a string");
    expect_corrupt("{" T("w", "F32", "[2]", 0, 8), -1, 8, "expected ',' or '}'");
    expect_corrupt("{" T("w", "F32", "[2]", 0, 8) "}x", -1, 8, "unexpected text after the header's closing '}'");
    expect_corrupt("{" T("w", "F32", "[2]", 0, 8) "}{}", -1, 8, "unexpected text after");
    expect_corrupt("{\"w\":{\"x\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}}", -1, 0, "nesting too deep");
    expect_corrupt("{\"w\":{\"x\":01}}", -1, 0, "expected a value");
    expect_corrupt("{\"w\":{\"x\":1.e5}}", -1, 0, "bad number");
    expect_corrupt("{\"w\":{\"x\":tru}}", -1, 0, "expected a value");
    /* tensor entries */
    expect_corrupt("{\"w\":[]}", -1, 0, "expected '{' to open a tensor's entry");
    expect_corrupt("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, "tensor 'w' has no \"dtype\"");
    expect_corrupt("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", -1, 8, "tensor 'w' gives \"dtype\" twice");
    expect_corrupt("{" T("w", "F8_E4M3", "[2]", 0, 2) "}", -1, 2,
                   "tensor 'w' has dtype 'F8_E4M3', which ddpc does not support");
    expect_corrupt("{" T("w", "F32", "[-2]", 0, 8) "}", -1, 8, "expected a non-negative integer");
    expect_corrupt("{" T("w", "F32", "[2.0]", 0, 8) "}", -1, 8, "expected a non-negative integer");
    expect_corrupt("{" T("w", "F32", "[1,1,1,1,1,1,1,1,2]", 0, 8) "}", -1, 8, "more than 8 dimensions");
    expect_corrupt("{" T("w", "F32", "[99999999999999999999]", 0, 8) "}", -1, 8, "number too large");
    expect_corrupt("{" T("w", "F32", "[4611686018427387904,4]", 0, 8) "}", -1, 8, "has shape [4611686018427387904,4]: too many elements");
    expect_corrupt("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", -1, 8,
                   "more than 2 data_offsets");
    expect_corrupt("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", -1, 8,
                   "tensor 'w' has 1 data_offsets, expected 2");
    expect_corrupt("{\"__metadata__\":{\"epoch\":3}}", -1, 0, "__metadata__ entry 'epoch' is not a string");
    expect_corrupt("{\"__metadata__\":{},\"__metadata__\":{}}", -1, 0, "two __metadata__ entries");
    /* layout */
    expect_corrupt(ok1, -1, 4, "tensor 'w' has data_offsets [0,8], past the 4 bytes of data the file holds");
    expect_corrupt(ok1, -1, 12, "the tensors end at byte 8 of the data, but the file holds 12: trailing data");
    expect_corrupt("{" T("w", "F32", "[2]", 0, 12) "}", -1, 12,
                   "tensor 'w' of dtype F32 and shape [2] needs 8 bytes, its data_offsets [0,12] hold 12");
    expect_corrupt("{" T("w", "F32", "[2]", 8, 0) "}", -1, 8, "the end is before the begin");
    expect_corrupt("{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", -1, 12,
                   "tensor 'b' has data_offsets [4,12], but the tensors before it end at 8: data ranges must not overlap");
    expect_corrupt("{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 12, 20) "}", -1, 20,
                   "data ranges must not leave gaps");
    expect_corrupt("{" T("a", "F32", "[2]", 4, 12) "}", -1, 12, "but the tensors before it end at 0");
    expect_corrupt("{" T("a", "F32", "[2]", 0, 8) "," T("a", "F32", "[2]", 8, 16) "}", -1, 16,
                   "the header names tensor 'a' twice");
    /* escapes decode: a name spelled with \u escapes is found by its UTF-8 */
    const char *path = test_tmp_path(tmpdir, "bad.safetensors");
    f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    const char *json = "{\"caf\\u00e9 \\ud83d\\ude00\\n\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
                       "\"future\":{\"a\":[1,-2.5e-3,true,null,\"s\"]}},\"__metadata__\":null}  ";
    for (int b = 0; b < 8; b++)
        putc((int)(strlen(json) >> (8 * b) & 0xff), f);
    fputs(json, f);
    putc(42, f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_open(path, &st), DDP_OK);
    const DdpTensor *t = ddp_safetensors_find(st, "caf\xc3\xa9 \xf0\x9f\x98\x80\n");
    CU_ASSERT_PTR_NOT_NULL(t);
    if (t)
        CU_ASSERT_EQUAL(*(const unsigned char *)t->data, 42);
    ddp_safetensors_close(st);
    test_remove_tmpdir(tmpdir);
}

/* Every truncation of a good file, and every header byte replaced by a few
 * troublesome values: each must open cleanly or be refused, never crash. */
static void test_mutations(void)
{
    make_tmpdir();
    DdpTensor t[5];
    int n = fill_net(t);
    const char *good = test_tmp_path(tmpdir, "good.safetensors"), *bad = test_tmp_path(tmpdir, "mut.safetensors");
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(good, t, n, net_meta, 2), DDP_OK);
    size_t len;
    char *bytes = test_read_file(good, &len);
    CU_ASSERT_FATAL(bytes != NULL);
    size_t header = 8 + (size_t)(unsigned char)bytes[0] + 256 * (size_t)(unsigned char)bytes[1];
    int opened = 0, refused = 0, other = 0;
    static const unsigned char values[] = {0, '"', '\\', '{', '}', '[', ']', ',', ':', '9', ' ', 0x80, 0xff};
    for (size_t pos = 0; pos <= header; pos++)
        for (size_t v = 0; v <= sizeof values; v++) {
            FILE *f = fopen(bad, "wb");
            CU_ASSERT_FATAL(f != NULL);
            if (v == sizeof values) {
                fwrite(bytes, 1, pos, f);  /* truncated at pos */
            } else {
                char saved = bytes[pos];
                bytes[pos] = (char)values[v];
                fwrite(bytes, 1, len, f);
                bytes[pos] = saved;
            }
            fclose(f);
            DdpSafetensors *st;
            DdpStatus status = ddp_safetensors_open(bad, &st);
            opened += status == DDP_OK;
            refused += status == DDP_BAD_INPUT;
            other += status != DDP_OK && status != DDP_BAD_INPUT;
            if (status == DDP_OK)
                ddp_safetensors_close(st);
        }
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT(refused > 1000);
    CU_ASSERT(opened > 0);  /* e.g. a space replaced by a space */
    free(bytes);
    test_remove_tmpdir(tmpdir);
}

void suite_safetensors(void)
{
    static const TestCase cases[] = {
        {"round trip: F32, F64, I64 scalar, U8, empty; metadata", test_round_trip},
        {"the exact bytes written", test_exact_bytes},
        {"expect and check_unused name file, tensor, shapes", test_expect_messages},
        {"write failures leave no torn file", test_write_failures},
        {"interop with a spec-only Python reader and writer", test_python_interop},
        {"corrupt files are refused with a message", test_corrupt_corpus},
        {"every truncation and header mutation is handled", test_mutations},
        {NULL, NULL},
    };
    test_add_suite("safetensors [python]", cases);
}
