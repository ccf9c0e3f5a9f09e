/*
 * Tests of runtime/store.c, store_server.c and store_wire.c: the start-up
 * key-value store, over loopback.
 *
 * Ranks are forked processes, as in a real run (rank 0 serves from this
 * process, so the tests can ask its server how many peers it dropped). They
 * are forked before rank 0 opens the store, so no child inherits a copy of
 * a running server thread. What they check: keys exchanged among two, four
 * and eight ranks; a GET that waits for a later SET; barriers, reused; each
 * failure a user can meet (a key that never comes, a barrier or a world that
 * never fills, a port in use, nobody listening), each within its timeout and
 * with a message naming the address; rank 0 serving on the socket the local
 * launcher hands it; the open in two halves (serve, then open) owning its
 * server; hostile peers (random bytes, wrong
 * magic or version, huge lengths, half messages, idle connections by the
 * hundred) while honest ranks keep working; and the parser on a corpus of
 * malformed messages. Every timeout is short (1 s) so the suite stays fast.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>  // kill: the stand-in for another program
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"       // the store
#include "store_server.h"  // DDP_STORE_LISTEN_FD_ENV
#include "store_wire.h"  // its wire format
#include "testutil.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether a wait of WAITED seconds was ended by a timeout of 1 s, the one
 * these tests give the store: not before it, and before the client's own
 * fallback (timeout + 5 s, store.h) or any default would have ended it, with
 * seconds to spare for a loaded machine. */
static int ended_by_one_second_timeout(double waited) { return waited > 0.9 && waited < 5.0; }

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A socket bound to 127.0.0.1 on the kernel's pick of a port (*PORT), or
 * -1. */
static int loopback_bound(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
        *port = ntohs(a.sin_port);
        return fd;
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

/* A loopback port nobody listens on (now). */
static int free_port(void)
{
    int port = -1, fd = loopback_bound(&port);
    if (fd >= 0)
        close(fd);
    return port;
}

static DdpTopology topology(int rank, int world, int port)
{
    DdpTopology t = {.rank = rank, .world_size = world, .local_rank = rank, .local_world_size = world,
                     .master_port = port, .launch = DDP_LAUNCH_FLAGS};
    snprintf(t.master_addr, sizeof t.master_addr, "127.0.0.1");
    return t;
}

static int has(const char *text, const char *what)
{
    if (strstr(text, what))
        return 1;
    fprintf(stderr, "\nmessage \"%s\" lacks \"%s\"\n", text, what);
    return 0;
}

/* A rank's part of a test: 0 if it went as expected, else says why. */
typedef int (*RankFn)(DdpStore *s, int rank, int world);

#define RANK_CHECK(cond)                                                                             \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "\nrank %d: %s:%d: %s (%s)\n", rank, __FILE__, __LINE__, #cond,          \
                    ddp_error_message());                                                            \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

static int run_rank(int rank, int world, int port, double timeout, RankFn fn)
{
    DdpTopology t = topology(rank, world, port);
    DdpStore *s;
    if (ddp_store_open(&s, &t, timeout) != DDP_OK) {
        fprintf(stderr, "\nrank %d: %s\n", rank, ddp_error_message());
        return 10;
    }
    int rc = fn(s, rank, world);
    ddp_store_close(s);
    return rc;
}

/* Ranks 1.. in children, rank 0 here, the store on PORT; returns how many
 * failed. */
