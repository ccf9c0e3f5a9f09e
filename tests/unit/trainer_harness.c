/*
 * trainer_harness.c: what the end-to-end tests of the trainer share (see
 * trainer_harness.h).
 */
#include "trainer_harness.h"

#include <limits.h>  // PATH_MAX
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"  // comparing weights files
#include "testutil.h"     // test_child_output

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

void harness_write_file(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(bytes, 1, len, f) == len);
    fclose(f);
}

/* One IDX pair in DIR: N images of ROWS x COLS whose label is i % 10, each
 * noise plus bright rows where (row / 2) % 10 is the label: learnable by a
 * linear model, not trivially. */
void harness_write_set(const char *dir, const char *prefix, int n, int rows, int cols, uint32_t seed)
{
    size_t pixels = (size_t)rows * (size_t)cols;
    unsigned char *img = malloc(16 + (size_t)n * pixels), *lab = malloc(8 + (size_t)n);
    CU_ASSERT_FATAL(img && lab);
    put_be32(img, 0x803);
    put_be32(img + 4, (uint32_t)n);
    put_be32(img + 8, (uint32_t)rows);
    put_be32(img + 12, (uint32_t)cols);
    put_be32(lab, 0x801);
    put_be32(lab + 4, (uint32_t)n);
    uint32_t r = seed;
    for (int i = 0; i < n; i++) {
        int label = i % 10;
        lab[8 + i] = (unsigned char)label;
        for (int y = 0; y < rows; y++)
            for (int x = 0; x < cols; x++) {
                r = r * 1664525u + 1013904223u;
                unsigned v = (r >> 24) % 96;
                if ((y / 2) % 10 == label)
                    v += 140;
                img[16 + (size_t)i * pixels + (size_t)y * cols + x] = (unsigned char)v;
            }
    }
    char path[256];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    harness_write_file(path, img, 16 + (size_t)n * pixels);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    harness_write_file(path, lab, 8 + (size_t)n);
    free(img);
    free(lab);
}

static pid_t start(const DdpNet *net, int *fd, const char *fmt, va_list ap)
{
    char args[4 * PATH_MAX]; /* a path as long as paths go, and more flags */
    if (vsnprintf(args, sizeof args, fmt, ap) >= (int)sizeof args) {
        fprintf(stderr, "trainer_harness: the arguments are longer than %zu bytes\n", sizeof args);
        abort();
    }
    char *argv[64] = {"/some/dir/tiny_train"};
    int argc = test_split_args(args, argv, 1, 64);
    pid_t pid = test_fork_capturing(fd);
    if (pid == 0) {
        int rc = ddp_main(argc, argv, net);
        fflush(NULL);
        _exit(rc);
    }
    return pid;
}

pid_t harness_start(const DdpNet *net, int *fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pid_t pid = start(net, fd, fmt, ap);
    va_end(ap);
    return pid;
}

int harness_run(const DdpNet *net, char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int fd;
    pid_t pid = start(net, &fd, fmt, ap);
    va_end(ap);
    return test_child_output(pid, fd, out);
}

/* 1 when TEXT holds WHAT; says what it got otherwise. */
int harness_has(const char *text, const char *what)
{
    if (text && strstr(text, what))
        return 1;
    fprintf(stderr, "\noutput lacks \"%s\":\n%s\n", what, text ? text : "(null)");
    return 0;
}

/* 1 when the safetensors files A and B hold the same tensors, bit for bit. */
int harness_same_tensors(const char *a, const char *b)
{
    DdpSafetensors *fa = NULL, *fb = NULL;
    int same = ddp_safetensors_open(a, &fa) == DDP_OK && ddp_safetensors_open(b, &fb) == DDP_OK &&
               ddp_safetensors_count(fa) == ddp_safetensors_count(fb);
    for (int i = 0; same && i < ddp_safetensors_count(fa); i++) {
        const DdpTensor *ta = ddp_safetensors_tensor(fa, i);
        const DdpTensor *tb = ddp_safetensors_find(fb, ta->name);
        same = tb && tb->dtype == ta->dtype && tb->nbytes == ta->nbytes &&
               memcmp(ta->data, tb->data, ta->nbytes) == 0;
        if (!same)
            fprintf(stderr, "\n%s and %s differ in '%s'", a, b, ta->name);
    }
    if (fa)
        ddp_safetensors_close(fa);
    if (fb)
        ddp_safetensors_close(fb);
    return same;
}

