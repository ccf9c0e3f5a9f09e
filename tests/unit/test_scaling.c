/*
 * Tests of scaling on paper (scaling.c, `ddpc --emit plan --world N --link
 * GBPS`): its step, bucket by bucket, against figures worked out here by
 * hand from the model's definition (scaling.c's comment); the global batch's
 * share; and the command line's checks. The distributed suite holds its CPU
 * figures against measured runs (tests/distributed/scaling_on_paper.sh).
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddpc.h"
#include "planned_net.h"  // PlannedNet: a source through the front end and planner

/* SRC through the front end and planner; a net with errors ends the test. */
static void plan_source(PlannedNet *c, const char *src)
{
    bool ok = planned_net(c, src);
    if (!ok)
        planned_net_release(c);
    CU_ASSERT_FATAL(ok);
}

/* Within a relative 1e-12 of the figure worked out by hand. */
static void check_close(const char *what, double got, double want)
{
    bool ok = fabs(got - want) <= 1e-12 * fabs(want) + 1e-18;
    if (!ok)
        fprintf(stderr, "\n  %s: %.17g, by hand %.17g", what, got, want);
    CU_ASSERT(ok);
}

/* A model with round numbers: 1 GFLOP/s a rank, 1 GB/s links (8 Gb/s),
 * 10 us a hop, the CPU's wire (two doubles a gradient) and parts of 4 FLOPs. */
static ScalingModel round_model(void)
{
    return (ScalingModel){.link = {.gbit_per_s = 8, .hop_latency_s = 10e-6},
                          .tflops = 1e-3,
                          .bytes_per_gradient = 16,
                          .flops_per_exact_part = 4,
                          .target = "cpu"};
}

/* One linear layer on the data: its one bucket is ready as backward ends,
 * so its whole all-reduce is exposed. */
static void test_one_bucket_by_hand(void)
{
    PlannedNet c;
    plan_source(&c, "input 784\nlinear 784->10\nloss cross_entropy\ntrain { batch 100 }\n");
    ScalingModel m = round_model();
    ScalingStep p;
    CU_ASSERT_FATAL(scaling_predict(&c.arena, &c.net, &c.plan, &m, 4, &p));
    const double rate = 1e9, batch = 100;
    const double linear = 2.0 * 784 * 10 + 10;           /* its forward FLOPs a sample */
    const double loss = (double)c.net.total_flops - linear; /* the rest of the forward */
    check_close("forward", p.forward_s, (linear + loss) * batch / rate);
    /* its input is the data: the weight gradient only, and its parts */
    check_close("backward", p.backward_s, (linear + linear / 2 * 4 + loss) * batch / rate);
    /* the bias's 10 floats, 2 more to put the weight on 16 bytes, the weight */
    const double bytes = (10 + 2 + 784.0 * 10) * 16;
    const double ring = 2 * 3 * 10e-6 + 2.0 * 3 / 4 * bytes / 1e9; /* 6 hops; 3/2 of the bytes */
    CU_ASSERT_EQUAL(c.plan.n_buckets, 1);
    check_close("bucket bytes", p.buckets[0].bytes, bytes);
    check_close("the ring", p.buckets[0].allreduce_s, ring);
    check_close("the ring, as the plan's helper", scaling_ring_allreduce_s(&m.link, 4, bytes), ring);
    check_close("exposed", p.exposed_s, ring);
    check_close("step", p.step_s, p.forward_s + p.backward_s + ring);
    check_close("samples/s", p.samples_per_s, 4 * batch / p.step_s);
    /* one rank has no all-reduce */
    CU_ASSERT_FATAL(scaling_predict(&c.arena, &c.net, &c.plan, &m, 1, &p));
    CU_ASSERT_EQUAL(p.allreduce_s, 0);
    CU_ASSERT_EQUAL(p.exposed_s, 0);
    planned_net_release(&c);
}

/* Layers before the first trainable parameter have no backward, and that
 * layer computes no input gradient (plan.c's carries_grad), as the program
 * runs them: a relu on the data adds to forward, not to backward. */