static int run_world_on(int port, int world, double timeout, RankFn fn)
{
    pid_t pids[16];
    fflush(NULL);
    for (int r = 1; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(run_rank(r, world, port, timeout, fn));
    }
    int failed = run_rank(0, world, port, timeout, fn) != 0;
    for (int r = 1; r < world; r++) {
        int status;
        if (pids[r] < 0 || waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed++;
    }
    return failed;
}

static int run_world(int world, double timeout, RankFn fn) { return run_world_on(free_port(), world, timeout, fn); }

/* ---- ranks working together ------------------------------------------------------ */

static int exchange(DdpStore *s, int rank, int world)
{
    char key[32], value[64], got[64];
    snprintf(key, sizeof key, "key/%d", rank);
    int n = snprintf(value, sizeof value, "the value of rank %d", rank);
    RANK_CHECK(ddp_store_set(s, key, value, (size_t)n) == DDP_OK);
    RANK_CHECK(ddp_store_barrier(s, "set") == DDP_OK);
    for (int r = 0; r < world; r++) {
        snprintf(key, sizeof key, "key/%d", r);
        n = snprintf(value, sizeof value, "the value of rank %d", r);
        size_t len = sizeof got;
        RANK_CHECK(ddp_store_get(s, key, got, &len) == DDP_OK);
        RANK_CHECK(len == (size_t)n && memcmp(got, value, len) == 0);
    }
    RANK_CHECK(ddp_store_barrier(s, "done") == DDP_OK);
    return 0;
}

static void test_two(void) { CU_ASSERT(run_world(2, 5, exchange) == 0); }
static void test_four(void) { CU_ASSERT(run_world(4, 5, exchange) == 0); }
static void test_eight(void) { CU_ASSERT(run_world(8, 5, exchange) == 0); }

/* Rank 1 asks before rank 0 has set: the GET waits for the SET. Rank 0
 * sets 1 s after the barrier; rank 1, which on a busy machine may leave the
 * barrier a few hundred ms after rank 0, must still wait over 0.5 s. */
static int late_set(DdpStore *s, int rank, int world)
{
    (void)world;
    RANK_CHECK(ddp_store_barrier(s, "start") == DDP_OK);
    if (rank == 0) {
        sleep_s(1.0);
        RANK_CHECK(ddp_store_set(s, "late", "here", 4) == DDP_OK);
    } else {
        double t0 = now_s();
        char got[8];
        size_t len = sizeof got;
        RANK_CHECK(ddp_store_get(s, "late", got, &len) == DDP_OK);
        double waited = now_s() - t0;
        RANK_CHECK(len == 4 && memcmp(got, "here", 4) == 0);
        RANK_CHECK(waited > 0.5 && waited < 3.0);
    }
    return 0;
}

static void test_get_waits(void) { CU_ASSERT(run_world(2, 5, late_set) == 0); }

/* One name, several rounds, arrivals staggered: nobody passes round I before
 * everyone has counted in for it. */
static int rounds(DdpStore *s, int rank, int world)
{
    for (int i = 0; i < 5; i++) {
        if ((i + rank) % 2)
            sleep_s(0.02 * rank);
        int64_t n;
        RANK_CHECK(ddp_store_add(s, "arrived", 1, &n) == DDP_OK);
        RANK_CHECK(ddp_store_barrier(s, "loop") == DDP_OK);
        RANK_CHECK(ddp_store_add(s, "arrived", 0, &n) == DDP_OK);
        RANK_CHECK(n >= (int64_t)(i + 1) * world);
    }
    return 0;
}

static void test_barrier(void) { CU_ASSERT(run_world(4, 5, rounds) == 0); }

/* ---- what goes wrong, within the timeout ------------------------------------------- */

static DdpStore *open_alone(double timeout, int *port)
{
    *port = free_port();
    DdpTopology t = topology(0, 1, *port);
    DdpStore *s = NULL;
    CU_ASSERT(ddp_store_open(&s, &t, timeout) == DDP_OK);
    return s;
}

static void test_key_never_set(void)
{
    int port;
    DdpStore *s = open_alone(1, &port);
    CU_ASSERT_FATAL(s != NULL);
    char got[8];
    size_t len = sizeof got;
    double t0 = now_s();
    CU_ASSERT(ddp_store_get(s, "never", got, &len) == DDP_FAIL);
    double waited = now_s() - t0;
    CU_ASSERT(ended_by_one_second_timeout(waited));
    CU_ASSERT(has(ddp_error_message(), "waited 1 s for 'never' in the store at 127.0.0.1:"));
    /* The connection is still in step: the store goes on working. */
    CU_ASSERT(ddp_store_set(s, "after", "ok", 2) == DDP_OK);
    len = sizeof got;
    CU_ASSERT(ddp_store_get(s, "after", got, &len) == DDP_OK && len == 2 && memcmp(got, "ok", 2) == 0);
    CU_ASSERT(ddp_store_barrier(s, "alone") == DDP_OK);
    ddp_store_close(s);
}

/* Rank 1 opens the store but never comes to the barrier. */
static int lonely_barrier(DdpStore *s, int rank, int world)
{
    (void)world;
    if (rank == 1) {
        char got[8];
        size_t len = sizeof got;
        for (int i = 0; i < 5 && ddp_store_get(s, "rank 0 is done", got, &len) != DDP_OK; i++)
            len = sizeof got;
        RANK_CHECK(len == 0);
        return 0;
    }
    double t0 = now_s();
    RANK_CHECK(ddp_store_barrier(s, "lonely") == DDP_FAIL);
    double waited = now_s() - t0;
    RANK_CHECK(has(ddp_error_message(), "barrier 'lonely' timed out after 1 s: 1 of 2 ranks arrived"));
    RANK_CHECK(ended_by_one_second_timeout(waited));
    RANK_CHECK(ddp_store_set(s, "rank 0 is done", "", 0) == DDP_OK);
    return 0;
}

static void test_barrier_timeout(void) { CU_ASSERT(run_world(2, 1, lonely_barrier) == 0); }

static void test_world_never_fills(void)
{
    int port = free_port();
    DdpTopology t = topology(0, 3, port);
    DdpStore *s = NULL;
    double t0 = now_s();
    CU_ASSERT(ddp_store_open(&s, &t, 1) == DDP_FAIL);
    double waited = now_s() - t0;
    CU_ASSERT(s == NULL);
    CU_ASSERT(ended_by_one_second_timeout(waited));
    char what[96];
    snprintf(what, sizeof what, "only 1 of 3 ranks reached the store at 127.0.0.1:%d within 1 s", port);
    CU_ASSERT(has(ddp_error_message(), what));
}

static void test_port_in_use(void)
{
    int port = free_port();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0);
    DdpTopology t = topology(0, 2, port);
    DdpStore *s = NULL;
    double t0 = now_s();
    CU_ASSERT(ddp_store_open(&s, &t, 5) == DDP_FAIL);
    CU_ASSERT(now_s() - t0 < 1);
    char what[128];
    snprintf(what, sizeof what, "cannot serve the store on 127.0.0.1:%d: port %d is in use", port, port);
    CU_ASSERT(has(ddp_error_message(), what));
    close(fd);
}

