/*
 * torchvision's image transforms on uint8 pixels (runtime/image_resize.c):
 * cases worked out by hand (a two-pixel average, an upscale's weights, crop
 * offsets where Python's half-to-even round decides, zero padding), then
 * random images of several shapes against PIL itself, bit for bit: resize
 * with BILINEAR, Resize(size)'s shorter-side rule, CenterCrop and
 * convert("L"). The PIL checks are skipped, with a note, where Debian's
 * python3 lacks PIL or numpy (DDPC_PIL_PYTHON names another).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_resize.h"
#include "testutil.h"

/* Says where GOT first differs from WANT (n bytes of an image of h x w x c,
 * or c x h x w when CHW) and fails; nothing when they are the same. */
static void expect_pixels(const uint8_t *got, const uint8_t *want, size_t n, int h, int w, int c, int chw,
                          const char *what)
{
    size_t i = 0;
    while (i < n && got[i] == want[i])
        i++;
    if (i < n) {
        size_t pixel = chw ? i % ((size_t)h * w) : i / c;
        int ch = chw ? (int)(i / ((size_t)h * w)) : (int)(i % c);
        fprintf(stderr, "\n%s: first difference at row %zu, column %zu, channel %d: %d here, %d expected", what,
                pixel / w, pixel % w, ch, got[i], want[i]);
    }
    CU_ASSERT(i == n);
}

static void test_resize_by_hand(void)
{
    /* 2x1 -> 1x1: the tent stretched over both pixels weighs them alike;
     * the half of 10 + 21 = 31 rounds up */
    static const uint8_t pair[] = {10, 21};
    uint8_t out[16];
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize(pair, 1, 2, 1, out, 1, 1), DDP_OK);
    CU_ASSERT_EQUAL(out[0], 16);
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize(pair, 2, 1, 1, out, 1, 1), DDP_OK);
    CU_ASSERT_EQUAL(out[0], 16);

    /* 2 -> 4 along either side: centres at 0.25, 0.75, 1.25, 1.75 of the
     * input; the outer two see one pixel only (the other lies past the
     * edge), the inner two take 3/4 of the near pixel and 1/4 of the far */
    static const uint8_t two[] = {0, 100}, four[] = {0, 25, 75, 100};
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize(two, 1, 2, 1, out, 1, 4), DDP_OK);
    expect_pixels(out, four, 4, 1, 4, 1, 0, "1x2 -> 1x4");
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize(two, 2, 1, 1, out, 4, 1), DDP_OK);
    expect_pixels(out, four, 4, 4, 1, 1, 0, "2x1 -> 4x1");

    /* an unchanged size copies, channels and all */
    uint8_t image[3 * 4 * 3];
    for (int i = 0; i < (int)sizeof image; i++)
        image[i] = (uint8_t)(i * 37 + 5);
    uint8_t copy[sizeof image];
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize(image, 3, 4, 3, copy, 3, 4), DDP_OK);
    expect_pixels(copy, image, sizeof image, 3, 4, 3, 0, "3x4 -> 3x4");

    /* sizes out of range are refused, not resized */
    CU_ASSERT_EQUAL(ddp_image_resize(two, 1, 2, 1, out, 0, 4), DDP_FAIL);
    CU_ASSERT_EQUAL(ddp_image_resize(two, 1, 2, 1, out, 1, DDP_IMAGE_MOST_SIDE + 1), DDP_FAIL);
    CU_ASSERT_EQUAL(ddp_image_resize(two, 1, 2, 0, out, 1, 4), DDP_FAIL);
}

