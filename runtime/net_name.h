/*
 * net_name.h: the bytes a net's name may hold. ddpc names a net after its
 * file, with '_' for any other byte (`net NAME` takes an identifier, a subset),
 * and the program files its checkpoints under that name as it is
 * (checkpoint.c), so that nets of different names never share files.
 */
#ifndef DDPRT_NET_NAME_H
#define DDPRT_NET_NAME_H

#include <stdbool.h>

static inline bool ddp_net_name_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

#endif