/* A socket listening on 127.0.0.1, on the kernel's pick of a port (*PORT),
 * as the local launcher makes rank 0's. */
static int listener(int *port)
{
    int fd = loopback_bound(port);
    CU_ASSERT_FATAL(fd >= 0 && listen(fd, 4) == 0);
    return fd;
}

static void name_socket(int fd)
{
    char text[16];
    snprintf(text, sizeof text, "%d", fd);
    setenv(DDP_STORE_LISTEN_FD_ENV, text, 1);
}

/* The launcher's socket (DDP_STORE_LISTEN_FD): rank 0 serves on it while
 * this process holds the port too, where a bind would find it in use; what
 * is not a listener on MASTER_PORT is left alone, the port bound as usual;
 * and only the first store of a process takes one. */
static void test_launcher_socket(void)
{
    int pipe_fd[2], other_port;
    CU_ASSERT_FATAL(pipe(pipe_fd) == 0);
    int other = listener(&other_port);
    const int not_ours[] = {pipe_fd[0], other};
    for (int i = 0; i < 2; i++) {
        name_socket(not_ours[i]);
        CU_ASSERT(run_world(2, 5, exchange) == 0);
        CU_ASSERT(fcntl(not_ours[i], F_GETFD) == 0 && !(fcntl(not_ours[i], F_GETFL) & O_NONBLOCK)); /* untouched */
    }
    setenv(DDP_STORE_LISTEN_FD_ENV, "7x", 1);
    CU_ASSERT(run_world(2, 5, exchange) == 0);

    int port, fd = listener(&port);
    name_socket(fd);
    CU_ASSERT(run_world_on(port, 2, 5, exchange) == 0);
    CU_ASSERT(fcntl(fd, F_GETFD) == -1 && errno == EBADF); /* the server took it, and closed it at the end */

    int again_port, again = listener(&again_port);
    name_socket(again);
    DdpTopology t = topology(0, 2, again_port);
    DdpStore *s = NULL;
    CU_ASSERT(ddp_store_open(&s, &t, 1) == DDP_FAIL);
    char what[128];
    snprintf(what, sizeof what, "port %d is in use", again_port);
    CU_ASSERT(has(ddp_error_message(), what));
    unsetenv(DDP_STORE_LISTEN_FD_ENV);
    close(again);
    close(other);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
}

/* ddp_store_serve, then ddp_store_open_served: the store owns the server
 * whether or not the open succeeds (a failed open lets the port go, so it
 * can be served again), and only rank 0 opens with one. */
static void test_served_halves(void)
{
    int port = free_port();
    DdpTopology t = topology(0, 1, port), other = topology(1, 2, port);
    DdpStoreServer *server;
    DdpStore *s = NULL;
    CU_ASSERT_FATAL(ddp_store_serve(&server, &t) == DDP_OK);
    CU_ASSERT(ddp_store_open_served(&s, &t, 0, server) == DDP_FAIL && s == NULL);
    CU_ASSERT(has(ddp_error_message(), "store timeout 0 s"));
    CU_ASSERT_FATAL(ddp_store_serve(&server, &t) == DDP_OK);
    CU_ASSERT(ddp_store_open_served(&s, &other, 1, server) == DDP_FAIL && s == NULL);
    CU_ASSERT(has(ddp_error_message(), "rank 1 opens the store with a server"));
    CU_ASSERT(ddp_store_open_served(&s, &t, 1, NULL) == DDP_FAIL && s == NULL);
    CU_ASSERT(has(ddp_error_message(), "rank 0 opens the store without a server"));
    DdpTopology two = topology(0, 2, port); /* a world that never fills: the barrier fails */
    CU_ASSERT_FATAL(ddp_store_serve(&server, &two) == DDP_OK);
    CU_ASSERT(ddp_store_open_served(&s, &two, 0.2, server) == DDP_FAIL && s == NULL);
    CU_ASSERT(has(ddp_error_message(), "only 1 of 2 ranks reached the store"));
    CU_ASSERT_FATAL(ddp_store_serve(&server, &t) == DDP_OK);
    CU_ASSERT(ddp_store_open_served(&s, &t, 1, server) == DDP_OK && s != NULL);
    CU_ASSERT(ddp_store_set(s, "k", "v", 1) == DDP_OK);
    ddp_store_close(s);
}