static void test_shorter_side_by_hand(void)
{
    int ow = 0, oh = 0;
    /* 37 wide, 23 high: the height becomes 16; int(16 * 37 / 23) = int(25.74) = 25 */
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize_shorter(37, 23, 16, &ow, &oh), DDP_OK);
    CU_ASSERT(ow == 25 && oh == 16);
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize_shorter(23, 37, 16, &ow, &oh), DDP_OK);
    CU_ASSERT(ow == 16 && oh == 25);
    /* ImageNet's 500 x 375 to 256: int(341.33) */
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize_shorter(500, 375, 256, &ow, &oh), DDP_OK);
    CU_ASSERT(ow == 341 && oh == 256);
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize_shorter(10, 10, 7, &ow, &oh), DDP_OK);
    CU_ASSERT(ow == 7 && oh == 7);
    /* already the size: unchanged */
    CU_ASSERT_EQUAL_FATAL(ddp_image_resize_shorter(40, 16, 16, &ow, &oh), DDP_OK);
    CU_ASSERT(ow == 40 && oh == 16);

    /* a long thin image stretched past the largest side allowed */
    ow = oh = -1;
    CU_ASSERT_EQUAL(ddp_image_resize_shorter(DDP_IMAGE_MOST_SIDE, 1, 2, &ow, &oh), DDP_BAD_INPUT);
    CU_ASSERT(ow == -1 && oh == -1); /* untouched: the caller says why */
    CU_ASSERT_EQUAL(ddp_image_resize_shorter(DDP_IMAGE_MOST_SIDE, 1, 1, &ow, &oh), DDP_OK);
    CU_ASSERT(ow == DDP_IMAGE_MOST_SIDE && oh == 1);
    CU_ASSERT_EQUAL(ddp_image_resize_shorter(4, 4, 0, &ow, &oh), DDP_BAD_INPUT);
}

static void test_center_crop_by_hand(void)
{
    /* 7 x 4, two channels: v = 10 y + x, and 100 more in the second */
    enum { H = 7, W = 4, C = 2 };
    uint8_t image[H * W * C], out[64];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int ch = 0; ch < C; ch++)
                image[(y * W + x) * C + ch] = (uint8_t)(10 * y + x + 100 * ch);

    /* 2 x 1: round(5 / 2) = round(2.5) = 2 and round(3 / 2) = round(1.5) = 2,
     * both to the even neighbour */
    static const uint8_t even[] = {22, 32, 122, 132};
    ddp_image_center_crop_chw(image, H, W, C, out, 2, 1);
    expect_pixels(out, even, sizeof even, 2, 1, C, 1, "7x4 cropped to 2x1");
    /* 4 x 1: round(3 / 2) = 2 down, round(3 / 2) = 2 across */
    static const uint8_t down[] = {22, 32, 42, 52, 122, 132, 142, 152};
    ddp_image_center_crop_chw(image, H, W, C, out, 4, 1);
    expect_pixels(out, down, sizeof down, 4, 1, C, 1, "7x4 cropped to 4x1");
    /* 2 x 2: round(5 / 2) = 2 down, round(2 / 2) = 1 across */
    static const uint8_t square[] = {21, 22, 31, 32, 121, 122, 131, 132};
    ddp_image_center_crop_chw(image, H, W, C, out, 2, 2);
    expect_pixels(out, square, sizeof square, 2, 2, C, 1, "7x4 cropped to 2x2");

    /* larger than the image: 7 rows padded 1 above and 1 below to 9 (then
     * the crop starts at 0), 4 columns cropped to 2 from round(1) = 1 */
    static const uint8_t tall[] = {
        0,  0,  1,  2,  11, 12, 21, 22, 31, 32, 41, 42, 51, 52, 61, 62, 0, 0, /* first channel */
        0,  0,  101, 102, 111, 112, 121, 122, 131, 132, 141, 142, 151, 152, 161, 162, 0, 0,
    };
    ddp_image_center_crop_chw(image, H, W, C, out, 9, 2);
    expect_pixels(out, tall, sizeof tall, 9, 2, C, 1, "7x4 cropped to 9x2");
    /* 2 x 2 in 5 x 4: pad (5 - 2) // 2 = 1 above and 2 below, 1 each side */
    static const uint8_t small[] = {1, 2, 3, 4};
    static const uint8_t padded[] = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    ddp_image_center_crop_chw(small, 2, 2, 1, out, 5, 4);
    expect_pixels(out, padded, sizeof padded, 5, 4, 1, 1, "2x2 cropped to 5x4");

    /* the image's own size: the transpose to channels first */
    uint8_t chw[H * W * C];
    for (int ch = 0; ch < C; ch++)
        for (int i = 0; i < H * W; i++)
            chw[ch * H * W + i] = image[i * C + ch];
    ddp_image_center_crop_chw(image, H, W, C, out, H, W);
    expect_pixels(out, chw, sizeof chw, H, W, C, 1, "7x4 cropped to 7x4");
}

