/*
 * tensorboard.h: --tensorboard DIR, scalars in an event file that
 * `tensorboard --logdir DIR` reads (TFRecord framing, Event protos).
 */
#ifndef DDPRT_TENSORBOARD_H
#define DDPRT_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"  // DdpStatus

/* Longest tag accepted, in bytes; a longer one is DDP_BAD_INPUT. */
#define DDP_TENSORBOARD_MAX_TAG 1024

typedef struct DdpTensorboard DdpTensorboard;

/* Whether ddp_tensorboard_open could make DIR (as mkdir -p) and write in
 * it, without making anything: for start-up on every rank, before the
 * ranks meet, though rank 0 alone opens it. DDP_BAD_INPUT, naming DIR and
 * the part at fault, as ddp_tensorboard_open's. */
DdpStatus ddp_tensorboard_check(const char *dir);

/* Creates DIR if missing (with its parents, as mkdir -p), opens a new
 * DIR/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n> in it (pid and
 * n zero-padded: names sort as made) and writes
 * the file_version event that starts every event file. DDP_BAD_INPUT, naming
 * DIR, when the directory or the file cannot be created. */
DdpStatus ddp_tensorboard_open(const char *dir, DdpTensorboard **out);

/* Appends one scalar event {wall_time, STEP, TAG = VALUE} (stored as a float,
 * as TensorBoard's simple_value is) and flushes it, so a killed run keeps
 * every scalar written before. TB NULL is a no-op (DDP_OK), so a trainer can
 * call it whether or not --tensorboard was given. Bytes of TAG that are not
 * UTF-8 become U+FFFD (protobuf strings must be UTF-8); a NULL, empty or
 * over-long TAG is DDP_BAD_INPUT. Steps should grow: TensorBoard keeps a
 * step written twice twice, unless a START (ddp_tensorboard_resumed) came
 * between. */
DdpStatus ddp_tensorboard_scalar(DdpTensorboard *tb, const char *tag, int64_t step, double value);

/* For a run resumed after step STEP: a SessionLog START event at STEP + 1,
 * on which TensorBoard drops the points from STEP + 1 on that it read from
 * the directory's earlier files (those a crashed run made past the
 * checkpoint, which the resumed run makes again), as PyTorch's
 * SummaryWriter(purge_step=STEP + 1) has it. TB NULL is a no-op. */
DdpStatus ddp_tensorboard_resumed(DdpTensorboard *tb, int64_t step);

/* Flushes, syncs and closes the file and frees TB (NULL is fine); DDP_FAIL if
 * anything written could not reach the disk. */
DdpStatus ddp_tensorboard_close(DdpTensorboard *tb);

/* The event file's path (for a "writing TensorBoard events to ..." line). */
const char *ddp_tensorboard_path(const DdpTensorboard *tb);

/* CRC-32C (Castagnoli) of DATA[0..len), the checksum TFRecord framing uses. */
uint32_t ddp_crc32c(const void *data, size_t len);

#endif
