/*
 * suggest.c: "did you mean" for misspelt words (see suggest.h).
 *
 * Optimal string alignment distance (Levenshtein plus adjacent transposition,
 * the typo model of clang's and git's suggestions), accepted when at most a
 * third of the word's length changed, so 'relu6' finds 'relu' but 'x' finds
 * nothing. Words longer than 64 bytes get no suggestion: no typo is that long,
 * and it keeps the work bounded whatever the input.
 */
#include "suggest.h"

#include <string.h>

enum { SUGGEST_MAX_LEN = 64 };

static int min3(int a, int b, int c)
{
    int m = a < b ? a : b;
    return m < c ? m : c;
}

static int edit_distance(const char *a, int la, const char *b, int lb)
{
    int d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++) {
        for (int j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < d[i][j])
                d[i][j] = d[i - 2][j - 2] + 1;
        }
    }
    return d[la][lb];
}

const char *ddp_suggest_nearest(const char *word, const char *const *candidates, int n)
{
    size_t lw = strlen(word);
    if (lw == 0 || lw > SUGGEST_MAX_LEN)
        return NULL;
    const char *best = NULL;
    int best_distance = 0;
    for (int i = 0; i < n; i++) {
        size_t lc = strlen(candidates[i]);
        if (lc > SUGGEST_MAX_LEN)
            continue;
        int dist = edit_distance(word, (int)lw, candidates[i], (int)lc);
        int allowed = (int)(lw > lc ? lw : lc) / 3;
        if (allowed < 1)
            allowed = 1;
        if (dist <= allowed && (!best || dist < best_distance)) {
            best = candidates[i];
            best_distance = dist;
        }
    }
    return best;
}
