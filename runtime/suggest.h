/*
 * suggest.h: "did you mean" for misspelt words.
 *
 * One rule for every suggestion ddpc and the programs it writes make (a
 * misspelt layer, key or option of ddpc; a misspelt flag of the generated
 * program), so both ends of the tool judge typos alike. Pure and
 * dependency-free beyond <string.h>: ddpc links this file as it links
 * buckets.c, the runtime carries it in libddprt.
 */
#ifndef DDPRT_SUGGEST_H
#define DDPRT_SUGGEST_H

#ifdef __cplusplus
extern "C" {
#endif

/* The one of CANDIDATES[0..n) nearest to WORD, if near enough to be a likely
 * typo (at most a third of it changed); else NULL. */
const char *ddp_suggest_nearest(const char *word, const char *const *candidates, int n);

#ifdef __cplusplus
}
#endif

#endif
