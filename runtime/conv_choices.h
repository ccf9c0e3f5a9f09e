/*
 * conv_choices.h: the convs' algorithms cuDNN's timings chose
 * (DDP_CUDNN_BENCHMARK=1), as one line of text that checkpoints keep and
 * rank 0 gives the other ranks.
 *
 * Timings of near-equal algorithms differ from one process to the next, so
 * two processes that each time them may choose otherwise and sum in another
 * order. So the choices a run times are taken by every rank (rank 0's) and
 * written into its checkpoints, and a run resumed from one takes them again
 * instead of timing: it then continues bit for bit as the heuristics' runs
 * do. They hold for one GPU model and one cuDNN version, which the text
 * names; ops_cuda.cu checks both, and each algorithm against the rules of
 * device_rules.h, before it takes them.
 *
 * The text: "cudnn=VERSION|device=NAME|workspace=BYTES|ID:A,A,A,F,F,F|...":
 * the shared workspace's size, and for each conv its three directions'
 * algorithms (forward, backward data, backward filter), then the three it
 * falls back on where a short batch's needs more workspace than there is
 * (ops_cuda.cu's conv_for_call): with those two the short batches take the
 * same algorithms too. Each is "ALGO.MATH.DETERMINISTIC": the cuDNN
 * algorithm's number, its math (a DdpConvMath), 1 if deterministic. Plain C
 * for both libraries, so that the CPU tests read and write it.
 */
#ifndef DDPRT_CONV_CHOICES_H
#define DDPRT_CONV_CHOICES_H

#include <stddef.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" { /* ops_cuda.cu reads and writes it too */
#endif

enum { DDP_CONV_DIRECTIONS = 3 };

/* The longest text kept, its NUL included: about 2,500 convs' (a longer
 * one is not kept, and a resumed run times its algorithms again). */
enum { DDP_CONV_CHOICES_TEXT = 1 << 16 };

/* One direction's algorithm. */
typedef struct {
    int algo;         /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, 0..DDP_CONV_ALGO_MOST */
    int math;         /* a DdpConvMath (device_rules.h) */
    int deterministic;
} DdpConvAlgo;

enum { DDP_CONV_ALGO_MOST = 63 };

typedef struct {
    int id;  /* the conv's id in the program (ddp_ops_plan_conv) */
    /* direction d's algorithm at d, the one it falls back on (needing no
     * workspace) at DDP_CONV_DIRECTIONS + d */
    DdpConvAlgo algo[2 * DDP_CONV_DIRECTIONS];
} DdpConvChoice;

typedef struct {
    long library;      /* cudnnGetVersion() */
    char device[256];  /* the GPU's name (ddp_conv_choices_set_device) */
    long long workspace; /* bytes */
    int n;
    DdpConvChoice *convs;  /* n, by id as they come; owned */
} DdpConvChoices;

/* NAME as C's device: '|', which separates the text's fields, made '/'. */
void ddp_conv_choices_set_device(DdpConvChoices *c, const char *name);

/* C's text into BUF (LEN bytes, "" if it does not fit); the length the text
 * needs, as snprintf. */
size_t ddp_conv_choices_text(const DdpConvChoices *c, char *buf, size_t len);

/* TEXT read into *OUT (convs allocated: ddp_conv_choices_free). DDP_BAD_INPUT,
 * naming what is wrong, for text that is not such a line. */
DdpStatus ddp_conv_choices_parse(const char *text, DdpConvChoices *out);

void ddp_conv_choices_free(DdpConvChoices *c);

#ifdef __cplusplus
}
#endif

#endif