static void test_unreachable(void)
{
    int port = free_port();
    DdpTopology t = topology(1, 2, port);
    DdpStore *s = NULL;
    double t0 = now_s();
    CU_ASSERT(ddp_store_open(&s, &t, 1) == DDP_FAIL);
    double waited = now_s() - t0;
    CU_ASSERT(ended_by_one_second_timeout(waited));
    char what[96];
    snprintf(what, sizeof what, "cannot reach 127.0.0.1:%d within 1 s: connection refused", port);
    CU_ASSERT(has(ddp_error_message(), what));
}

static void test_limits(void)
{
    int port;
    DdpStore *s = open_alone(2, &port);
    CU_ASSERT_FATAL(s != NULL);
    size_t big = DDP_STORE_MAX_VALUE;
    unsigned char *value = malloc(big + 1), *got = malloc(big);
    CU_ASSERT_FATAL(value && got);
    for (size_t i = 0; i <= big; i++)
        value[i] = (unsigned char)(i * 7 + 3);
    CU_ASSERT(ddp_store_set(s, "big", value, big) == DDP_OK);
    size_t len = big;
    CU_ASSERT(ddp_store_get(s, "big", got, &len) == DDP_OK && len == big && memcmp(got, value, big) == 0);
    len = 10;
    CU_ASSERT(ddp_store_get(s, "big", got, &len) == DDP_FAIL);
    CU_ASSERT(has(ddp_error_message(), "'big' in the store holds 1048576 bytes, more than the 10 expected"));
    CU_ASSERT(ddp_store_set(s, "bigger", value, big + 1) == DDP_FAIL);
    char key[300];
    memset(key, 'k', sizeof key);
    key[257] = '\0';
    CU_ASSERT(ddp_store_set(s, key, "", 0) == DDP_FAIL);
    CU_ASSERT(has(ddp_error_message(), "is 257 bytes"));
    key[256] = '\0';
    CU_ASSERT(ddp_store_set(s, key, "v", 1) == DDP_OK);
    len = 1;
    CU_ASSERT(ddp_store_get(s, key, got, &len) == DDP_OK && len == 1 && got[0] == 'v');
    int64_t n;
    CU_ASSERT(ddp_store_add(s, "count", 5, &n) == DDP_OK && n == 5);
    CU_ASSERT(ddp_store_add(s, "count", -7, &n) == DDP_OK && n == -2);
    CU_ASSERT(ddp_store_peers_dropped(s) == 0);
    /* ADD on a key that is no counter: the server drops the confused peer. */
    CU_ASSERT(ddp_store_add(s, "big", 1, &n) == DDP_FAIL);
    CU_ASSERT(has(ddp_error_message(), "closed the connection"));
    CU_ASSERT(ddp_store_peers_dropped(s) == 1);
    CU_ASSERT(ddp_store_set(s, "after", "", 0) == DDP_FAIL);
    CU_ASSERT(has(ddp_error_message(), "failed earlier"));
    ddp_store_close(s);
    free(value);
    free(got);
}

/* ---- hostile peers ------------------------------------------------------------------ */

/* A program that is not a store on MASTER_PORT (a web server, say): rank
 * 1's open fails, its message naming the store and the parser's reason,
 * whole, where formatting the reason into the buffer it was read from
 * garbled both. */
static void test_not_a_store(void)
{
    int port;
    int fd = listener(&port);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int peer = accept(fd, NULL, NULL);
        static const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        if (peer >= 0 && write(peer, reply, sizeof reply - 1) > 0)
            sleep(2);
        _exit(0);
    }
    close(fd);
    DdpTopology t = topology(1, 2, port);
    DdpStore *s = NULL;
    CU_ASSERT(ddp_store_open(&s, &t, 1) == DDP_FAIL);
    char what[96];
    snprintf(what, sizeof what, "the store at 127.0.0.1:%d answered with a malformed message (", port);
    const char *message = ddp_error_message();
    int named = strncmp(message, what, strlen(what)) == 0;
    const char *reason = named ? message + strlen(what) : "";
    CU_ASSERT(named && strlen(reason) > 1 && reason[strlen(reason) - 1] == ')' && !strstr(reason, "the store at"));
    if (!named || strlen(reason) <= 1)
        fprintf(stderr, "\n%s\n", message);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* A rank that only opens the store and closes it. */