static void test_luma_by_hand(void)
{
    CU_ASSERT_EQUAL(ddp_image_rgb_to_l(255, 255, 255), 255);
    CU_ASSERT_EQUAL(ddp_image_rgb_to_l(0, 0, 0), 0);
    CU_ASSERT_EQUAL(ddp_image_rgb_to_l(1, 0, 0), 0); /* 19595 + 32768 < 65536 */
    CU_ASSERT_EQUAL(ddp_image_rgb_to_l(0, 1, 0), 1); /* 38470 + 32768 >= 65536 */
    CU_ASSERT_EQUAL(ddp_image_rgb_to_l(255, 0, 0), 76);
    CU_ASSERT_EQUAL(ddp_image_rgb_to_l(10, 20, 30), 18);
}

/* ---- against PIL ----------------------------------------------------------- */

/* What the python does with each case: the image's own file, PIL's resize
 * to (out_h, out_w), torchvision's Resize(size) and CenterCrop((crop_h,
 * crop_w)), each reimplemented from torchvision's source with PIL's own
 * calls (torchvision itself need not be installed), and convert("L"). */
static const char py_reference[] =
    "import sys\n"
    "import numpy as np\n"
    "from PIL import Image, ImageOps\n"
    "BILINEAR = getattr(Image, 'Resampling', Image).BILINEAR\n"
    "d = sys.argv[1]\n"
    "\n"
    "def load(n, h, w, c):\n"
    "    a = np.fromfile(f'{d}/in_{n}.bin', dtype=np.uint8)\n"
    "    return Image.fromarray(a.reshape((h, w) if c == 1 else (h, w, c)))\n"
    "\n"
    "def save(img, name, chw=False):\n"
    "    a = np.asarray(img)\n"
    "    if chw and a.ndim == 3:\n"
    "        a = a.transpose(2, 0, 1)\n"
    "    np.ascontiguousarray(a).tofile(f'{d}/{name}')\n"
    "\n"
    "# torchvision's Resize(size) of a PIL image: functional.resize with\n"
    "# _compute_resized_output_size for one int, the image itself when that is\n"
    "# its size already, else _functional_pil.resize, which is PIL's resize\n"
    "def resize_shorter(img, size):\n"
    "    w, h = img.size\n"
    "    short, long = (w, h) if w <= h else (h, w)\n"
    "    new_short, new_long = size, int(size * long / short)\n"
    "    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)\n"
    "    if [h, w] == [new_h, new_w]:\n"
    "        return img\n"
    "    return img.resize((new_w, new_h), BILINEAR)\n"
    "\n"
    "# torchvision's CenterCrop((crop_h, crop_w)) of a PIL image:\n"
    "# functional.center_crop, padding with _functional_pil.pad (constant 0 is\n"
    "# ImageOps.expand) and cropping with _functional_pil.crop (Image.crop)\n"
    "def center_crop(img, crop_h, crop_w):\n"
    "    w, h = img.size\n"
    "    if crop_w > w or crop_h > h:\n"
    "        ltrb = ((crop_w - w) // 2 if crop_w > w else 0, (crop_h - h) // 2 if crop_h > h else 0,\n"
    "                (crop_w - w + 1) // 2 if crop_w > w else 0, (crop_h - h + 1) // 2 if crop_h > h else 0)\n"
    "        img = ImageOps.expand(img, border=ltrb, fill=0 if img.mode == 'L' else (0,) * len(img.getbands()))\n"
    "        w, h = img.size\n"
    "        if crop_w == w and crop_h == h:\n"
    "            return img\n"
    "    top = int(round((h - crop_h) / 2.0))\n"
    "    left = int(round((w - crop_w) / 2.0))\n"
    "    return img.crop((left, top, left + crop_w, top + crop_h))\n"
    "\n"
    "with open(f'{d}/sizes.txt', 'w') as sizes:\n"
    "    for line in open(f'{d}/cases.txt'):\n"
    "        n, h, w, c, out_h, out_w, size, crop_h, crop_w = map(int, line.split())\n"
    "        img = load(n, h, w, c)\n"
    "        save(img.resize((out_w, out_h), BILINEAR), f'resize_{n}.bin')\n"
    "        r = resize_shorter(img, size)\n"
    "        sizes.write(f'{n} {r.size[1]} {r.size[0]}\\n')\n"
    "        save(r, f'shorter_{n}.bin')\n"
    "        save(center_crop(img, crop_h, crop_w), f'crop_{n}.bin', chw=True)\n"
    "        if c == 3:\n"
    "            save(img.convert('L'), f'l_{n}.bin')\n";

typedef struct {
    int h, w, c, out_h, out_w, size, crop_h, crop_w;
    enum { RANDOM, WHITE, CHECKER } fill;
} PilCase;

