/*
 * dirs.c: mkdir -p, and the rule for output files (see dirs.h).
 *
 * mkdir -p: each prefix of the path that ends a component is made in turn;
 * one that already exists must be a directory. Repeated and trailing slashes
 * ("a//b/") name no extra component.
 *
 * Output files are written to a temporary name and renamed, and rename()
 * replaces whatever the name held: a device, a FIFO or a symbolic link would
 * silently become a regular file. So the path is looked at first (lstat, one
 * link at a time) and only a regular file or nothing is replaced. Links are
 * followed rather than refused: a link to the file a run should update
 * (latest.safetensors -> run3/weights.safetensors) is a common habit, and
 * writing its target keeps both the link and the user's intent.
 */
#include "dirs.h"

#include <errno.h>
#include <fcntl.h>     // open, O_*
#include <limits.h>    // PATH_MAX
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // mkdir, stat, lstat
#include <unistd.h>    // readlink, access, unlink, fsync

/* As the kernel allows (MAXSYMLINKS): more hops than this is a loop. */
enum { MAX_LINK_HOPS = 40 };

int ddp_make_dirs(const char *dir, char *failed, size_t len)
{
    char *path = strdup(dir);
    if (!path) {
        snprintf(failed, len, "%s", dir);
        errno = ENOMEM;
        return -1;
    }
    int result = 0, made = 0;
    size_t n = strlen(path);
    for (size_t i = 1; i <= n && result == 0; i++) {
        if ((path[i] != '/' && path[i] != '\0') || path[i - 1] == '/')
            continue;
        char saved = path[i];
        path[i] = '\0';
        struct stat sb;
        made = mkdir(path, 0777) == 0; /* the last part's says whether DIR is ours */
        if (!made) {
            int err = errno;
            if (err != EEXIST || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                snprintf(failed, len, "%s", path);
                errno = err == EEXIST ? ENOTDIR : err;
                result = -1;
            }
        }
        path[i] = saved;
    }
    free(path);
    return result < 0 ? -1 : made;
}

/* What a file that is not a regular file is, for messages. */
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

/* "--FLAG PATH" or "PATH", the start of every message about PATH. */
static const char *named(const char *flag, const char *path, char *buf, size_t len)
{
    if (flag)
        snprintf(buf, len, "--%s %s", flag, path);
    else
        snprintf(buf, len, "%s", path);
    return buf;
}

/* The directory part of PATH ("." when none), malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

/* PATH failed with ENOTDIR: the first of its leading parts that exists but is
 * not a directory, into PART (LEN bytes); PATH itself when none is found. */
static void non_directory_part(const char *path, char *part, size_t len)
{
    snprintf(part, len, "%s", path);
    for (size_t i = 1; part[i]; i++) {
        if (part[i] != '/' || part[i - 1] == '/')
            continue;
        part[i] = '\0';
        struct stat sb;
        if (stat(part, &sb) == 0 && !S_ISDIR(sb.st_mode))
            return;
        part[i] = '/';
    }
}

/* The message for a path whose lstat or stat failed with ERR (not ENOENT):
 * the part of it that is not a directory, or why it cannot be looked at. */
static DdpStatus lookup_failed(const char *who, const char *path, int err)
{
    if (err == ENOTDIR) {
        char part[PATH_MAX];
        non_directory_part(path, part, sizeof part);
        return DDP_ERR(DDP_BAD_INPUT, "%s: %s is not a directory", who, part);
    }
    return DDP_ERR(DDP_BAD_INPUT, "%s: cannot look at %s: %s", who, path, strerror(err));
}

/* Whether the directory of PATH lets us create a file there. */
static DdpStatus dir_takes_files(const char *who, const char *path)
{
    char *dir = dir_of(path);
    DdpStatus st = DDP_OK;
    if (!dir)
        st = DDP_ERR(DDP_FAIL, "%s: out of memory", who);
    else if (access(dir, W_OK | X_OK) != 0)
        st = DDP_ERR(DDP_BAD_INPUT, "%s: cannot write into %s: %s", who, dir, strerror(errno));
    free(dir);
    return st;
}

DdpStatus ddp_output_target(const char *flag, const char *path, char **target)
{
    char who[PATH_MAX + 64];
    return ddp_output_resolve(named(flag, path, who, sizeof who), path, target);
}