static void test_no_backward_before_the_first_parameter(void)
{
    PlannedNet bare, relu_first;
    plan_source(&bare, "input 784\nlinear 784->10\nloss cross_entropy\ntrain { batch 100 }\n");
    plan_source(&relu_first, "input 784\nrelu\nlinear 784->10\nloss cross_entropy\ntrain { batch 100 }\n");
    ScalingModel m = round_model();
    ScalingStep a, b;
    CU_ASSERT_FATAL(scaling_predict(&bare.arena, &bare.net, &bare.plan, &m, 1, &a));
    CU_ASSERT_FATAL(scaling_predict(&relu_first.arena, &relu_first.net, &relu_first.plan, &m, 1, &b));
    check_close("backward", b.backward_s, a.backward_s);
    CU_ASSERT(b.forward_s > a.forward_s);
    planned_net_release(&bare);
    planned_net_release(&relu_first);
}

/* Two buckets: the last layer's, ready early, is all-reduced while the first
 * layer's backward runs, and only the second bucket's time is exposed; on a
 * link slow enough that the first is still going when backward ends, the
 * second waits for it, and more is exposed. */
static void test_overlap_by_hand(void)
{
    PlannedNet c;
    plan_source(&c, "input 784\nlinear 784->256 nobias\nrelu\nlinear 256->10\nloss cross_entropy\n"
                    "train {\n batch 10\n bucket 0.005MB\n}\n");
    CU_ASSERT_FATAL(c.plan.n_buckets == 2);
    const double rate = 1e9, batch = 10, world = 2;
    const double first = 2.0 * 784 * 256, relu = 256, last = 2.0 * 256 * 10 + 10;
    const double loss = (double)c.net.total_flops - first - relu - last;
    /* backward in reverse: the loss, the last linear (both gradients), relu, the first (weights only) */
    const double ready0 = (loss + 2 * last + last / 2 * 4) * batch / rate;
    const double backward = ready0 + (relu + first + first / 2 * 4) * batch / rate;
    /* the last layer's bias (10 floats, and 2 to put its weight on 16 bytes)
     * and weight; the first layer's weight, already on 16 bytes */
    const double bytes0 = (10 + 2 + 256.0 * 10) * 16, bytes1 = 784.0 * 256 * 16;
    for (int slow = 0; slow < 2; slow++) {
        ScalingModel m = round_model();
        if (slow)
            m.link.gbit_per_s = 8e-3; /* 1 MB/s: bucket 0 outlasts backward */
        const double bytes_per_s = m.link.gbit_per_s * 1e9 / 8;
        const double ring0 = 2 * 10e-6 + bytes0 / bytes_per_s, ring1 = 2 * 10e-6 + bytes1 / bytes_per_s;
        ScalingStep p;
        CU_ASSERT_FATAL(scaling_predict(&c.arena, &c.net, &c.plan, &m, 2, &p));
        check_close("bucket 0 ready", p.buckets[0].ready_s, ready0);
        check_close("bucket 1 ready", p.buckets[1].ready_s, backward);
        check_close("backward", p.backward_s, backward);
        const double start1 = slow ? ready0 + ring0 : backward;
        CU_ASSERT_EQUAL(slow, ready0 + ring0 > backward); /* the case is the one meant */
        check_close("bucket 1 start", p.buckets[1].start_s, start1);
        check_close("exposed", p.exposed_s, start1 + ring1 - backward);
        check_close("all-reduce", p.allreduce_s, ring0 + ring1);
        check_close("samples/s", p.samples_per_s, world * batch / (p.forward_s + backward + start1 + ring1 - backward));
    }
    planned_net_release(&c);
}

/* `batch N global`: each rank takes N / world, and a world that does not
 * divide N is refused. */
static void test_global_batch_shares(void)
{
    PlannedNet c;
    plan_source(&c, "input 784\nlinear 784->10\nloss cross_entropy\ntrain { batch 96 global }\n");
    ScalingModel m = round_model();
    ScalingStep one, four, five;
    CU_ASSERT_FATAL(scaling_predict(&c.arena, &c.net, &c.plan, &m, 1, &one));
    CU_ASSERT_FATAL(scaling_predict(&c.arena, &c.net, &c.plan, &m, 4, &four));
    CU_ASSERT_FALSE(scaling_predict(&c.arena, &c.net, &c.plan, &m, 5, &five));
    CU_ASSERT_EQUAL(one.batch, 96);
    CU_ASSERT_EQUAL(four.batch, 24);
    check_close("a quarter of the forward", four.forward_s, one.forward_s / 4);
    check_close("samples/s of the global batch", four.samples_per_s, 96 / four.step_s);
    planned_net_release(&c);
}

