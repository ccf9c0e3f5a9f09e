/*
 * dirs.h: making the directories the program writes into (--save,
 * --tensorboard), as `mkdir -p` does. The callers word the message, since
 * each knows what the directory is for.
 */
#ifndef DDPRT_DIRS_H
#define DDPRT_DIRS_H

#include <stddef.h>

/* Makes DIR and every missing directory above it. 0 when DIR is then a
 * directory; else -1 with errno set (ENOTDIR when a part exists but is not a
 * directory) and FAILED (LEN bytes) holding the part that could not be made. */
int ddp_make_dirs(const char *dir, char *failed, size_t len);

#endif
