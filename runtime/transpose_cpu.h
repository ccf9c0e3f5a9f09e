/*
 * transpose_cpu.h: eight vectors of eight floats transposed in registers, for
 * the CPU ops' layouts: winograd_cpu.c's blocks of 8 channels per pixel, and
 * gemm_cpu.c's panels of a transposed operand. Shuffles move floats without
 * arithmetic, so no value changes.
 */
#ifndef DDPRT_TRANSPOSE_CPU_H
#define DDPRT_TRANSPOSE_CPU_H

typedef float DdpFloat8 __attribute__((vector_size(8 * sizeof(float))));
/* The same vector at any float's alignment: loads and stores of whole
 * vectors through it stay in the registers, where a memcpy from or into a
 * DdpFloat8 variable took some of them through the stack. */
typedef float DdpFloat8Mem __attribute__((vector_size(8 * sizeof(float)), aligned(sizeof(float))));

/* OUT[j][i] = IN[i][j]: IN[i] holds row i, OUT[j] column j. The usual three
 * rounds of two-vector shuffles (__builtin_shufflevector: clang, and GCC
 * from 12). */
static inline __attribute__((always_inline)) void ddp_transpose8(const DdpFloat8 in[8], DdpFloat8 out[8])
{
    DdpFloat8 t[8], u[8];
    for (int i = 0; i < 8; i += 2) { /* pairs: (a0 b0 a1 b1 | a4 b4 a5 b5), (a2 b2 a3 b3 | a6 b6 a7 b7) */
        t[i] = __builtin_shufflevector(in[i], in[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(in[i], in[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4) /* quads: four rows' element j, for j and j + 4 */
        for (int h = 0; h < 2; h++) {
            u[i + h * 2] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + h * 2 + 1] = __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int j = 0; j < 4; j++) { /* halves: all eight rows' element j */
        out[j] = __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        out[j + 4] = __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

#endif