DdpStatus ddp_output_resolve(const char *who, const char *path, char **target)
{
    *target = NULL;
    if (!*path)
        return DDP_ERR(DDP_BAD_INPUT, "%s: an empty path; name a file", who);
    char *cur = strdup(path);
    if (!cur)
        return DDP_ERR(DDP_FAIL, "%s: out of memory", who);
    for (int hops = 0;; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0) {
            int err = errno;
            if (err == ENOENT) /* a new file; its directory is looked at when it is made */
                break;
            DdpStatus st = lookup_failed(who, cur, err);
            free(cur);
            return st;
        }
        if (S_ISREG(sb.st_mode))
            break;
        if (!S_ISLNK(sb.st_mode)) {
            DdpStatus st = strcmp(cur, path) == 0
                ? DDP_ERR(DDP_BAD_INPUT, "%s: is %s, not a regular file; name a file", who, file_kind(sb.st_mode))
                : DDP_ERR(DDP_BAD_INPUT, "%s: links to %s, which is %s, not a regular file; name a file", who,
                          cur, file_kind(sb.st_mode));
            free(cur);
            return st;
        }
        char link[PATH_MAX];
        ssize_t n = hops < MAX_LINK_HOPS ? readlink(cur, link, sizeof link - 1) : -1;
        if (n < 0) {
            DdpStatus st = DDP_ERR(DDP_BAD_INPUT, "%s: cannot follow the link %s: %s", who, cur,
                                   hops < MAX_LINK_HOPS ? strerror(errno) : strerror(ELOOP));
            free(cur);
            return st;
        }
        link[n] = '\0';
        char *next = NULL;
        if (link[0] == '/' || !strchr(cur, '/')) {
            next = strdup(link);
        } else {
            char *dir = dir_of(cur);
            if (dir && asprintf(&next, "%s/%s", dir, link) < 0)
                next = NULL;
            free(dir);
        }
        /* The kernel's own links lead where no path does: /proc/self/fd/1,
         * where /dev/stdout leads, to "pipe:[N]". The next hop is then
         * missing, yet the link leads to what it is; a pipe would fail only
         * once written, after the run. */
        struct stat hop, end;
        if (next && lstat(next, &hop) != 0 && errno == ENOENT && stat(cur, &end) == 0 && !S_ISREG(end.st_mode)) {
            DdpStatus st = DDP_ERR(DDP_BAD_INPUT, "%s: links to %s, which is %s, not a regular file; name a file", who,
                                   cur, file_kind(end.st_mode));
            free(next);
            free(cur);
            return st;
        }
        free(cur);
        if (!next)
            return DDP_ERR(DDP_FAIL, "%s: out of memory", who);
        cur = next;
    }
    *target = cur;
    return DDP_OK;
}

DdpStatus ddp_output_check(const char *flag, const char *path)
{
    char *target = NULL;
    DDP_CHECK(ddp_output_target(flag, path, &target));
    char who[PATH_MAX + 64];
    DdpStatus st = dir_takes_files(named(flag, path, who, sizeof who), target);
    free(target);
    return st;
}

mode_t ddp_umask(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    unsigned mask;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "Umask: %o", &mask) == 1) {
            fclose(f);
            return (mode_t)mask;
        }
    }
    if (f)
        fclose(f);
    return 022; /* a kernel too old to say: the usual mask */
}

/* Where output PATH would be written: its directory's device and inode,
 * and its file name (malloc'd); 0 for "-", for what is there but no regular
 * file (nothing replaced), and for a path ddp_output_target refuses. */
static int output_place(const char *path, struct stat *dir, char **name)
{
    struct stat sb;
    char *target = NULL;
    if (strcmp(path, "-") == 0 || (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)))
        return 0;
    if (ddp_output_target(NULL, path, &target) != DDP_OK) {
        ddp_error_clear();
        return 0;
    }
    char *parent = dir_of(target);
    const char *slash = strrchr(target, '/');
    int found = parent && stat(parent, dir) == 0 && (*name = strdup(slash ? slash + 1 : target));
    free(parent);
    free(target);
    return found;
}

DdpStatus ddp_outputs_apart(const char *const *flags, const char *const *paths, int n, const char *save_dir,
                            const char *reserved)
{
    enum { MOST = 8 }; /* more outputs than any program has */
    if (n > MOST)
        return DDP_ERR(DDP_FAIL, "internal error: %d outputs to compare, at most %d", n, MOST);
    struct stat dir[MOST], save;
    char *name[MOST] = {0}; /* NULL: an output not compared */
    for (int i = 0; i < n; i++)
        if (paths[i] && !output_place(paths[i], &dir[i], &name[i]))
            name[i] = NULL;
    int have_save = save_dir && stat(save_dir, &save) == 0;
    DdpStatus st = DDP_OK;
    for (int i = 0; i < n && st == DDP_OK; i++) {
        if (!name[i])
            continue;
        if (have_save && dir[i].st_dev == save.st_dev && dir[i].st_ino == save.st_ino &&
            strncmp(name[i], reserved, strlen(reserved)) == 0)
            st = DDP_ERR(DDP_BAD_INPUT, "--%s %s: names beginning %s in --save %s are kept for its checkpoints "
                         "(written, replaced and pruned there): name another file", flags[i], paths[i], reserved,
                         save_dir);
        for (int j = i + 1; j < n && st == DDP_OK; j++)
            if (name[j] && dir[j].st_dev == dir[i].st_dev && dir[j].st_ino == dir[i].st_ino &&
                strcmp(name[i], name[j]) == 0)
                st = DDP_ERR(DDP_BAD_INPUT, "--%s %s and --%s %s name one file, which each would write over the "
                             "other's: give each its own", flags[i], paths[i], flags[j], paths[j]);
    }
    for (int i = 0; i < n; i++)
        free(name[i]);
    return st;
}

