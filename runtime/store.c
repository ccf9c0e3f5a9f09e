/*
 * store.c: the start-up key-value store (rendezvous.h): rank 0 serves it on
 * MASTER_ADDR:MASTER_PORT, every rank (0 too) is a client.
 *
 * What it is for is small: a few keys (the NCCL unique id, a hash of the net,
 * barriers) exchanged once, before a process group exists. What shapes it is
 * what can go wrong at that moment: rank 0 not up yet (clients retry until the
 * timeout), a rank that never comes (every wait has a deadline, and the
 * message says how many arrived), a port some other program holds (said so,
 * with the address), and anything at all connecting to an open port (a
 * scanner, an old run, a newer ddp). So:
 *
 *  - One wire format, parsed by one pure function, ddp_store_parse, that both
 *    sides and the fuzzer use. The fixed header is checked (magic, version,
 *    type, both lengths against hard limits) before a byte of the body is
 *    read or allocated, and a peer that sends anything malformed is closed
 *    and counted; it cannot make the server allocate more than one message.
 *  - The server is one thread around poll(): no thread per client, no
 *    blocking call, so a peer that sends half a message and sleeps delays
 *    nobody. A GET for a missing key is parked on its connection with the
 *    deadline the client sent and answered by the SET that supplies the key,
 *    or by a TIMEOUT reply when the deadline passes; the client therefore
 *    learns of a timeout in a reply, and its connection stays in step and
 *    usable (to count who arrived, say). Each connection handles one request
 *    at a time: nothing more is read from a peer until its reply is written,
 *    which bounds what a greedy peer can make the server hold.
 *  - The client is synchronous: one request, one reply, each with a deadline
 *    from the store's timeout, enforced with poll() on a non-blocking socket.
 *  - Barriers are counters: ADD returns the arrival number n; the last of each
 *    round of world_size sets a key that the others wait for, so a name may
 *    be reused. Opening the store is itself such a barrier, which is how a
 *    world that never fills is reported.
 *  - Closing rank 0's store lets the server serve the others until they have
 *    closed too (bounded), so a rank never loses its last reply to an early
 *    exit of rank 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous.h"  // DdpStore, DdpStoreMessage, the wire format
#include "status.h"      // DDP_ERR, DDP_CHECK
#include "clock.h"     // ddp_now, ddp_abs_time: monotonic seconds

/* How much the server keeps in all (keys + values + bookkeeping): far more
 * than start-up needs, far less than a flood of SETs could take. */
#define STORE_MAX_BYTES ((size_t)256 << 20)
#define ENTRY_OVERHEAD 64
/* How long rank 0's close keeps serving ranks that have not closed yet. */
#define DRAIN_MAX_S 10.0
/* How much later than the server's answer to a GET a client gives up. */
#define REPLY_GRACE_S 5.0
#define SHOWN 64

/* Milliseconds from now to DEADLINE for poll(): 0 if passed, capped. */
static int ms_until(double deadline)
{
    double ms = (deadline - ddp_now()) * 1000.0;
    if (ms <= 0)
        return 0;
    return ms > 3600e3 ? 3600000 : (int)ms + 1;
}

/* strerror with a lower-case first letter, to sit mid-sentence. */
static const char *reason(int err, char *buf, size_t len)
{
    snprintf(buf, len, "%s", strerror(err));
    if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
        buf[0] = (char)(buf[0] - 'A' + 'a');
    return buf;
}

/* ---- the wire format ----------------------------------------------------------- */

static void put_u16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static const char *type_name(int type)
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
    if (len >= 7 && !type_name(buf[6]))
        return DDP_ERR(DDP_FAIL, "unknown store message type %u", (unsigned)buf[6]), -1;
    if (len < DDP_STORE_HEADER)
        return 0;
    int type = buf[6];
    size_t key_len = (size_t)buf[7] | (size_t)buf[8] << 8;
    size_t value_len = get_u32(buf + 9);
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
    if (check_shape(type, key_len, value_len) || !type_name(type))
        return 0;
    size_t total = DDP_STORE_HEADER + key_len + value_len;
    if (total > cap)
        return 0;
    memcpy(buf, DDP_STORE_MAGIC, 4);
    put_u16(buf + 4, DDP_STORE_VERSION);
    buf[6] = (unsigned char)type;
    put_u16(buf + 7, (unsigned)key_len);
    put_u32(buf + 9, (uint32_t)value_len);
    if (key_len)
        memcpy(buf + DDP_STORE_HEADER, key, key_len);
    if (value_len)
        memcpy(buf + DDP_STORE_HEADER + key_len, value, value_len);
    return total;
}

/* ---- the server ------------------------------------------------------------------ */

