/*
 * numbers.c: the one reader of decimal numbers (numbers.h says why one).
 */
#include "numbers.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool ddp_parse_int(const char *s, int64_t *out)
{
    if (!(*s == '-' || (*s >= '0' && *s <= '9')))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return false;
    *out = v;
    return true;
}

bool ddp_parse_u64(const char *s, uint64_t *out)
{
    if (!(*s >= '0' && *s <= '9'))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

bool ddp_parse_real(const char *s, double *out)
{
    /* strtod's own leading blanks and '+' are refused by the first test; its
     * hexadecimal, inf and nan by the second (an 'x' or a letter other than
     * the exponent's e) */
    if (!(*s == '-' || *s == '.' || (*s >= '0' && *s <= '9')) || strspn(s, "-+.0123456789eE") != strlen(s))
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s || errno == ERANGE || !isfinite(v))
        return false;
    *out = v;
    return true;
}
