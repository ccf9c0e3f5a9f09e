/*
 * dirs.c: mkdir -p (see dirs.h). Each prefix of the path that ends a
 * component is made in turn; one that already exists must be a directory.
 * Repeated and trailing slashes ("a//b/") name no extra component.
 */
#include "dirs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // mkdir, stat

int ddp_make_dirs(const char *dir, char *failed, size_t len)
{
    char *path = strdup(dir);
    if (!path) {
        snprintf(failed, len, "%s", dir);
        errno = ENOMEM;
        return -1;
    }
    int result = 0;
    size_t n = strlen(path);
    for (size_t i = 1; i <= n && result == 0; i++) {
        if ((path[i] != '/' && path[i] != '\0') || path[i - 1] == '/')
            continue;
        char saved = path[i];
        path[i] = '\0';
        struct stat sb;
        if (mkdir(path, 0777) != 0) {
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
    return result;
}