typedef struct {
    int fd; /* -1: closed, to be removed */
    unsigned char *in;
    size_t in_len, in_cap;
    unsigned char *out;
    size_t out_len, out_off;
    int eof;               /* the peer will send no more */
    int waiting;           /* a GET parked until its key is set */
    char wkey[DDP_STORE_MAX_KEY];
    size_t wkey_len;
    double wdeadline;
} Peer;

typedef struct {
    char *key;
    size_t key_len;
    unsigned char *value;
    size_t value_len;
} Entry;

typedef struct {
    int listen_fd;
    int wake[2]; /* a byte here: stop accepting, drain, end */
    pthread_t thread;
    Peer *peers;
    size_t npeers, peers_cap;
    Entry *entries;
    size_t nentries, entries_cap;
    size_t stored;
    double accept_paused_until; /* out of descriptors: try again later */
    _Atomic double drain_s;     /* how long the drain may last, set before the wake byte */
    atomic_ulong dropped;
} Server;

static void peer_close(Peer *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    free(p->in);
    free(p->out);
    p->in = p->out = NULL;
}

/* A peer that broke the protocol: closed, counted, never trusted again. */
static void peer_drop(Server *sv, Peer *p)
{
    atomic_fetch_add(&sv->dropped, 1);
    peer_close(p);
}

static Entry *find(Server *sv, const char *key, size_t key_len)
{
    for (size_t i = 0; i < sv->nentries; i++)
        if (sv->entries[i].key_len == key_len && memcmp(sv->entries[i].key, key, key_len) == 0)
            return &sv->entries[i];
    return NULL;
}

/* Stores KEY = VALUE; 0 when the store is full (or out of memory). */
static int put(Server *sv, const char *key, size_t key_len, const void *value, size_t value_len)
{
    Entry *e = find(sv, key, key_len);
    size_t old = e ? e->key_len + e->value_len + ENTRY_OVERHEAD : 0;
    size_t add = key_len + value_len + ENTRY_OVERHEAD;
    if (sv->stored - old + add > STORE_MAX_BYTES)
        return 0;
    unsigned char *copy = malloc(value_len ? value_len : 1);
    if (!copy)
        return 0;
    if (value_len)
        memcpy(copy, value, value_len);
    if (!e) {
        if (sv->nentries == sv->entries_cap) {
            size_t cap = sv->entries_cap ? 2 * sv->entries_cap : 16;
            Entry *bigger = realloc(sv->entries, cap * sizeof *bigger);
            if (!bigger) {
                free(copy);
                return 0;
            }
            sv->entries = bigger;
            sv->entries_cap = cap;
        }
        char *k = malloc(key_len);
        if (!k) {
            free(copy);
            return 0;
        }
        memcpy(k, key, key_len);
        e = &sv->entries[sv->nentries++];
        *e = (Entry){.key = k, .key_len = key_len};
    }
    free(e->value);
    e->value = copy;
    e->value_len = value_len;
    sv->stored = sv->stored - old + add;
    return 1;
}

/* Queues one reply on P; 0 if out of memory. */
static int reply(Peer *p, int type, const char *key, size_t key_len, const void *value, size_t value_len)
{
    size_t need = DDP_STORE_HEADER + key_len + value_len;
    unsigned char *out = realloc(p->out, p->out_len + need);
    if (!out)
        return 0;
    p->out = out;
    p->out_len += ddp_store_encode(out + p->out_len, need, type, key, key_len, value, value_len);
    return 1;
}

