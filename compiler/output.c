/*
 * output.c: the files ddpc writes (OUT.cu, OUT), and which paths it may write.
 *
 * The rule is the generated program's (runtime/dirs.c), restated here because
 * ddpc links none of the runtime's file code: an output must name a regular
 * file or nothing; symbolic links are followed, so a link's target is
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

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* As the kernel allows (MAXSYMLINKS): more hops than this is a loop. */
enum { MAX_LINK_HOPS = 40 };

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* The directory part of PATH ("." when none), in A. */
static char *dir_of(Arena *a, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return arena_strndup(a, ".", 1);
    return arena_strndup(a, path, slash == path ? 1 : (size_t)(slash - path));
}

/* PATH failed with ENOTDIR: the first leading part of it that exists but is
 * not a directory (PATH itself when none is found). */
static char *non_directory_part(Arena *a, const char *path)
{
    char *part = arena_strndup(a, path, strlen(path));
    for (size_t i = 1; part[i]; i++) {
        if (part[i] != '/' || part[i - 1] == '/')
            continue;
        part[i] = '\0';
        struct stat sb;
        if (stat(part, &sb) == 0 && !S_ISDIR(sb.st_mode))
            return part;
        part[i] = '/';
    }
    return part;
}

char *output_target(Arena *a, const char *who, const char *path)
{
    if (!*path) {
        fprintf(stderr, "ddpc: error: %s: an empty path; name a file\n", who);
        return NULL;
    }
    char *cur = arena_strndup(a, path, strlen(path));
    for (int hops = 0;; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0) {
            if (errno == ENOENT) /* a new file: its directory must take it, which the write will say */
                return cur;
            if (errno == ENOTDIR)
                fprintf(stderr, "ddpc: error: %s: %s is not a directory\n", who, non_directory_part(a, cur));
            else
                fprintf(stderr, "ddpc: error: %s: cannot look at %s: %s\n", who, cur, strerror(errno));
            return NULL;
        }
        if (S_ISREG(sb.st_mode))
            return cur;
        if (!S_ISLNK(sb.st_mode)) {
            if (strcmp(cur, path) == 0)
                fprintf(stderr, "ddpc: error: %s: is %s, not a regular file; name a file\n", who, file_kind(sb.st_mode));
            else
                fprintf(stderr, "ddpc: error: %s: links to %s, which is %s, not a regular file; name a file\n", who, cur,
                        file_kind(sb.st_mode));
            return NULL;
        }
        char link[PATH_MAX];
        ssize_t n = hops < MAX_LINK_HOPS ? readlink(cur, link, sizeof link - 1) : -1;
        if (n < 0) {
            fprintf(stderr, "ddpc: error: %s: cannot follow the link %s: %s\n", who, cur,
                    strerror(hops < MAX_LINK_HOPS ? errno : ELOOP));
            return NULL;
        }
        link[n] = '\0';
        cur = link[0] == '/' || !strchr(cur, '/') ? arena_strndup(a, link, (size_t)n)
                                                  : arena_printf(a, "%s/%s", dir_of(a, cur), link);
    }
}

bool output_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* A fresh, unique name beside PATH (PATH.tmp-XXXXXX), created empty with
 * mode 0600; NULL (reported) when the directory cannot take it. */
static char *reserve(Arena *a, const char *path, int *fd)
{
    char *tmp = arena_printf(a, "%s.tmp-XXXXXX", path);
    *fd = mkostemp(tmp, O_CLOEXEC);
    if (*fd < 0) {
        fprintf(stderr, "ddpc: error: cannot write into %s: %s\n", dir_of(a, path), strerror(errno));
        return NULL;
    }
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
    mode_t mask = umask(0);
    umask(mask);
    FILE *f = fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "ddpc: error: cannot write '%s': %s\n", *tmp, strerror(errno));
        close(fd);
        unlink(*tmp);
        return NULL;
    }
    return f;
}

bool output_commit(FILE *f, const char *tmp, const char *path)
{
    errno = 0;
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "ddpc: error: cannot write '%s': %s\n", tmp, errno ? strerror(errno) : "write error");
        unlink(tmp);
        return false;
    }
    return output_rename(tmp, path);
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
