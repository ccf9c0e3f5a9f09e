/*
 * store_server.c: rank 0's side of the start-up store (store_server.h).
 *
 * One thread around poll(): no thread per client, no blocking call, so a peer
 * that sends half a message and sleeps delays nobody. A GET for a missing key
 * is parked on its connection with the deadline the client sent and answered
 * by the SET that supplies the key, or by a TIMEOUT reply when the deadline
 * passes; the client therefore learns of a timeout in a reply, and its
 * connection stays in step and usable (to count who arrived, say). Each
 * connection handles one request at a time: nothing more is read from a peer
 * until its reply is written, which bounds what a greedy peer can make the
 * server hold. A peer that sends anything malformed is closed and counted; it
 * cannot make the server allocate more than one message.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <unistd.h>

#include "clock.h"         // ddp_now, ddp_ms_until
#include "status.h"        // DDP_ERR, ddp_strerror_lower
#include "store_server.h"  // DdpStoreServer
#include "store_wire.h"    // ddp_store_parse, ddp_store_encode, the limits

/* How much the server keeps in all (keys + values + bookkeeping): far more
 * than start-up needs, far less than a flood of SETs could take. */
#define STORE_MAX_BYTES ((size_t)256 << 20)
#define ENTRY_OVERHEAD 64

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

struct DdpStoreServer {
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
};

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
static void peer_drop(DdpStoreServer *sv, Peer *p)
{
    atomic_fetch_add(&sv->dropped, 1);
    peer_close(p);
}

static Entry *find(DdpStoreServer *sv, const char *key, size_t key_len)
{
    for (size_t i = 0; i < sv->nentries; i++)
        if (sv->entries[i].key_len == key_len && memcmp(sv->entries[i].key, key, key_len) == 0)
            return &sv->entries[i];
    return NULL;
}

/* Stores KEY = VALUE; 0 when the store is full (or out of memory). */
static int put(DdpStoreServer *sv, const char *key, size_t key_len, const void *value, size_t value_len)
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
static void wake_waiters(DdpStoreServer *sv, const Entry *e)
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
static void handle(DdpStoreServer *sv, Peer *p, const DdpStoreMessage *m)
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
        p->wdeadline = ddp_now() + ddp_get_u32(m->value) / 1000.0;
        return;
    case DDP_STORE_ADD: {
        e = find(sv, m->key, m->key_len);
        if (e && e->value_len != 8) { /* not a counter: a confused peer */
            peer_drop(sv, p);
            return;
        }
        uint64_t v = (e ? ddp_get_u64(e->value) : 0) + ddp_get_u64(m->value);
        unsigned char bytes[8];
        ddp_put_u64(bytes, v);
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
static void serve(DdpStoreServer *sv, Peer *p)
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
        need = ddp_store_message_size(p->in);
    return need < 4096 ? 4096 : need;
}

/* Reads what P has sent, up to want(P). */
static void receive(DdpStoreServer *sv, Peer *p)
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

static void accept_all(DdpStoreServer *sv)
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
    DdpStoreServer *sv = arg;
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
        int ready = poll(fds, nfds, ddp_ms_until(next));
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

static void server_free(DdpStoreServer *sv)
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

/* Starts SV, listening already, serving on its own thread: *OUT is it;
 * SV is freed if it cannot start. */
static DdpStatus start_serving(DdpStoreServer *sv, DdpStoreServer **out, int world_size)
{
    char why[128];
    if (pipe2(sv->wake, O_CLOEXEC) != 0) {
        int err = errno;
        server_free(sv);
        return DDP_ERR(DDP_FAIL, "cannot start the store: %s", ddp_strerror_lower(err, why, sizeof why));
    }
    allow_descriptors(world_size);

    /* The server thread takes no signals: they are the main thread's to handle. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&sv->thread, NULL, server_main, sv);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        server_free(sv);
        return DDP_ERR(DDP_FAIL, "cannot start the store's thread: %s", ddp_strerror_lower(rc, why, sizeof why));
    }
    *out = sv;
    return DDP_OK;
}

/* The socket the local launcher listened on for this process
 * (DDP_STORE_LISTEN_FD_ENV), where the variable names one listening on
 * PORT; made non-blocking and close-on-exec like one bound here. -1
 * otherwise, and for every later server of the process: bind as usual. */
static int launcher_listener(int port)
{
    static int taken;
    const char *text = getenv(DDP_STORE_LISTEN_FD_ENV);
    if (!text || taken)
        return -1;
    char *end;
    errno = 0;
    long fd = strtol(text, &end, 10);
    if (end == text || *end || errno || fd < 0 || fd > INT_MAX)
        return -1;
    int listening = 0;
    socklen_t len = sizeof listening;
    struct sockaddr_storage a;
    socklen_t a_len = sizeof a;
    if (getsockopt((int)fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
        getsockname((int)fd, (struct sockaddr *)&a, &a_len) != 0)
        return -1;
    int bound = a.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&a)->sin_port)
                : a.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&a)->sin6_port)
                                          : -1;
    int flags = fcntl((int)fd, F_GETFL);
    if (bound != port || flags < 0 || fcntl((int)fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
        fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0)
        return -1;
    taken = 1;
    return (int)fd;
}

DdpStatus ddp_store_server_start(DdpStoreServer **out, const char *host, int port, int world_size)
{
    char where[300], why[128];
    snprintf(where, sizeof where, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    DdpStoreServer *sv = calloc(1, sizeof *sv);
    if (!sv)
        return DDP_ERR(DDP_FAIL, "out of memory starting the store");
    sv->listen_fd = sv->wake[0] = sv->wake[1] = -1;
    atomic_init(&sv->dropped, 0);
    atomic_init(&sv->drain_s, 0.0);

    sv->listen_fd = launcher_listener(port);
    if (sv->listen_fd >= 0)
        return start_serving(sv, out, world_size);
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
        return DDP_ERR(DDP_FAIL, "cannot serve the store on %s: %s", where, ddp_strerror_lower(err, why, sizeof why));
    }
    return start_serving(sv, out, world_size);
}

void ddp_store_server_stop(DdpStoreServer *sv, double drain_s)
{
    if (!sv)
        return;
    atomic_store(&sv->drain_s, drain_s);
    char byte = 0;
    ssize_t n;
    do
        n = write(sv->wake[1], &byte, 1); /* the pipe orders drain_s before the thread reads it */
    while (n < 0 && errno == EINTR);
    pthread_join(sv->thread, NULL);
    server_free(sv);
}

unsigned long ddp_store_server_dropped(const DdpStoreServer *sv)
{
    return sv ? atomic_load(&sv->dropped) : 0;
}
