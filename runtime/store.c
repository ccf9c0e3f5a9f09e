/*
 * store.c: the start-up key-value store's client (store.h); every rank, rank
 * 0 too, is one, and rank 0's also starts the server (store_server.c).
 *
 * What it is for is small: a few keys (the NCCL unique id, a hash of the net,
 * barriers) exchanged once, before a process group exists. What shapes it is
 * what can go wrong at that moment: rank 0 not up yet (clients retry until the
 * timeout), a rank that never comes (every wait has a deadline, and the
 * message says how many arrived), a port some other program holds (said so,
 * with the address), and anything at all connecting to an open port (a
 * scanner, an old run, a newer ddp: store_wire.c refuses it). So:
 *
 *  - The client is synchronous: one request, one reply, each with a deadline
 *    from the store's timeout, enforced with poll() on a non-blocking socket.
 *    A GET the server holds past its wait comes back as a TIMEOUT reply, so
 *    the connection stays in step.
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
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"         // ddp_now, ddp_ms_until: monotonic seconds
#include "status.h"        // DDP_ERR, DDP_CHECK, ddp_strerror_lower
#include "store.h"         // DdpStore
#include "store_server.h"  // rank 0's server
#include "store_wire.h"    // DdpStoreMessage, the wire format

/* How long rank 0's close keeps serving ranks that have not closed yet. */
#define DRAIN_MAX_S 10.0
/* How much later than the server's answer to a GET a client gives up. */
#define REPLY_GRACE_S 5.0
#define SHOWN 64

struct DdpStore {
    int fd;
    double timeout_s;
    int rank, world_size;
    int broken;           /* a reply never came: the stream is out of step */
    char where[300];      /* "HOST:PORT", for messages */
    unsigned char *buf;   /* the last reply */
    size_t buf_cap;
    DdpStoreServer *server; /* rank 0 */
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
                        ready = poll(&pfd, 1, ddp_ms_until(deadline));
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
                   s->where, s->timeout_s, gai ? gai : ddp_strerror_lower(err, why, sizeof why));
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
                           ddp_strerror_lower(errno, why, sizeof why));
        }
        struct pollfd pfd = {.fd = s->fd, .events = POLLOUT};
        int ready = poll(&pfd, 1, ddp_ms_until(deadline));
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
            need = ddp_store_message_size(s->buf);
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
            return DDP_ERR(DDP_FAIL, "lost the store at %s: %s", s->where, ddp_strerror_lower(errno, why, sizeof why));
        }
        struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
        if (poll(&pfd, 1, ddp_ms_until(deadline)) == 0) {
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
                       ddp_store_type_name(type), SHOWN, key, ddp_store_type_name(m->type));
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
    ddp_put_u64(bytes, (uint64_t)delta);
    DdpStoreMessage m;
    DDP_CHECK(request(s, DDP_STORE_ADD, key, bytes, 8, 0, &m));
    *result = (int64_t)ddp_get_u64(m.value);
    return DDP_OK;
}