static int nothing(DdpStore *s, int rank, int world)
{
    (void)s, (void)rank, (void)world;
    return 0;
}

/* Two processes of rank 1 of 3 (one RANK given twice, or a rank of another
 * run on the port): the later, come while the barrier waits for rank 2, is
 * refused, named, and ranks 0, 1 and 2 open, where both would have counted
 * as arrivals. */
static void test_rank_twice(void)
{
    int port = free_port();
    fflush(NULL);
    pid_t ranks[2];
    for (int r = 0; r < 2; r++) {
        ranks[r] = fork();
        if (ranks[r] == 0)
            _exit(run_rank(r, 3, port, 5, nothing));
        usleep(100000); /* rank 0 serves before rank 1 tries */
    }
    /* the second of rank 1 only once the first has claimed it */
    DdpTopology watcher = topology(2, 3, port);
    DdpStore *w = NULL;
    int64_t claims = 0;
    CU_ASSERT_FATAL(ddp_store_connect(&w, &watcher, 5) == DDP_OK);
    for (int i = 0; i < 500 && claims < 1; i++) {
        CU_ASSERT_FATAL(ddp_store_add(w, "ddp/open/3/rank/1", 0, &claims) == DDP_OK);
        if (claims < 1)
            usleep(10000);
    }
    ddp_store_close(w);
    CU_ASSERT_FATAL(claims == 1);
    pid_t again = fork();
    if (again == 0) {
        DdpTopology t = topology(1, 3, port);
        DdpStore *s = NULL;
        DdpStatus st = ddp_store_open(&s, &t, 5);
        char what[128];
        snprintf(what, sizeof what, "rank 1 of 3 reached the store at 127.0.0.1:%d after another process of that "
                 "rank", port);
        if (st != DDP_FAIL || !has(ddp_error_message(), what))
            fprintf(stderr, "\nrank 1 again: status %d, %s\n", (int)st, ddp_error_message());
        _exit(st == DDP_FAIL && has(ddp_error_message(), what) ? 0 : 1);
    }
    int status;
    CU_ASSERT(waitpid(again, &status, 0) == again && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT(run_rank(2, 3, port, 5, nothing) == 0);
    for (int r = 0; r < 2; r++)
        CU_ASSERT(waitpid(ranks[r], &status, 0) == ranks[r] && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void raw_send(int fd, const void *bytes, size_t len)
{
    CU_ASSERT(send(fd, bytes, len, MSG_NOSIGNAL) == (ssize_t)len);
}

/* 1 if the server closes FD within 2 s (reading and discarding what comes). */
static int closed_by_server(int fd)
{
    double end = now_s() + 2;
    char buf[256];
    while (now_s() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) == 1) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n == 0 || (n < 0 && errno == ECONNRESET))
                return 1;
        }
    }
    return 0;
}

/* A header with these fields, for the lies hostile peers tell. */
static size_t header(unsigned char *b, const char *magic, unsigned version, unsigned type, unsigned key_len,
                     uint32_t value_len)
{
    memcpy(b, magic, 4);
    b[4] = (unsigned char)version;
    b[5] = (unsigned char)(version >> 8);
    b[6] = (unsigned char)type;
    b[7] = (unsigned char)key_len;
    b[8] = (unsigned char)(key_len >> 8);
    for (int i = 0; i < 4; i++)
        b[9 + i] = (unsigned char)(value_len >> (8 * i));
    return DDP_STORE_HEADER;
}

/* The honest rank 1: many rounds of work with rank 0 while the attacks go on. */
static int honest(DdpStore *s, int rank, int world)
{
    (void)world;
    char got[32];
    size_t len = sizeof got;
    RANK_CHECK(ddp_store_get(s, "go", got, &len) == DDP_OK);
    for (int i = 0; i < 20; i++) {
        char key[32], value[32];
        snprintf(key, sizeof key, "r%d/%d", rank, i);
        int n = snprintf(value, sizeof value, "v%d", i);
        RANK_CHECK(ddp_store_set(s, key, value, (size_t)n) == DDP_OK);
        snprintf(key, sizeof key, "r%d/%d", 1 - rank, i);
        len = sizeof got;
        RANK_CHECK(ddp_store_get(s, key, got, &len) == DDP_OK && len == (size_t)n && memcmp(got, value, len) == 0);
        RANK_CHECK(ddp_store_barrier(s, "round") == DDP_OK);
    }
    return 0;
}