/* The command line: the table is printed, each bad value refused with 2. */
static void test_command_line(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/resnet.net --emit plan --target cuda --world 8,64 --link 400", test_ddpc()) >
                    0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "scaling on paper: a ring all-reduce over 400 Gb/s links"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "gradients of 4 bytes on the wire (--target cuda)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nworld 64, batch 64 a rank"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " world     step_ms  allreduce_ms  exposed_ms     samples/s  efficiency\n"));
    free(out);
    free(cmd);
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mlp.net --emit plan --world 65536 --link 400", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nworld 65536, batch"));
    free(out);
    free(cmd);
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"--emit plan --world 0 --link 400", "--world takes up to"},
        {"--emit plan --world 8,x --link 400", "--world takes up to"},
        {"--emit plan --world 8, --link 400", "--world takes up to"},
        {"--emit plan --world 99999999999999999999 --link 400", "--world takes up to"},
        /* the largest world a program runs (DDP_MAX_RANKS), the plan's largest too */
        {"--emit plan --world 8,65537 --link 400", "rank counts from 1 to 65536,"},
        {"--emit plan --world 8", "--world needs --link"},
        {"--emit plan --link 400", "go with --world"},
        {"--emit cu --world 8 --link 400", "go with --emit plan"},
        {"--world 8 --link 400", "go with --emit plan"},
        {"--emit plan --world 8 --link -1", "--link must be a number from 0.001 to 1e+06, not '-1'"},
        {"--emit plan --world 8 --link nan", "--link must be a number from 0.001 to 1e+06"},
        {"--emit plan --world 8 --link 1e-300", "--link must be a number from 0.001 to 1e+06"},
        {"--emit plan --world 8 --link 400 --tflops 0", "--tflops must be a number from 1e-06 to 1e+06"},
        {"--emit plan --world 8 --link 400 --tflops 1e-300", "--tflops must be a number from 1e-06 to 1e+06"},
        {"--emit plan --world 8 --link 400 --hop-us inf", "--hop-us must be a number from 0.001 to 1e+06"},
        /* read as the programs read their numbers (numbers.h): decimal, no blanks or '+' */
        {"--emit plan --world 8 --link 0x10", "--link must be a number from 0.001 to 1e+06, not '0x10'"},
        {"--emit plan --world 8 --link 400 --tflops ' 1'", "--tflops must be a number from 1e-06 to 1e+06"},
        {"--emit plan --world 0x8 --link 400", "--world takes up to"},
        {"--emit plan --world 8,+64 --link 400", "--world takes up to"},
        /* up to 16 counts, as README says */
        {"--emit plan --world 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17 --link 400", "--world takes up to 16 rank counts"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mlp.net %s", test_ddpc(), bad[i].args) > 0);
        int status = test_run(cmd, &out);
        bool ok = status == 2 && out && strstr(out, bad[i].says) && strstr(out, "ddpc: error: ");
        if (!ok)
            fprintf(stderr, "\n  ddpc %s: status %d, said: %s", bad[i].args, status, out ? out : "");
        CU_ASSERT(ok);
        free(out);
        free(cmd);
    }
}

void suite_scaling(void)
{
    static const TestCase cases[] = {
        {"one bucket: forward, backward, ring all-reduce and step as worked out by hand", test_one_bucket_by_hand},
        {"no backward before the first trainable parameter, as the program runs", test_no_backward_before_the_first_parameter},
        {"two buckets: the first hidden behind backward, or, on a slow link, delaying the second", test_overlap_by_hand},
        {"a global batch: each rank's share, and a world that does not divide it refused", test_global_batch_shares},
        {"--world, --link, --tflops, --hop-us: the table printed; each bad value refused with status 2",
         test_command_line},
        {NULL, NULL},
    };
    test_add_suite("scaling", cases);
}
