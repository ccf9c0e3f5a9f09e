/*
 * store_wire.c: the start-up store's wire format (store_wire.h), parsed by
 * one pure function that both sides and the fuzzer use. The fixed header is
 * checked (magic, version, type, both lengths against hard limits) before a
 * byte of the body is read or allocated, so a peer that sends anything
 * malformed is refused on its first wrong byte.
 */
#include <stdint.h>
#include <string.h>

#include "store_wire.h"  // DdpStoreMessage, the limits, the little-endian helpers
#include "status.h"      // DDP_ERR

const char *ddp_store_type_name(int type)
{
    switch (type) {
    case DDP_STORE_SET: return "SET";
    case DDP_STORE_GET: return "GET";
    case DDP_STORE_ADD: return "ADD";
    case DDP_STORE_OK: return "OK";
    case DDP_STORE_VALUE: return "VALUE";
    case DDP_STORE_TIMEOUT: return "TIMEOUT";
    }
    return NULL;
}

size_t ddp_store_message_size(const unsigned char *header)
{
    return DDP_STORE_HEADER + ((size_t)header[7] | (size_t)header[8] << 8) + ddp_get_u32(header + 9);
}

/* What each type allows: a key always but for OK; GET carries its wait in
 * milliseconds (u32), ADD its delta (i64). NULL if fine, else why not. */
static const char *check_shape(int type, size_t key_len, size_t value_len)
{
    if (key_len > DDP_STORE_MAX_KEY)
        return "key longer than 256 bytes";
    if (value_len > DDP_STORE_MAX_VALUE)
        return "value longer than 1 MiB";
    switch (type) {
    case DDP_STORE_OK:
        return key_len || value_len ? "OK with a key or a value" : NULL;
    case DDP_STORE_GET:
        return !key_len ? "GET without a key" : value_len != 4 ? "GET whose wait is not 4 bytes" : NULL;
    case DDP_STORE_ADD:
        return !key_len ? "ADD without a key" : value_len != 8 ? "ADD whose delta is not 8 bytes" : NULL;
    case DDP_STORE_TIMEOUT:
        return !key_len ? "TIMEOUT without a key" : value_len ? "TIMEOUT with a value" : NULL;
    case DDP_STORE_SET:
    case DDP_STORE_VALUE:
        return !key_len ? "message without a key" : NULL;
    }
    return "unknown message type";
}

long ddp_store_parse(const unsigned char *buf, size_t len, DdpStoreMessage *msg)
{
    /* Each field is judged as soon as its bytes are there: a foreign peer is
     * refused on its first wrong byte, not after we wait for a header. */
    if (len == 0)
        return 0;
    size_t magic = len < 4 ? len : 4;
    if (memcmp(buf, DDP_STORE_MAGIC, magic) != 0)
        return DDP_ERR(DDP_FAIL, "not a ddp store message (no DDPS magic)"), -1;
    if (len >= 6) {
        unsigned version = (unsigned)buf[4] | (unsigned)buf[5] << 8;
        if (version != DDP_STORE_VERSION)
            return DDP_ERR(DDP_FAIL, "store protocol version %u, expected %d (a different ddp?)", version,
                           DDP_STORE_VERSION), -1;
    }
    if (len >= 7 && !ddp_store_type_name(buf[6]))
        return DDP_ERR(DDP_FAIL, "unknown store message type %u", (unsigned)buf[6]), -1;
    if (len < DDP_STORE_HEADER)
        return 0;
    int type = buf[6];
    size_t key_len = (size_t)buf[7] | (size_t)buf[8] << 8;
    size_t value_len = ddp_get_u32(buf + 9);
    const char *why = check_shape(type, key_len, value_len);
    if (why)
        return DDP_ERR(DDP_FAIL, "malformed store message: %s (key %zu bytes, value %zu bytes)", why, key_len,
                       value_len), -1;
    size_t total = DDP_STORE_HEADER + key_len + value_len;
    if (len < total)
        return 0;
    msg->type = type;
    msg->key = (const char *)buf + DDP_STORE_HEADER;
    msg->key_len = key_len;
    msg->value = buf + DDP_STORE_HEADER + key_len;
    msg->value_len = value_len;
    return (long)total;
}

size_t ddp_store_encode(unsigned char *buf, size_t cap, int type, const char *key, size_t key_len, const void *value,
                        size_t value_len)
{
    if (check_shape(type, key_len, value_len) || !ddp_store_type_name(type))
        return 0;
    size_t total = DDP_STORE_HEADER + key_len + value_len;
    if (total > cap)
        return 0;
    memcpy(buf, DDP_STORE_MAGIC, 4);
    ddp_put_u16(buf + 4, DDP_STORE_VERSION);
    buf[6] = (unsigned char)type;
    ddp_put_u16(buf + 7, (unsigned)key_len);
    ddp_put_u32(buf + 9, (uint32_t)value_len);
    if (key_len)
        memcpy(buf + DDP_STORE_HEADER, key, key_len);
    if (value_len)
        memcpy(buf + DDP_STORE_HEADER + key_len, value, value_len);
    return total;
}