static void test_hostile_peers(void)
{
    int port = free_port();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(run_rank(1, 2, port, 5, honest));
    DdpTopology t = topology(0, 2, port);
    DdpStore *s = NULL;
    CU_ASSERT_FATAL(ddp_store_open(&s, &t, 5) == DDP_OK);

    /* Each of these breaks the protocol, and the server must drop it. */
    unsigned char b[4096];
    int bad[16], nbad = 0;
    srand(7);
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)rand();
    b[0] = 'X'; /* random bytes */
    bad[nbad] = raw_connect(port);
    raw_send(bad[nbad++], b, 1000);
    bad[nbad] = raw_connect(port); /* a web browser */
    raw_send(bad[nbad++], "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
    const struct {
        const char *magic;
        unsigned version, type, key_len;
        uint32_t value_len;
    } lies[] = {
        {"DDPX", DDP_STORE_VERSION, DDP_STORE_SET, 1, 1},            /* wrong magic */
        {"DDPS", 2, DDP_STORE_SET, 1, 1},                            /* a newer ddp */
        {"DDPS", 0x0100, DDP_STORE_SET, 1, 1},                       /* wrong endianness */
        {"DDPS", DDP_STORE_VERSION, 0x7f, 1, 1},                     /* unknown type */
        {"DDPS", DDP_STORE_VERSION, DDP_STORE_SET, 0xffff, 1},       /* huge key */
        {"DDPS", DDP_STORE_VERSION, DDP_STORE_SET, 1, 0xffffffffu},  /* huge value */
        {"DDPS", DDP_STORE_VERSION, DDP_STORE_SET, 1, (1u << 20) + 1}, /* just too big */
        {"DDPS", DDP_STORE_VERSION, DDP_STORE_GET, 1, 3},            /* GET's wait is 4 bytes */
        {"DDPS", DDP_STORE_VERSION, DDP_STORE_SET, 0, 0},            /* no key */
    };
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        bad[nbad] = raw_connect(port);
        raw_send(bad[nbad++], b, header(b, lies[i].magic, lies[i].version, lies[i].type, lies[i].key_len,
                                        lies[i].value_len));
    }
    /* A well-formed reply sent as a request. */
    size_t n = ddp_store_encode(b, sizeof b, DDP_STORE_OK, NULL, 0, NULL, 0);
    bad[nbad] = raw_connect(port);
    raw_send(bad[nbad++], b, n);
    /* A good message, then garbage on the same connection. */
    n = ddp_store_encode(b, sizeof b, DDP_STORE_SET, "fine", 4, "1", 1);
    memcpy(b + n, "garbage", 7);
    bad[nbad] = raw_connect(port);
    raw_send(bad[nbad++], b, n + 7);

    /* Not malformed, only unfinished: held open, or abandoned. */
    int idle[200], nidle = 0;
    for (; nidle < 200; nidle++)
        idle[nidle] = raw_connect(port);
    int half = raw_connect(port);
    raw_send(half, "DDP", 3);
    int slow = raw_connect(port);
    n = ddp_store_encode(b, sizeof b, DDP_STORE_SET, "slow", 4, "0123456789", 10);
    raw_send(slow, b, n - 5);
    for (int i = 0; i < 3; i++) { /* truncated, then gone */
        int fd = raw_connect(port);
        n = ddp_store_encode(b, sizeof b, DDP_STORE_SET, "gone", 4, "0123456789", 10);
        raw_send(fd, b, (size_t)(i * 9 + 2));
        close(fd);
    }
    /* Random bytes after a valid magic and version: whatever they say, the
     * server must go on (these are not counted: some parse as valid). */
    int noise[20];
    for (int i = 0; i < 20; i++) {
        noise[i] = raw_connect(port);
        for (size_t j = 0; j < 64; j++)
            b[j] = (unsigned char)rand();
        memcpy(b, "DDPS\x01\x00", 6);
        raw_send(noise[i], b, 64);
    }
    /* A raw but honest client gets its answer. */
    int raw = raw_connect(port);
    n = ddp_store_encode(b, sizeof b, DDP_STORE_SET, "raw", 3, "x", 1);
    raw_send(raw, b, n);
    unsigned char reply[DDP_STORE_HEADER];
    struct pollfd p = {.fd = raw, .events = POLLIN};
    CU_ASSERT(poll(&p, 1, 2000) == 1 && recv(raw, reply, sizeof reply, MSG_WAITALL) == DDP_STORE_HEADER);
    DdpStoreMessage m;
    CU_ASSERT(ddp_store_parse(reply, sizeof reply, &m) == DDP_STORE_HEADER && m.type == DDP_STORE_OK);

    /* Through all of it, rank 0 and rank 1 work together. */
    CU_ASSERT(ddp_store_set(s, "go", "", 0) == DDP_OK);
    CU_ASSERT(honest(s, 0, 2) == 0);

    for (int i = 0; i < nbad; i++) {
        CU_ASSERT(closed_by_server(bad[i]));
        close(bad[i]);
    }
    CU_ASSERT(ddp_store_peers_dropped(s) >= (unsigned long)nbad);
    for (int i = 0; i < nidle; i++)
        close(idle[i]);
    for (int i = 0; i < 20; i++)
        close(noise[i]);
    close(half);
    close(slow);
    close(raw);
    int status;
    CU_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    double t0 = now_s();
    ddp_store_close(s);
    CU_ASSERT(now_s() - t0 < 2); /* everyone had gone: no drain to wait out */
}