/* Writes what P has queued, as far as the socket takes it. */
static void flush(Peer *p)
{
    while (p->fd >= 0 && p->out_off < p->out_len) {
        ssize_t n = send(p->fd, p->out + p->out_off, p->out_len - p->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p->out_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            if (!(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
                peer_close(p); /* the peer is gone: its replies with it */
            return;
        }
    }
    if (p->fd >= 0) {
        p->out_len = p->out_off = 0;
    }
}

/* Answers every GET parked on KEY with its value. */
static void wake_waiters(Server *sv, const Entry *e)
{
    for (size_t i = 0; i < sv->npeers; i++) {
        Peer *p = &sv->peers[i];
        if (p->fd >= 0 && p->waiting && p->wkey_len == e->key_len && memcmp(p->wkey, e->key, e->key_len) == 0) {
            p->waiting = 0;
            if (!reply(p, DDP_STORE_VALUE, e->key, e->key_len, e->value, e->value_len))
                peer_close(p);
            else
                flush(p);
        }
    }
}

/* One request from P. */
static void handle(Server *sv, Peer *p, const DdpStoreMessage *m)
{
    Entry *e;
    switch (m->type) {
    case DDP_STORE_SET:
        if (!put(sv, m->key, m->key_len, m->value, m->value_len) || !reply(p, DDP_STORE_OK, NULL, 0, NULL, 0)) {
            peer_drop(sv, p);
            return;
        }
        wake_waiters(sv, find(sv, m->key, m->key_len));
        return;
    case DDP_STORE_GET:
        e = find(sv, m->key, m->key_len);
        if (e) {
            if (!reply(p, DDP_STORE_VALUE, e->key, e->key_len, e->value, e->value_len))
                peer_close(p);
            return;
        }
        p->waiting = 1;
        memcpy(p->wkey, m->key, m->key_len);
        p->wkey_len = m->key_len;
        p->wdeadline = ddp_now() + get_u32(m->value) / 1000.0;
        return;
    case DDP_STORE_ADD: {
        e = find(sv, m->key, m->key_len);
        if (e && e->value_len != 8) { /* not a counter: a confused peer */
            peer_drop(sv, p);
            return;
        }
        uint64_t v = (e ? get_u64(e->value) : 0) + get_u64(m->value);
        unsigned char bytes[8];
        put_u64(bytes, v);
        if (!put(sv, m->key, m->key_len, bytes, 8) || !reply(p, DDP_STORE_VALUE, m->key, m->key_len, bytes, 8)) {
            peer_drop(sv, p);
            return;
        }
        wake_waiters(sv, find(sv, m->key, m->key_len));
        return;
    }
    default: /* a reply sent as a request */
        peer_drop(sv, p);
        return;
    }
}

/* Handles the requests P has buffered, one at a time: the next only once the
 * last one's reply is out and it waits for nothing. */
static void serve(Server *sv, Peer *p)
{
    while (p->fd >= 0 && !p->waiting && p->out_len == 0) {
        DdpStoreMessage m;
        long n = ddp_store_parse(p->in, p->in_len, &m);
        if (n < 0) {
            peer_drop(sv, p);
            return;
        }
        if (n == 0)
            break;
        handle(sv, p, &m);
        if (p->fd < 0)
            return;
        memmove(p->in, p->in + n, p->in_len - (size_t)n);
        p->in_len -= (size_t)n;
        flush(p);
    }
    /* A peer that has said all it will say goes once it has its answers;
     * one gone while a GET waits has nobody left to answer. */
    if (p->fd >= 0 && p->eof && (p->waiting || p->out_len == 0))
        peer_close(p);
}

/* How many bytes P's buffer should hold: the whole of the message being
 * read once its header is known (and valid), and at least a small buffer's
 * worth, so that short requests come in one read. */
static size_t want(const Peer *p)
{
    size_t need = DDP_STORE_HEADER;
    DdpStoreMessage m;
    if (p->in_len >= DDP_STORE_HEADER && ddp_store_parse(p->in, p->in_len, &m) >= 0)
        need = DDP_STORE_HEADER + ((size_t)p->in[7] | (size_t)p->in[8] << 8) + get_u32(p->in + 9);
    return need < 4096 ? 4096 : need;
}

/* Reads what P has sent, up to want(P). */
static void receive(Server *sv, Peer *p)
{
    DdpStoreMessage m;
    if (p->in_len && ddp_store_parse(p->in, p->in_len, &m) < 0) {
        peer_drop(sv, p);
        return;
    }
    size_t need = want(p);
    if (p->in_cap < need) {
        unsigned char *in = realloc(p->in, need);
        if (!in) {
            peer_close(p);
            return;
        }
        p->in = in;
        p->in_cap = need;
    }
    if (p->in_len >= need)
        return; /* a whole message is here, waiting its turn */
    ssize_t n = recv(p->fd, p->in + p->in_len, need - p->in_len, MSG_DONTWAIT);
    if (n > 0)
        p->in_len += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        p->eof = 1;
    /* Judge the bytes at once: a foreign peer goes now, not when it is done. */
    if (p->in_len && ddp_store_parse(p->in, p->in_len, &m) < 0)
        peer_drop(sv, p);
}

static void accept_all(Server *sv)
{
    for (;;) {
        int fd = accept4(sv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                sv->accept_paused_until = ddp_now() + 0.1; /* or poll would spin on the pending connection */
            return;
        }
        if (sv->npeers == sv->peers_cap) {
            size_t cap = sv->peers_cap ? 2 * sv->peers_cap : 16;
            Peer *bigger = realloc(sv->peers, cap * sizeof *bigger);
            if (!bigger) {
                close(fd);
                return;
            }
            sv->peers = bigger;
            sv->peers_cap = cap;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        sv->peers[sv->npeers++] = (Peer){.fd = fd};
    }
}

static void *server_main(void *arg)
{
    Server *sv = arg;
    struct pollfd *fds = NULL;
    size_t fds_cap = 0;
    double drain_until = 0;
    int draining = 0;
    for (;;) {
        /* Remove the peers closed in the last round. */
        size_t kept = 0;
        for (size_t i = 0; i < sv->npeers; i++)
            if (sv->peers[i].fd >= 0)
                sv->peers[kept++] = sv->peers[i];
        sv->npeers = kept;
        if (draining && (sv->npeers == 0 || ddp_now() >= drain_until))
            break;

        if (fds_cap < sv->npeers + 2) {
            size_t cap = 2 * (sv->npeers + 2);
            struct pollfd *bigger = realloc(fds, cap * sizeof *bigger);
            if (!bigger) { /* keep going with what we have: try again next round */
                struct timespec pause = {0, 10000000};
                nanosleep(&pause, NULL);
                continue;
            }
            fds = bigger;
            fds_cap = cap;
        }
        double now = ddp_now(), next = now + 3600;
        size_t nfds = 0;
        fds[nfds++] = (struct pollfd){.fd = sv->wake[0], .events = POLLIN};
        int listening = !draining && now >= sv->accept_paused_until;
        if (listening)
            fds[nfds++] = (struct pollfd){.fd = sv->listen_fd, .events = POLLIN};
        else if (!draining && sv->accept_paused_until < next)
            next = sv->accept_paused_until;
        if (draining && drain_until < next)
            next = drain_until;
        size_t first_peer = nfds;
        for (size_t i = 0; i < sv->npeers; i++) {
            Peer *p = &sv->peers[i];
            /* Only a peer we would read from is asked about: one that is
             * waiting with a full buffer would wake poll for nothing. */
            short ev = 0;
            if (!p->eof && p->in_len < want(p))
                ev |= POLLIN | POLLRDHUP;
            if (p->out_len > p->out_off)
                ev |= POLLOUT;
            if (p->waiting && p->wdeadline < next)
                next = p->wdeadline;
            fds[nfds++] = (struct pollfd){.fd = p->fd, .events = ev};
        }
        int ready = poll(fds, nfds, ms_until(next));
        if (ready < 0 && errno != EINTR)
            break; /* cannot happen with valid descriptors; the clients time out */

        if (ready > 0 && fds[0].revents) {
            char byte;
            if (read(sv->wake[0], &byte, 1) >= 0 && !draining) {
                draining = 1;
                drain_until = ddp_now() + atomic_load(&sv->drain_s);
                close(sv->listen_fd); /* newcomers are refused, not left in the backlog */
                sv->listen_fd = -1;
            }
        }
        if (ready > 0 && listening && fds[1].revents)
            accept_all(sv);
        /* Peers accepted just now sit past the polled ones; their turn is next round. */
        size_t polled = nfds - first_peer;
        for (size_t i = 0; i < polled; i++) {
            Peer *p = &sv->peers[i];
            short rev = fds[first_peer + i].revents;
            if (p->fd < 0)
                continue;
            if (rev & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
                receive(sv, p);
            if (p->fd >= 0 && (rev & POLLOUT))
                flush(p);
            if (p->fd >= 0 && (rev & (POLLHUP | POLLERR)) && p->in_len >= want(p))
                peer_close(p);
        }
        /* Answer expired GETs, then serve whatever is buffered (a SET may have
         * unparked a peer that has more requests queued). */
        now = ddp_now();
        for (size_t i = 0; i < sv->npeers; i++) {
            Peer *p = &sv->peers[i];
            if (p->fd >= 0 && p->waiting && now >= p->wdeadline) {
                p->waiting = 0;
                if (!reply(p, DDP_STORE_TIMEOUT, p->wkey, p->wkey_len, NULL, 0))
                    peer_close(p);
                else
                    flush(p);
            }
            if (p->fd >= 0)
                serve(sv, p);
        }
    }
    free(fds);
    for (size_t i = 0; i < sv->npeers; i++)
        peer_close(&sv->peers[i]);
    sv->npeers = 0;
    return NULL;
}

static void server_free(Server *sv)
{
    if (!sv)
        return;
    for (size_t i = 0; i < sv->nentries; i++) {
        free(sv->entries[i].key);
        free(sv->entries[i].value);
    }
    free(sv->entries);
    free(sv->peers);
    if (sv->listen_fd >= 0)
        close(sv->listen_fd);
    if (sv->wake[0] >= 0)
        close(sv->wake[0]);
    if (sv->wake[1] >= 0)
        close(sv->wake[1]);
    free(sv);
}

/* Room for a descriptor per rank: raise the soft limit toward the hard one. */
static void allow_descriptors(int world_size)
{
    struct rlimit lim;
    rlim_t want = (rlim_t)world_size + 64;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
        lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max > want ? want : lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
}

/* Binds HOST:PORT (the first of its addresses that binds) and starts the thread. */
static DdpStatus server_start(Server **out, const char *host, int port, int world_size)
{
    char where[300], why[128];
    snprintf(where, sizeof where, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    Server *sv = calloc(1, sizeof *sv);
    if (!sv)
        return DDP_ERR(DDP_FAIL, "out of memory starting the store");
    sv->listen_fd = sv->wake[0] = sv->wake[1] = -1;
    atomic_init(&sv->dropped, 0);
    atomic_init(&sv->drain_s, 0.0);

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    int rc = getaddrinfo(host, port_text, &hints, &ai);
    if (rc != 0) {
        server_free(sv);
        return DDP_ERR(DDP_FAIL, "cannot serve the store on %s: cannot resolve %s: %s", where, host,
                       gai_strerror(rc));
    }
    int err = 0;
    for (struct addrinfo *a = ai; a && sv->listen_fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
            sv->listen_fd = fd;
        } else {
            if (err != EADDRINUSE) /* "in use" is the most telling reason if any address said it */
                err = errno;
            close(fd);
        }
    }
    freeaddrinfo(ai);
    if (sv->listen_fd < 0) {
        server_free(sv);
        if (err == EADDRINUSE)
            return DDP_ERR(DDP_FAIL, "cannot serve the store on %s: port %d is in use (another run on this "
                           "machine? choose another MASTER_PORT)", where, port);
        if (err == EADDRNOTAVAIL)
            return DDP_ERR(DDP_FAIL, "cannot serve the store on %s: %s is not an address of this machine, where "
                           "rank 0 runs", where, host);
        return DDP_ERR(DDP_FAIL, "cannot serve the store on %s: %s", where, reason(err, why, sizeof why));
    }
    if (pipe2(sv->wake, O_CLOEXEC) != 0) {
        err = errno;
        server_free(sv);
        return DDP_ERR(DDP_FAIL, "cannot start the store: %s", reason(err, why, sizeof why));
    }
    allow_descriptors(world_size);

    /* The server thread takes no signals: they are the main thread's to handle. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&sv->thread, NULL, server_main, sv);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        server_free(sv);
        return DDP_ERR(DDP_FAIL, "cannot start the store's thread: %s", reason(rc, why, sizeof why));
    }
    *out = sv;
    return DDP_OK;
}

/* Lets the server drain for at most DRAIN_S, then joins and frees it. */
static void server_stop(Server *sv, double drain_s)
{
    atomic_store(&sv->drain_s, drain_s);
    char byte = 0;
    ssize_t n;
    do
        n = write(sv->wake[1], &byte, 1); /* the pipe orders drain_s before the thread reads it */
    while (n < 0 && errno == EINTR);
    pthread_join(sv->thread, NULL);
    server_free(sv);
}

/* ---- the client -------------------------------------------------------------------- */

struct DdpStore {
    int fd;
    double timeout_s;
    int rank, world_size;
    int broken;           /* a reply never came: the stream is out of step */
    char where[300];      /* "HOST:PORT", for messages */
    unsigned char *buf;   /* the last reply */
    size_t buf_cap;
    Server *server;       /* rank 0 */
};

/* Connects to S->where's address by DEADLINE, retrying while rank 0 is not up. */
static DdpStatus client_connect(DdpStore *s, const char *host, int port, double deadline)
{
    char port_text[16], why[128];
    snprintf(port_text, sizeof port_text, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int err = ETIMEDOUT;
    const char *gai = NULL;
    double pause = 0.01;
    for (;;) {
        struct addrinfo *ai;
        int rc = getaddrinfo(host, port_text, &hints, &ai);
        if (rc != 0) {
            gai = gai_strerror(rc);
            if (rc != EAI_AGAIN && rc != EAI_SYSTEM)
                return DDP_ERR(DDP_FAIL, "cannot reach the store at %s: cannot resolve %s: %s", s->where, host, gai);
        } else {
            gai = NULL;
            for (struct addrinfo *a = ai; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
                if (fd < 0) {
                    err = errno;
                    continue;
                }
                int rcc = connect(fd, a->ai_addr, a->ai_addrlen);
                if (rcc != 0 && errno == EINPROGRESS) {
                    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                    int ready;
                    do
                        ready = poll(&pfd, 1, ms_until(deadline));
                    while (ready < 0 && errno == EINTR);
                    socklen_t len = sizeof err;
                    if (ready == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
                        rcc = 0;
                    else if (ready == 0)
                        err = ETIMEDOUT;
                } else if (rcc != 0) {
                    err = errno;
                }
                if (rcc == 0) {
                    freeaddrinfo(ai);
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    s->fd = fd;
                    return DDP_OK;
                }
                close(fd);
            }
            freeaddrinfo(ai);
        }
        double left = deadline - ddp_now();
        if (left <= 0)
            break;
        struct timespec ts = {0, 0};
        double nap = pause < left ? pause : left;
        ts.tv_sec = (time_t)nap;
        ts.tv_nsec = (long)((nap - (double)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
        pause = pause * 2 > 0.5 ? 0.5 : pause * 2;
    }
    return DDP_ERR(DDP_FAIL, "cannot reach %s within %g s: %s (the store of rank 0: is it running there?)",
                   s->where, s->timeout_s, gai ? gai : reason(err, why, sizeof why));
}

/* Sends LEN bytes by DEADLINE. */
static DdpStatus send_all(DdpStore *s, const unsigned char *p, size_t len, double deadline)
{
    char why[128];
    while (len) {
        ssize_t n = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            s->broken = 1;
            return DDP_ERR(DDP_FAIL, "lost the store at %s: %s (did rank 0 stop?)", s->where,
                           reason(errno, why, sizeof why));
        }
        struct pollfd pfd = {.fd = s->fd, .events = POLLOUT};
        int ready = poll(&pfd, 1, ms_until(deadline));
        if (ready == 0) {
            s->broken = 1;
            return DDP_ERR(DDP_FAIL, "the store at %s took no request within %g s", s->where, s->timeout_s);
        }
    }
    return DDP_OK;
}

/* Reads one reply into S->buf within WAITED_S seconds of START; KEY names
 * the request in the message if none comes. */
static DdpStatus receive_reply(DdpStore *s, DdpStoreMessage *m, const char *key, double start, double waited_s)
{
    double deadline = start + waited_s;
    char why[128];
    size_t have = 0, need = DDP_STORE_HEADER;
    for (;;) {
        if (have >= DDP_STORE_HEADER) {
            long n = ddp_store_parse(s->buf, have, m);
            if (n < 0) {
                s->broken = 1;
                return DDP_ERR(DDP_FAIL, "the store at %s answered with a malformed message (%s)", s->where,
                               ddp_error_message());
            }
            if (n > 0)
                return DDP_OK;
            need = DDP_STORE_HEADER + ((size_t)s->buf[7] | (size_t)s->buf[8] << 8) + get_u32(s->buf + 9);
        }
        if (s->buf_cap < need) {
            unsigned char *bigger = realloc(s->buf, need);
            if (!bigger)
                return DDP_ERR(DDP_FAIL, "out of memory reading from the store");
            s->buf = bigger;
            s->buf_cap = need;
        }
        /* Exactly the message: a second one must not be read into this one. */
        ssize_t n = recv(s->fd, s->buf + have, need - have, MSG_DONTWAIT);
        if (n > 0) {
            have += (size_t)n;
            continue;
        }
        if (n == 0) {
            s->broken = 1;
            return DDP_ERR(DDP_FAIL, "the store at %s closed the connection (did rank 0 stop?)", s->where);
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            s->broken = 1;
            return DDP_ERR(DDP_FAIL, "lost the store at %s: %s", s->where, reason(errno, why, sizeof why));
        }
        struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
        if (poll(&pfd, 1, ms_until(deadline)) == 0) {
            s->broken = 1;
            return DDP_ERR(DDP_FAIL, "the store at %s did not answer the request for '%.*s' within %g s (is the "
                           "network to rank 0 down, or rank 0 stuck?)", s->where, SHOWN, key, waited_s);
        }
    }
}

static DdpStatus check_key(const DdpStore *s, const char *key)
{
    if (!s)
        return DDP_ERR(DDP_FAIL, "internal error: no store");
    size_t n = strlen(key);
    if (n == 0 || n > DDP_STORE_MAX_KEY)
        return DDP_ERR(DDP_FAIL, "internal error: store key '%.*s' is %zu bytes (1 to %d allowed)", SHOWN, key, n,
                       DDP_STORE_MAX_KEY);
    if (s->broken)
        return DDP_ERR(DDP_FAIL, "the connection to the store at %s failed earlier", s->where);
    return DDP_OK;
}

/* One request and its reply, checked to answer it: the right type, the same key.
 * WAIT_S is how long the server may hold a GET; the reply may take that long. */
static DdpStatus request(DdpStore *s, int type, const char *key, const void *value, size_t value_len,
                         double wait_s, DdpStoreMessage *m)
{
    size_t key_len = strlen(key), len = DDP_STORE_HEADER + key_len + value_len;
    unsigned char small[512], *msg = len <= sizeof small ? small : malloc(len);
    if (!msg)
        return DDP_ERR(DDP_FAIL, "out of memory writing to the store");
    ddp_store_encode(msg, len, type, key, key_len, value, value_len);
    double start = ddp_now();
    DdpStatus st = send_all(s, msg, len, start + s->timeout_s);
    if (msg != small)
        free(msg);
    DDP_CHECK(st);
    DDP_CHECK(receive_reply(s, m, key, start, (wait_s > s->timeout_s ? wait_s : s->timeout_s) + REPLY_GRACE_S));
    int expected = m->type == DDP_STORE_OK ? type == DDP_STORE_SET
                   : m->type == DDP_STORE_VALUE ? type == DDP_STORE_GET || type == DDP_STORE_ADD
                   : m->type == DDP_STORE_TIMEOUT ? type == DDP_STORE_GET
                                                  : 0;
    if (!expected || (m->type != DDP_STORE_OK && (m->key_len != key_len || memcmp(m->key, key, key_len) != 0)) ||
        (type == DDP_STORE_ADD && m->value_len != 8)) {
        s->broken = 1;
        return DDP_ERR(DDP_FAIL, "the store at %s answered %s for '%.*s' with a %s out of step", s->where,
                       type_name(type), SHOWN, key, type_name(m->type));
    }
    return DDP_OK;
}

DdpStatus ddp_store_set(DdpStore *s, const char *key, const void *value, size_t len)
{
    DDP_CHECK(check_key(s, key));
    if (len > DDP_STORE_MAX_VALUE)
        return DDP_ERR(DDP_FAIL, "internal error: store value for '%.*s' is %zu bytes (at most %u)", SHOWN, key,
                       len, DDP_STORE_MAX_VALUE);
    DdpStoreMessage m;
    return request(s, DDP_STORE_SET, key, value, len, 0, &m);
}

DdpStatus ddp_store_add(DdpStore *s, const char *key, int64_t delta, int64_t *result)
{
    DDP_CHECK(check_key(s, key));
    unsigned char bytes[8];
    put_u64(bytes, (uint64_t)delta);
    DdpStoreMessage m;
    DDP_CHECK(request(s, DDP_STORE_ADD, key, bytes, 8, 0, &m));
    *result = (int64_t)get_u64(m.value);
    return DDP_OK;
}

/* GET waiting at most WAIT_S: *found 0 on a timeout (no error recorded). */
static DdpStatus get_within(DdpStore *s, const char *key, double wait_s, DdpStoreMessage *m, int *found)
{
    DDP_CHECK(check_key(s, key));
    double ms = wait_s * 1000.0;
    unsigned char wait[4];
    put_u32(wait, ms <= 0 ? 0 : ms >= 4e9 ? 4000000000u : (uint32_t)ms);
    DDP_CHECK(request(s, DDP_STORE_GET, key, wait, 4, wait_s, m));
    *found = m->type == DDP_STORE_VALUE;
    return DDP_OK;
}

DdpStatus ddp_store_try_get(DdpStore *s, const char *key, double wait_s, void *value, size_t *len, int *found)
{
    DdpStoreMessage m;
    DDP_CHECK(get_within(s, key, wait_s, &m, found));
    if (!*found)
        return DDP_OK;
    if (m.value_len > *len)
        return DDP_ERR(DDP_FAIL, "'%.*s' in the store holds %zu bytes, more than the %zu expected", SHOWN, key,
                       m.value_len, *len);
    if (m.value_len)
        memcpy(value, m.value, m.value_len);
    *len = m.value_len;
    return DDP_OK;
}

DdpStatus ddp_store_get(DdpStore *s, const char *key, void *value, size_t *len)
{
    int found;
    DDP_CHECK(ddp_store_try_get(s, key, s ? s->timeout_s : 0, value, len, &found));
    if (!found)
        return DDP_ERR(DDP_FAIL, "rank %d waited %g s for '%.*s' in the store at %s, and no rank set it", s->rank,
                       s->timeout_s, SHOWN, key, s->where);
    return DDP_OK;
}

/* A barrier on the counter KEY within WAIT_S; *arrived is how many of the
 * round were there when it returned (world_size when it passed). */
static DdpStatus barrier_within(DdpStore *s, const char *key, double wait_s, int *arrived)
{
    int64_t n;
    DDP_CHECK(ddp_store_add(s, key, 1, &n));
    int64_t round = (n - 1) / s->world_size;
    char done[DDP_STORE_MAX_KEY + 32];
    snprintf(done, sizeof done, "%s/%lld", key, (long long)round);
    if (strlen(done) > DDP_STORE_MAX_KEY)
        return DDP_ERR(DDP_FAIL, "internal error: barrier key '%.*s' too long", SHOWN, key);
    if (n % s->world_size == 0)
        DDP_CHECK(ddp_store_set(s, done, "", 0));
    DdpStoreMessage m;
    int found;
    DDP_CHECK(get_within(s, done, wait_s, &m, &found));
    if (found) {
        *arrived = s->world_size;
        return DDP_OK;
    }
    DDP_CHECK(ddp_store_add(s, key, 0, &n));
    int64_t here = n - round * s->world_size;
    *arrived = here < 0 ? 0 : here > s->world_size ? s->world_size : (int)here;
    return DDP_OK;
}

DdpStatus ddp_store_barrier(DdpStore *s, const char *name)
{
    char key[DDP_STORE_MAX_KEY + 32];
    snprintf(key, sizeof key, "ddp/barrier/%s", name);
    if (strlen(key) > DDP_STORE_MAX_KEY - 24)
        return DDP_ERR(DDP_FAIL, "internal error: barrier name '%.*s' too long", SHOWN, name);
    DDP_CHECK(check_key(s, key));
    int arrived;
    DDP_CHECK(barrier_within(s, key, s->timeout_s, &arrived));
    if (arrived < s->world_size)
        return DDP_ERR(DDP_FAIL, "barrier '%.*s' timed out after %g s: %d of %d ranks arrived (store at %s)", SHOWN,
                       name, s->timeout_s, arrived, s->world_size, s->where);
    return DDP_OK;
}

/* A client of T's store, not yet connected; NULL when out of memory. */
static DdpStore *new_client(const DdpTopology *t, double timeout_s)
{
    DdpStore *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->fd = -1;
    s->timeout_s = timeout_s;
    s->rank = t->rank;
    s->world_size = t->world_size;
    snprintf(s->where, sizeof s->where, strchr(t->master_addr, ':') ? "[%s]:%d" : "%s:%d", t->master_addr,
             t->master_port);
    return s;
}

DdpStatus ddp_store_open(DdpStore **store, const DdpTopology *t, double timeout_s)
{
    *store = NULL;
    if (!t->master_addr[0] || t->master_port < 1 || t->master_port > 65535)
        return DDP_ERR(DDP_FAIL, "internal error: the store needs MASTER_ADDR and MASTER_PORT");
    if (!(timeout_s > 0))
        return DDP_ERR(DDP_FAIL, "internal error: store timeout %g s", timeout_s);
    double deadline = ddp_now() + timeout_s;
    DdpStore *s = new_client(t, timeout_s);
    if (!s)
        return DDP_ERR(DDP_FAIL, "out of memory opening the store");

    DdpStatus st = DDP_OK;
    if (t->rank == 0)
        st = server_start(&s->server, t->master_addr, t->master_port, t->world_size);
    if (st == DDP_OK)
        st = client_connect(s, t->master_addr, t->master_port, deadline);
    if (st == DDP_OK) {
        /* Everyone in: a barrier whose key names the world size, so that ranks
         * of another run that found this port by mistake wait apart. */
        char key[64];
        snprintf(key, sizeof key, "ddp/open/%d", t->world_size);
        int arrived;
        double left = deadline - ddp_now();
        st = barrier_within(s, key, left > 0 ? left : 0, &arrived);
        if (st == DDP_OK && arrived < t->world_size)
            st = DDP_ERR(DDP_FAIL, "only %d of %d ranks reached the store at %s within %g s", arrived,
                         t->world_size, s->where, timeout_s);
    }
    if (st != DDP_OK) {
        /* Keep the message: closing must not overwrite it. */
        char message[1024];
        snprintf(message, sizeof message, "%s", ddp_error_message());
        s->timeout_s = 0; /* no drain on a failed open */
        ddp_store_close(s);
        return DDP_ERR(st, "%s", message);
    }
    *store = s;
    return DDP_OK;
}

DdpStatus ddp_store_connect(DdpStore **store, const DdpTopology *t, double timeout_s)
{
    *store = NULL;
    if (!t->master_addr[0] || t->master_port < 1 || t->master_port > 65535 || !(timeout_s > 0))
        return DDP_ERR(DDP_FAIL, "internal error: a store connection needs MASTER_ADDR, MASTER_PORT and a timeout");
    DdpStore *s = new_client(t, timeout_s);
    if (!s)
        return DDP_ERR(DDP_FAIL, "out of memory opening the store");
    DdpStatus st = client_connect(s, t->master_addr, t->master_port, ddp_now() + timeout_s);
    if (st != DDP_OK) {
        char message[1024];
        snprintf(message, sizeof message, "%s", ddp_error_message());
        ddp_store_close(s);
        return DDP_ERR(st, "%s", message);
    }
    *store = s;
    return DDP_OK;
}

void ddp_store_close(DdpStore *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    if (s->server)
        server_stop(s->server, s->timeout_s < DRAIN_MAX_S ? s->timeout_s : DRAIN_MAX_S);
    free(s->buf);
    free(s);
}

unsigned long ddp_store_peers_dropped(const DdpStore *s)
{
    return s && s->server ? atomic_load(&s->server->dropped) : 0;
}
