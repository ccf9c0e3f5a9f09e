/*
 * store_wire.h: the start-up store's messages (store.h), as both sides and
 * the fuzzer read and write them.
 */
#ifndef DDPRT_STORE_WIRE_H
#define DDPRT_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The wire format, little endian: a header of DDP_STORE_HEADER bytes
 *   "DDPS" | version u16 | type u8 | key length u16 | value length u32
 * then the key and the value. Each request gets one reply: SET -> OK;
 * GET (value: u32 milliseconds to wait) -> VALUE (key, value) or TIMEOUT (key);
 * ADD (value: i64 delta) -> VALUE (key, i64 new count). */
#define DDP_STORE_MAGIC "DDPS"
#define DDP_STORE_VERSION 1
#define DDP_STORE_HEADER 13
#define DDP_STORE_MAX_KEY 256
#define DDP_STORE_MAX_VALUE (1u << 20)
typedef enum {
    DDP_STORE_SET = 1,
    DDP_STORE_GET = 2,
    DDP_STORE_ADD = 3,
    DDP_STORE_OK = 0x81,
    DDP_STORE_VALUE = 0x82,
    DDP_STORE_TIMEOUT = 0x83,
} DdpStoreType;

/* The message parser of the store, exposed for tests and the fuzzer: parses
 * one message from BUF (LEN bytes). Returns bytes consumed, 0 if more bytes
 * are needed, -1 (with the error recorded) if the message is malformed: a
 * wrong magic or version, an unknown type, a length over the limits or one
 * its type does not allow. The header is checked as soon as its bytes are
 * there, before any body arrives, so a reader never allocates for a lie. */
typedef struct {
    int type;
    const char *key;
    size_t key_len;
    const unsigned char *value;
    size_t value_len;
} DdpStoreMessage;
long ddp_store_parse(const unsigned char *buf, size_t len, DdpStoreMessage *msg);

/* Writes one message into BUF (CAP bytes); returns its length, or 0 if it
 * does not fit or breaks the limits above. */
size_t ddp_store_encode(unsigned char *buf, size_t cap, int type, const char *key, size_t key_len,
                        const void *value, size_t value_len);

/* "SET", "GET", ... for messages; NULL for a type that is none of them. */
const char *ddp_store_type_name(int type);

/* The length of the whole message whose header (DDP_STORE_HEADER bytes,
 * already accepted by ddp_store_parse) starts at HEADER. */
size_t ddp_store_message_size(const unsigned char *header);

/* The little-endian integers of the header and of GET's and ADD's values. */
static inline void ddp_put_u16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static inline void ddp_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void ddp_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t ddp_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t ddp_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#ifdef __cplusplus
}
#endif

#endif
