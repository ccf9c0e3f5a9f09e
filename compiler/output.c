/*
 * output.c: the files ddpc writes (OUT.cu, OUT), and which paths it may write.
 *
 * The rule is the generated program's (runtime/dirs.c, which ddpc links): an
 * output must name a regular file or nothing; symbolic links are followed,
 * so a link's target is
 * replaced and the link stays, as a shell's `>` would do; a directory, a
 * device, a FIFO or a socket is refused, and so is a path under a regular
 * file. ddpc adds its own: an output may not be one of the build's inputs,
 * compared by device and inode, so that ./x.net, x.net and a link to it
 * are all the same file.
 *
 * Every output is written to a fresh temporary name in its own directory and
 * renamed over the target: a reader (or a second ddpc writing the same -o)
 * sees the old file or a whole new one, never a mix of the two.
 */
#include "ddpc.h"
#include "dirs.h"    // ddp_output_resolve (which paths an output may be), ddp_umask
#include "status.h"  // ddp_error_message

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directory part of PATH ("." when none), in A. */
static char *dir_of(Arena *a, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return arena_strndup(a, ".", 1);
    return arena_strndup(a, path, slash == path ? 1 : (size_t)(slash - path));
}

char *output_target(Arena *a, const char *who, const char *path)
{
    char *target = NULL;
    if (ddp_output_resolve(who, path, &target) != DDP_OK) {
        fprintf(stderr, "ddpc: error: %s\n", ddp_error_message());
        return NULL;
    }
    char *copy = arena_strndup(a, target, strlen(target));
    free(target);
    return copy;
}

bool output_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* A fresh, unique name beside PATH (PATH.tmp-XXXXXX, the runtime's form,
 * dirs.h's DDP_OUTPUT_TMP; for a source X.cu,
 * X.tmp-XXXXXX.cu, since nvcc goes by the extension), created empty with
 * mode 0600; NULL (reported) when the directory cannot take it. */
static char *reserve(Arena *a, const char *path, int *fd)
{
    size_t len = strlen(path);
    bool source = len > 3 && strcmp(path + len - 3, ".cu") == 0;
    char *tmp = source ? arena_printf(a, "%.*s" DDP_OUTPUT_TMP "XXXXXX.cu", (int)(len - 3), path)
                       : arena_printf(a, "%s" DDP_OUTPUT_TMP "XXXXXX", path);
    *fd = mkostemps(tmp, source ? 3 : 0, O_CLOEXEC);
    if (*fd < 0 && errno == ENAMETOOLONG) /* PATH itself passed: the added characters are what is too long */
        fprintf(stderr, "ddpc: error: cannot write '%s': the temporary name it is written under first (its name with "
                        DDP_OUTPUT_TMP "XXXXXX added) is too long: %s; choose a shorter name\n", path, strerror(errno));
    else if (*fd < 0)
        fprintf(stderr, "ddpc: error: cannot write into %s: %s\n", dir_of(a, path), strerror(errno));
    if (*fd < 0)
        return NULL;
    return tmp;
}

char *output_temp_name(Arena *a, const char *path)
{
    int fd;
    char *tmp = reserve(a, path, &fd);
    if (!tmp)
        return NULL;
    /* the compiler makes the file itself, with the mode a program should have */
    close(fd);
    unlink(tmp);
    return tmp;
}

FILE *output_open(Arena *a, const char *path, char **tmp)
{
    int fd;
    *tmp = reserve(a, path, &fd);
    if (!*tmp)
        return NULL;
    FILE *f = fchmod(fd, 0666 & ~ddp_umask()) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) { /* named as the user named it: the temporary name is gone once reported */
        fprintf(stderr, "ddpc: error: cannot write '%s': %s\n", path, strerror(errno));
        close(fd);
        unlink(*tmp);
        return NULL;
    }
    return f;
}

bool output_close(FILE *f, const char *tmp, const char *path)
{
    errno = 0;
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok) { /* PATH: the temporary name is removed before anyone reads the message */
        fprintf(stderr, "ddpc: error: cannot write '%s': %s\n", path, errno ? strerror(errno) : "write error");
        unlink(tmp);
    }
    return ok;
}

bool output_rename(const char *tmp, const char *path)
{
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "ddpc: error: cannot rename '%s' to '%s': %s\n", tmp, path, strerror(errno));
        unlink(tmp);
        return false;
    }
    return true;
}