/* ---- the parser ------------------------------------------------------------------------ */

static void test_parse_valid(void)
{
    unsigned char b[512], wait[4] = {0xe8, 0x03, 0, 0}, delta[8] = {1};
    struct {
        int type;
        const char *key;
        const void *value;
        size_t value_len;
    } good[] = {
        {DDP_STORE_SET, "k", "value", 5},  {DDP_STORE_SET, "k", "", 0},   {DDP_STORE_GET, "key", wait, 4},
        {DDP_STORE_ADD, "n", delta, 8},    {DDP_STORE_OK, NULL, NULL, 0}, {DDP_STORE_VALUE, "k", "v", 1},
        {DDP_STORE_TIMEOUT, "k", NULL, 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t key_len = good[i].key ? strlen(good[i].key) : 0;
        size_t n = ddp_store_encode(b, sizeof b, good[i].type, good[i].key, key_len, good[i].value,
                                    good[i].value_len);
        CU_ASSERT(n == DDP_STORE_HEADER + key_len + good[i].value_len);
        /* Every prefix asks for more; the whole is one message; two are one then one. */
        DdpStoreMessage m;
        for (size_t len = 0; len < n; len++)
            CU_ASSERT(ddp_store_parse(b, len, &m) == 0);
        CU_ASSERT(ddp_store_parse(b, n, &m) == (long)n);
        CU_ASSERT(m.type == good[i].type && m.key_len == key_len && m.value_len == good[i].value_len);
        CU_ASSERT(key_len == 0 || memcmp(m.key, good[i].key, key_len) == 0);
        CU_ASSERT(good[i].value_len == 0 || memcmp(m.value, good[i].value, good[i].value_len) == 0);
        memcpy(b + n, b, n);
        CU_ASSERT(ddp_store_parse(b, 2 * n, &m) == (long)n);
    }
    /* The limits themselves are fine. */
    static unsigned char big[DDP_STORE_HEADER + DDP_STORE_MAX_KEY + DDP_STORE_MAX_VALUE];
    char key[DDP_STORE_MAX_KEY];
    memset(key, 'k', sizeof key);
    size_t n = ddp_store_encode(big, sizeof big, DDP_STORE_SET, key, sizeof key, big, DDP_STORE_MAX_VALUE);
    DdpStoreMessage m;
    CU_ASSERT(n == sizeof big && ddp_store_parse(big, n, &m) == (long)n);
    /* ...and what breaks them is never written. */
    CU_ASSERT(ddp_store_encode(big, sizeof big, DDP_STORE_SET, key, sizeof key + 1, "", 0) == 0);
    CU_ASSERT(ddp_store_encode(b, sizeof b, DDP_STORE_SET, "", 0, "", 0) == 0);
    CU_ASSERT(ddp_store_encode(b, sizeof b, DDP_STORE_GET, "k", 1, "", 0) == 0);
    CU_ASSERT(ddp_store_encode(b, sizeof b, 99, "k", 1, "", 0) == 0);
    CU_ASSERT(ddp_store_encode(b, 10, DDP_STORE_SET, "k", 1, "", 0) == 0);
}

static void test_parse_malformed(void)
{
    const struct {
        const char *bytes;
        size_t len;
        const char *message;
    } corpus[] = {
        {"X", 1, "no DDPS magic"},
        {"DDX", 3, "no DDPS magic"},
        {"ddps", 4, "no DDPS magic"},
        {"\0\0\0\0\0\0\0\0\0\0\0\0\0", 13, "no DDPS magic"},
        {"DDPS\x02\x00", 6, "store protocol version 2, expected 1"},
        {"DDPS\x00\x01", 6, "store protocol version 256, expected 1"},
        {"DDPS\x01\x00\x00", 7, "unknown store message type 0"},
        {"DDPS\x01\x00\x04", 7, "unknown store message type 4"},
        {"DDPS\x01\x00\x80", 7, "unknown store message type 128"},
        {"DDPS\x01\x00\xff", 7, "unknown store message type 255"},
        {"DDPS\x01\x00\x01\x01\x01\x00\x00\x00\x00", 13, "key longer than 256 bytes"},
        {"DDPS\x01\x00\x01\xff\xff\x00\x00\x00\x00", 13, "key longer than 256 bytes"},
        {"DDPS\x01\x00\x01\x01\x00\x01\x00\x10\x00", 13, "value longer than 1 MiB"},
        {"DDPS\x01\x00\x01\x01\x00\xff\xff\xff\xff", 13, "value longer than 1 MiB"},
        {"DDPS\x01\x00\x01\x00\x00\x00\x00\x00\x00", 13, "message without a key"},
        {"DDPS\x01\x00\x02\x01\x00\x00\x00\x00\x00", 13, "GET whose wait is not 4 bytes"},
        {"DDPS\x01\x00\x02\x00\x00\x04\x00\x00\x00", 13, "GET without a key"},
        {"DDPS\x01\x00\x03\x01\x00\x04\x00\x00\x00", 13, "ADD whose delta is not 8 bytes"},
        {"DDPS\x01\x00\x81\x01\x00\x00\x00\x00\x00", 13, "OK with a key or a value"},
        {"DDPS\x01\x00\x83\x01\x00\x01\x00\x00\x00", 13, "TIMEOUT with a value"},
        {"DDPS\x01\x00\x82\x00\x00\x01\x00\x00\x00", 13, "message without a key"},
    };
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
        DdpStoreMessage m;
        ddp_error_clear();
        long r = ddp_store_parse((const unsigned char *)corpus[i].bytes, corpus[i].len, &m);
        CU_ASSERT(r == -1);
        CU_ASSERT(has(ddp_error_message(), corpus[i].message));
    }
    /* Random bytes: never more consumed than given, fields inside the buffer. */
    unsigned char b[64];
    srand(11);
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)rand() % sizeof b;
        for (size_t j = 0; j < len; j++)
            b[j] = (unsigned char)rand();
        if (i % 2 && len >= 6)
            memcpy(b, "DDPS\x01\x00", 6);
        DdpStoreMessage m;
        long r = ddp_store_parse(b, len, &m);
        CU_ASSERT(r >= -1 && r <= (long)len);
        if (r > 0)
            CU_ASSERT((const unsigned char *)m.key + m.key_len <= b + len && m.value + m.value_len <= b + len);
    }
}