static const PilCase pil_cases[] = {
    {23, 37, 3, 11, 16, 16, 10, 21, RANDOM},  /* down by non-integer factors */
    {23, 37, 1, 11, 16, 16, 10, 21, RANDOM},
    {150, 200, 3, 5, 7, 7, 149, 200, RANDOM}, /* reduced 30-fold */
    {3, 5, 1, 12, 17, 12, 4, 8, RANDOM},      /* up; the crop pads both sides */
    {3, 5, 3, 12, 17, 12, 2, 9, RANDOM},
    {20, 30, 3, 20, 13, 20, 25, 13, RANDOM},  /* the height kept: one pass */
    {20, 30, 1, 9, 30, 9, 20, 30, RANDOM},    /* the width kept */
    {64, 48, 3, 100, 33, 33, 61, 47, RANDOM}, /* up one way, down the other */
    {1, 1, 3, 4, 3, 2, 3, 2, RANDOM},
    {17, 9, 1, 17, 9, 9, 17, 9, RANDOM},      /* unchanged throughout */
    {40, 40, 3, 13, 7, 13, 13, 7, WHITE},     /* flat white stays 255 at the top of the range */
    {31, 29, 1, 10, 13, 10, 30, 28, CHECKER}, /* 0 and 255 side by side */
    {375, 500, 3, 256, 341, 256, 224, 224, RANDOM}, /* ImageNet's Resize(256), CenterCrop(224) */
};
enum { N_PIL_CASES = sizeof pil_cases / sizeof pil_cases[0] };

static uint32_t rng_state = 2463534242u;

static uint8_t next_byte(void)
{
    rng_state ^= rng_state << 13; /* xorshift32 */
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return (uint8_t)(rng_state >> 24);
}

static uint8_t *make_image(const PilCase *k)
{
    size_t n = (size_t)k->h * k->w * k->c;
    uint8_t *p = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (size_t i = 0; i < n; i++) {
        size_t pixel = i / k->c;
        p[i] = k->fill == WHITE ? 255 : k->fill == CHECKER ? ((pixel / k->w + pixel % k->w) & 1) * 255 : next_byte();
    }
    return p;
}

