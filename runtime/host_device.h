/*
 * host_device.h: DDP_HOST_DEVICE marks a small inline function that both the
 * host and GPU kernels call (a dropout mask, an augmentation draw, how a
 * per-channel sum is split): __host__ __device__ under nvcc, nothing under a
 * host compiler.
 */
#ifndef DDPRT_HOST_DEVICE_H
#define DDPRT_HOST_DEVICE_H

#ifdef __CUDACC__
#define DDP_HOST_DEVICE __host__ __device__
#else
#define DDP_HOST_DEVICE
#endif

#endif