/* GET waiting at most WAIT_S: *found 0 on a timeout (no error recorded). */
static DdpStatus get_within(DdpStore *s, const char *key, double wait_s, DdpStoreMessage *m, int *found)
{
    DDP_CHECK(check_key(s, key));
    double ms = wait_s * 1000.0;
    unsigned char wait[4];
    ddp_put_u32(wait, ms <= 0 ? 0 : ms >= 4e9 ? 4000000000u : (uint32_t)ms);
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

static DdpStatus check_address(const DdpTopology *t)
{
    if (!t->master_addr[0] || t->master_port < 1 || t->master_port > 65535)
        return DDP_ERR(DDP_FAIL, "internal error: the store needs MASTER_ADDR and MASTER_PORT");
    return DDP_OK;
}

static DdpStatus check_timeout(double timeout_s)
{
    if (!(timeout_s > 0))
        return DDP_ERR(DDP_FAIL, "internal error: store timeout %g s", timeout_s);
    return DDP_OK;
}

DdpStatus ddp_store_serve(DdpStoreServer **server, const DdpTopology *t)
{
    *server = NULL;
    DDP_CHECK(check_address(t));
    return ddp_store_server_start(server, t->master_addr, t->master_port, t->world_size);
}

DdpStatus ddp_store_open(DdpStore **store, const DdpTopology *t, double timeout_s)
{
    *store = NULL;
    DdpStoreServer *server = NULL;
    if (t->rank == 0)
        DDP_CHECK(ddp_store_serve(&server, t));
    return ddp_store_open_served(store, t, timeout_s, server);
}

DdpStatus ddp_store_open_served(DdpStore **store, const DdpTopology *t, double timeout_s, DdpStoreServer *server)
{
    *store = NULL;
    DdpStatus st = check_address(t);
    if (st == DDP_OK)
        st = check_timeout(timeout_s);
    if (st == DDP_OK && (t->rank == 0) != (server != NULL)) /* rank 0 would reach whoever holds the port */
        st = DDP_ERR(DDP_FAIL, "internal error: rank %d opens the store %s a server", t->rank,
                     server ? "with" : "without");
    DdpStore *s = st == DDP_OK ? new_client(t, timeout_s) : NULL;
    if (st == DDP_OK && !s)
        st = DDP_ERR(DDP_FAIL, "out of memory opening the store");
    if (st != DDP_OK) {
        ddp_store_server_stop(server, 0);
        return st;
    }
    double deadline = ddp_now() + timeout_s;
    s->server = server;
    st = client_connect(s, t->master_addr, t->master_port, deadline);
    char key[64];
    if (st == DDP_OK) {
        /* Each rank once: a second process of this rank (one RANK given to
         * two, or a rank of another run of this world size on this port) is
         * refused, where the barrier below would count it as one of ours,
         * and it would take this run's NCCL id. */
        snprintf(key, sizeof key, "ddp/open/%d/rank/%d", t->world_size, t->rank);
        int64_t claims = 0;
        st = ddp_store_add(s, key, 1, &claims);
        if (st == DDP_OK && claims > 1)
            st = DDP_ERR(DDP_FAIL, "rank %d of %d reached the store at %s after another process of that rank: one "
                         "RANK given to two processes, or two runs on one MASTER_PORT", t->rank, t->world_size,
                         s->where);
    }
    if (st == DDP_OK) {
        /* Everyone in: a barrier whose key names the world size, so that ranks
         * of another run that found this port by mistake wait apart. */
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
        char message[DDP_ERROR_MESSAGE_LEN];
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
    DDP_CHECK(check_address(t));
    DDP_CHECK(check_timeout(timeout_s));
    DdpStore *s = new_client(t, timeout_s);
    if (!s)
        return DDP_ERR(DDP_FAIL, "out of memory opening the store");
    DdpStatus st = client_connect(s, t->master_addr, t->master_port, ddp_now() + timeout_s);
    if (st != DDP_OK) {
        char message[DDP_ERROR_MESSAGE_LEN];
        snprintf(message, sizeof message, "%s", ddp_error_message());
        ddp_store_close(s);
        return DDP_ERR(st, "%s", message);
    }
    *store = s;
    return DDP_OK;
}

double ddp_store_drain_s(double timeout_s, int failed_alone)
{
    return failed_alone ? 0 : timeout_s < DRAIN_MAX_S ? timeout_s : DRAIN_MAX_S;
}

void ddp_store_close(DdpStore *s)
{
    ddp_store_close_after(s, 0);
}

void ddp_store_close_after(DdpStore *s, int failed_alone)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    ddp_store_server_stop(s->server, ddp_store_drain_s(s->timeout_s, failed_alone));
    free(s->buf);
    free(s);
}

unsigned long ddp_store_peers_dropped(const DdpStore *s)
{
    return s ? ddp_store_server_dropped(s->server) : 0;
}