/* How long rank 0's close serves ranks still connected: the store's
 * timeout, at most 10 s, so none loses a last reply; none where this rank
 * failed alone (the others close only as they end, which the launcher does
 * only once this rank has: serving them kept every rank alive 10 s more). */
static void test_drain_after_a_failure(void)
{
    CU_ASSERT_EQUAL(ddp_store_drain_s(600, 0), 10);
    CU_ASSERT_EQUAL(ddp_store_drain_s(4, 0), 4);
    CU_ASSERT_EQUAL(ddp_store_drain_s(600, 1), 0);
}

void suite_store(void)
{
    static const TestCase cases[] = {
        {"two ranks exchange keys", test_two},
        {"four ranks exchange keys", test_four},
        {"eight ranks exchange keys", test_eight},
        {"a GET waits for a later SET", test_get_waits},
        {"a barrier reused, arrivals staggered", test_barrier},
        {"rank 0's close serves the others up to 10 s, none after it failed alone", test_drain_after_a_failure},
        {"a key never set: timeout, named; the store still works", test_key_never_set},
        {"a barrier a rank never reaches: timeout, count", test_barrier_timeout},
        {"a world that never fills: open fails, count", test_world_never_fills},
        {"port in use: named with the address", test_port_in_use},
        {"rank 0 serves on the launcher's socket, where it is one on its port", test_launcher_socket},
        {"serve, then open: the store owns the server, opened or not; only rank 0 has one", test_served_halves},
        {"nobody listening: refused within the timeout", test_unreachable},
        {"another program on the port: its reply named malformed, with the reason", test_not_a_store},
        {"a rank reached twice: the later process refused, named", test_rank_twice},
        {"1 MiB values, 256-byte keys, counters; past the limits", test_limits},
        {"hostile peers dropped, honest ranks served", test_hostile_peers},
        {"parser: valid messages, prefixes, pairs, limits", test_parse_valid},
        {"parser: malformed corpus and random bytes", test_parse_malformed},
        {NULL, NULL},
    };
    test_add_suite("store", cases);
}