static void write_bytes(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* PIL's N bytes in DIR/NAME; NULL (failed) when the file is missing or of
 * another length. */
static uint8_t *pil_bytes(const char *dir, const char *name, size_t n)
{
    size_t len = 0;
    uint8_t *p = (uint8_t *)test_read_file(test_tmp_path(dir, name), &len);
    if (!p || len != n) {
        fprintf(stderr, "\n%s: %zu bytes from PIL, %zu expected", name, p ? len : 0, n);
        CU_FAIL("PIL's output is not the size expected");
        free(p);
        return NULL;
    }
    return p;
}

/* The pixels here against PIL's, in file NAME (c x h x w when CHW). */
static void expect_pil(const char *dir, const char *name, const uint8_t *got, int h, int w, int c, int chw,
                       const char *what)
{
    size_t n = (size_t)h * w * c;
    uint8_t *want = pil_bytes(dir, name, n);
    if (want)
        expect_pixels(got, want, n, h, w, c, chw, what);
    free(want);
}

static void test_against_pil(void)
{
    const char *py = test_python_with("DDPC_PIL_PYTHON", "/usr/bin/python3", "PIL, numpy");
    if (!py) {
        fprintf(stderr, "\n(skipped: no python3 with PIL and numpy; DDPC_PIL_PYTHON names one)");
        return;
    }
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_image_XXXXXX");
    uint8_t *images[N_PIL_CASES];
    FILE *cases = fopen(test_tmp_path(dir, "cases.txt"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cases);
    for (int i = 0; i < N_PIL_CASES; i++) {
        const PilCase *k = &pil_cases[i];
        char name[32];
        images[i] = make_image(k);
        snprintf(name, sizeof name, "in_%d.bin", i);
        write_bytes(test_tmp_path(dir, name), images[i], (size_t)k->h * k->w * k->c);
        fprintf(cases, "%d %d %d %d %d %d %d %d %d\n", i, k->h, k->w, k->c, k->out_h, k->out_w, k->size, k->crop_h,
                k->crop_w);
    }
    fclose(cases);
    write_bytes(test_tmp_path(dir, "reference.py"), (const uint8_t *)py_reference, sizeof py_reference - 1);

    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", py, test_tmp_path(dir, "reference.py"), dir);
    int rc = test_run(cmd, &out);
    if (rc != 0)
        fprintf(stderr, "\n$ %s\nexit %d:\n%s", cmd, rc, out ? out : "");
    free(out);
    CU_ASSERT_EQUAL(rc, 0);

    FILE *sizes = rc == 0 ? fopen(test_tmp_path(dir, "sizes.txt"), "r") : NULL;
    CU_ASSERT(rc != 0 || sizes != NULL);
    for (int i = 0; i < N_PIL_CASES && sizes; i++) {
        const PilCase *k = &pil_cases[i];
        char name[32], what[128];
        int case_no = -1, pil_h = 0, pil_w = 0, oh = 0, ow = 0;
        CU_ASSERT_EQUAL_FATAL(ddp_image_resize_shorter(k->w, k->h, k->size, &ow, &oh), DDP_OK);
        size_t most = (size_t)k->h * k->w, areas[] = {(size_t)k->out_h * k->out_w, (size_t)oh * ow,
                                                      (size_t)k->crop_h * k->crop_w};
        for (int a = 0; a < 3; a++)
            most = areas[a] > most ? areas[a] : most;
        uint8_t *got = malloc(most * k->c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got);

        snprintf(what, sizeof what, "case %d: %dx%dx%d resized to %dx%d", i, k->h, k->w, k->c, k->out_h, k->out_w);
        CU_ASSERT_EQUAL(ddp_image_resize(images[i], k->h, k->w, k->c, got, k->out_h, k->out_w), DDP_OK);
        snprintf(name, sizeof name, "resize_%d.bin", i);
        expect_pil(dir, name, got, k->out_h, k->out_w, k->c, 0, what);

        CU_ASSERT(fscanf(sizes, "%d %d %d", &case_no, &pil_h, &pil_w) == 3 && case_no == i);
        if (oh != pil_h || ow != pil_w)
            fprintf(stderr, "\ncase %d: Resize(%d) of %dx%d gives %dx%d here, %dx%d in torchvision", i, k->size, k->h,
                    k->w, oh, ow, pil_h, pil_w);
        CU_ASSERT(oh == pil_h && ow == pil_w);
        snprintf(what, sizeof what, "case %d: %dx%dx%d, Resize(%d)", i, k->h, k->w, k->c, k->size);
        CU_ASSERT_EQUAL(ddp_image_resize(images[i], k->h, k->w, k->c, got, oh, ow), DDP_OK);
        snprintf(name, sizeof name, "shorter_%d.bin", i);
        expect_pil(dir, name, got, oh, ow, k->c, 0, what);

        snprintf(what, sizeof what, "case %d: %dx%dx%d, CenterCrop(%d, %d)", i, k->h, k->w, k->c, k->crop_h, k->crop_w);
        ddp_image_center_crop_chw(images[i], k->h, k->w, k->c, got, k->crop_h, k->crop_w);
        snprintf(name, sizeof name, "crop_%d.bin", i);
        expect_pil(dir, name, got, k->crop_h, k->crop_w, k->c, 1, what);

        if (k->c == 3) {
            snprintf(what, sizeof what, "case %d: %dx%d, convert(\"L\")", i, k->h, k->w);
            for (size_t p = 0; p < (size_t)k->h * k->w; p++)
                got[p] = ddp_image_rgb_to_l(images[i][3 * p], images[i][3 * p + 1], images[i][3 * p + 2]);
            snprintf(name, sizeof name, "l_%d.bin", i);
            expect_pil(dir, name, got, k->h, k->w, 1, 0, what);
        }
        free(got);
    }
    if (sizes)
        fclose(sizes);
    for (int i = 0; i < N_PIL_CASES; i++)
        free(images[i]);
    test_remove_tmpdir(dir);
}

void suite_image_resize(void)
{
    static const TestCase cases[] = {
        {"resize: an average, an upscale's weights, a copy", test_resize_by_hand},
        {"Resize(size): the shorter side's rule", test_shorter_side_by_hand},
        {"center crop: half-to-even offsets, zero padding, CHW", test_center_crop_by_hand},
        {"RGB -> L as PIL's convert", test_luma_by_hand},
        {"resize, Resize(size), CenterCrop, convert(\"L\") against PIL [python]", test_against_pil},
        {NULL, NULL},
    };
    test_add_suite("image_resize", cases);
}
