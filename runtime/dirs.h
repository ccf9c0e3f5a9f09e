/*
 * dirs.h: the paths the program writes: the directories (--save,
 * --tensorboard), made as `mkdir -p` does, and the one rule for every output
 * file (--export, checkpoints, --log): what may be written, and how a file
 * is replaced without ever being torn.
 */
#ifndef DDPRT_DIRS_H
#define DDPRT_DIRS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>  // mode_t

#include "status.h"  // DdpStatus

/* Makes DIR and every missing directory above it. 0 when DIR is then a
 * directory, 1 when this call made DIR itself (its last part: mkdir
 * succeeded, so no other process did); else -1 with errno set (ENOTDIR when
 * a part exists but is not a directory) and FAILED (LEN bytes) holding the
 * part that could not be made. The callers word the message, since each
 * knows what the directory is for. */
int ddp_make_dirs(const char *dir, char *failed, size_t len);

/* Whether PATH may be written as an output file, and where: PATH names a
 * regular file (to be replaced) or nothing yet (to be created), possibly
 * through symbolic links, which are followed: *TARGET (malloc'd) is then the
 * file they lead to, so the link stays and its target is written, as a shell's
 * `>` would. A directory, a device, a FIFO or a socket is refused, and so is a
 * path under a regular file ("not a directory"): DDP_BAD_INPUT, the message
 * starting "--FLAG PATH: " (or "PATH: " when FLAG is NULL) and saying what
 * the path is. Whether the directory can take a new file is not checked here. */
DdpStatus ddp_output_target(const char *flag, const char *path, char **target);
/* The same, with messages starting WHO (ddpc's "-o OUT") instead of "--FLAG PATH". */
DdpStatus ddp_output_resolve(const char *who, const char *path, char **target);

/* ddp_output_target, and the directory that would hold the file must let us
 * create it: for start-up, so that a mistyped path fails before training. */
DdpStatus ddp_output_check(const char *flag, const char *path);

/* The process's umask, read without changing it (Linux's /proc/self/status):
 * umask(2) can only set it, and setting it back leaves a moment in which
 * another thread's new files get mode 0666. */
mode_t ddp_umask(void);

/* Refuses (DDP_BAD_INPUT) two of the N outputs PATHS[i], given as
 * --FLAGS[i] (NULL paths skipped), that would write one file, so that
 * neither is lost to the other (--log and --export alike), and any whose
 * file would lie in SAVE_DIR (NULL: none) under a name starting RESERVED,
 * the names kept for that directory's writer (checkpoints, which it
 * writes, replaces and prunes, their temporary files and its lock).
 * Files are compared where they would be written (links followed, as
 * ddp_output_target does), by directory and name. What replaces no file, "-"
 * or a pipe or terminal there, is not compared; a path the outputs' own
 * checks refuse is left to them. N is at most 8. */
DdpStatus ddp_outputs_apart(const char *const *flags, const char *const *paths, int n, const char *save_dir,
                            const char *reserved);

/* Whether PATH may take an output written in place, as a log is (appended
 * to, read while it grows): anything that is not a directory or a block
 * device, so also a pipe or a terminal (--log /dev/stderr), since nothing is
 * replaced; or nothing yet, in a directory that lets us create it. Links are
 * followed. DDP_BAD_INPUT otherwise, the message as ddp_output_target's. */
DdpStatus ddp_output_in_place_check(const char *flag, const char *path);

/* What an output's temporary name adds to the target's: TARGET.tmp-XXXXXX,
 * six characters of mkostemp's, so each writer has its own. */
#define DDP_OUTPUT_TMP ".tmp-"

/* A file being written in place of another: data goes to TMP (the target's
 * name plus DDP_OUTPUT_TMP and a unique suffix, in the same directory) and
 * replaces TARGET on commit. */
typedef struct {
    FILE *f;
    char *target;
    char *tmp;
    int write_errno; /* the first failed ddp_output_write's errno, which commit names (the stream keeps none) */
} DdpOutput;

/* Checks PATH as ddp_output_target does and creates its temporary file, of a
 * name no other writer has (one a crash left behind is the pruner's business,
 * checkpoint.c). */
DdpStatus ddp_output_open(const char *flag, const char *path, DdpOutput *out);

/* Writes LEN bytes of DATA to OUT's temporary file; 0 on failure, this
 * write's or an earlier one's, whose reason (a full disk, say)
 * ddp_output_commit then reports. */
int ddp_output_write(DdpOutput *out, const void *data, size_t len);

/* Flushes and syncs the temporary file, renames it over the target and syncs
 * the directory, so a crash leaves the old file or the new, never a torn one.
 * On failure the temporary file is removed; a failed sync of the directory
 * fails too, the file then in place but not yet sure to outlive a crash.
 * Frees OUT's resources either way. */
DdpStatus ddp_output_commit(DdpOutput *out);

/* Gives up: closes and removes the temporary file; the target is untouched. */
void ddp_output_abort(DdpOutput *out);

#endif