DdpStatus ddp_output_in_place_check(const char *flag, const char *path)
{
    char who[PATH_MAX + 64];
    named(flag, path, who, sizeof who);
    if (!*path)
        return DDP_ERR(DDP_BAD_INPUT, "%s: an empty path; name a file", who);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        /* a file, a pipe, a terminal (/dev/stderr): written where it is */
        if (S_ISDIR(sb.st_mode) || S_ISBLK(sb.st_mode))
            return DDP_ERR(DDP_BAD_INPUT, "%s: is %s; name a file", who, file_kind(sb.st_mode));
        return DDP_OK;
    }
    if (errno != ENOENT)
        return lookup_failed(who, path, errno);
    return dir_takes_files(who, path);
}

DdpStatus ddp_output_open(const char *flag, const char *path, DdpOutput *out)
{
    memset(out, 0, sizeof *out);
    DDP_CHECK(ddp_output_target(flag, path, &out->target));
    if (asprintf(&out->tmp, "%s" DDP_OUTPUT_TMP "XXXXXX", out->target) < 0) {
        out->tmp = NULL;
        ddp_output_abort(out);
        return DDP_ERR(DDP_FAIL, "%s: out of memory", path);
    }
    /* A name of its own (mkostemp: new, O_EXCL), so that two writers of one
     * path never write into each other's file: each renames a whole file, and
     * the last rename wins. mkostemp makes it 0600; a finished output gets
     * the mode a plain create would give it. */
    int fd = mkostemp(out->tmp, O_CLOEXEC);
    if (fd >= 0) {
        if (fchmod(fd, 0666 & ~ddp_umask()) != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) { /* nothing was created under the name */
        DdpStatus st = DDP_ERR(DDP_FAIL, "%s: cannot create a temporary file beside it: %s", out->target,
                               strerror(errno));
        free(out->tmp);
        out->tmp = NULL;
        ddp_output_abort(out);
        return st;
    }
    if (!(out->f = fdopen(fd, "wb"))) {
        DdpStatus st = DDP_ERR(DDP_FAIL, "%s: cannot write: %s", out->tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        ddp_output_abort(out);
        return st;
    }
    return DDP_OK;
}

/* Makes the rename itself durable: syncs the directory holding PATH. 0, or
 * the errno of a failed sync. A directory that cannot be opened to be
 * synced, or whose file system does not sync directories (EINVAL), is not
 * a failure: there is nothing more to be done for it. */
static int sync_parent(const char *path)
{
    char *dir = dir_of(path);
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    int failed = 0;
    if (fd >= 0) {
        if (fsync(fd) != 0 && errno != EINVAL)
            failed = errno;
        close(fd);
    }
    free(dir);
    return failed;
}

int ddp_output_write(DdpOutput *out, const void *data, size_t len)
{
    if (out->write_errno) /* the file is lost already */
        return 0;
    if (len == 0 || fwrite(data, 1, len, out->f) == len)
        return 1;
    out->write_errno = errno ? errno : EIO;
    return 0;
}

DdpStatus ddp_output_commit(DdpOutput *out)
{
    errno = 0;
    int ok = !ferror(out->f) && fflush(out->f) == 0 && fsync(fileno(out->f)) == 0;
    int saved = out->write_errno ? out->write_errno : errno;
    if (fclose(out->f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    out->f = NULL;
    DdpStatus st = DDP_OK;
    if (!ok) /* the target, not the temporary file, which abort removes */
        st = DDP_ERR(DDP_FAIL, "%s: cannot write: %s", out->target, saved ? strerror(saved) : "write error");
    else if (rename(out->tmp, out->target) != 0)
        st = DDP_ERR(DDP_FAIL, "%s: cannot rename %s over it: %s", out->target, out->tmp, strerror(errno));
    else {
        free(out->tmp); /* renamed: nothing to remove */
        out->tmp = NULL;
        const int unsynced = sync_parent(out->target);
        if (unsynced)
            st = DDP_ERR(DDP_FAIL, "%s: written, but its directory could not be synced: %s; a crash could still "
                         "lose it", out->target, strerror(unsynced));
    }
    ddp_output_abort(out);
    return st;
}

void ddp_output_abort(DdpOutput *out)
{
    if (out->f)
        fclose(out->f);
    if (out->tmp)
        unlink(out->tmp);
    free(out->tmp);
    free(out->target);
    memset(out, 0, sizeof *out);
}
