/* The shared-memory engine end to end with forked processes: segment set-up
 * and unlink, thousands of back-to-back collectives with exact results (no
 * lost or repeated update), an unusable directory, a peer that dies, and a
 * segment from a mismatched build. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fabric_reap.h"
#include "accel/hier_accel.h"
#include "comm/hier_comm.h"
#include "base/hier_params.h"
#include "shm/hier_shm.h"
#include "test_dev_backend.h"

/* The glue's services (bcast, agree), over an anonymous shared mapping. */
typedef struct {
    _Atomic int arrived;
    _Atomic int generation;
    int nranks;
    int values[64];
    char buf[4096];
} fork_world_t;

typedef struct {
    fork_world_t *w;
    int me;
} fork_rank_t;

static void fork_barrier(fork_world_t *w)
{
    int gen = atomic_load(&w->generation);
    if (atomic_fetch_add(&w->arrived, 1) == w->nranks - 1) {
        atomic_store(&w->arrived, 0);
        atomic_fetch_add(&w->generation, 1);
    } else {
        while (atomic_load(&w->generation) == gen) sched_yield();
    }
}

static int fork_allgather(const void *sbuf, void *rbuf, size_t len, void *arg)
{
    fork_rank_t *r = arg;
    if (len * (size_t)r->w->nranks > sizeof(r->w->buf)) return -1;
    memcpy(r->w->buf + (size_t)r->me * len, sbuf, len);
    fork_barrier(r->w);
    memcpy(rbuf, r->w->buf, len * (size_t)r->w->nranks);
    fork_barrier(r->w);
    return 0;
}

static int fork_agree(int *value, void *arg)
{
    fork_rank_t *r = arg;
    r->w->values[r->me] = *value;
    fork_barrier(r->w);
    for (int i = 0; i < r->w->nranks; i++)
        if (r->w->values[i] < *value) *value = r->w->values[i];
    fork_barrier(r->w);
    return 0;
}

static int count_segments(void)
{
    int n = 0;
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "coll-hier-", 10)) n++;
    if (d) closedir(d);
    return n;
}

typedef int (*rank_body_t)(hier_comm_t *comm, int me, int n, fork_world_t *w);

/* Ranks per node for the next run_ranks: 0 = all on one node; K = nodes of
 * K consecutive ranks, joined by the libfabric provider in hier_params. */
static int fork_ranks_per_node;

/* Fork n ranks running body; returns how many exited with status 0. */
static int run_ranks(int n, rank_body_t body, int *statuses)
{
    fork_world_t *w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pids[64];
    int ok = 0;
    memset(w, 0, sizeof(*w));
    w->nranks = n;
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            fork_rank_t fr = {w, r};
            prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* let siblings read us (Yama ptrace_scope 1) */
            prctl(PR_SET_PDEATHSIG, SIGKILL);          /* a test killed on timeout takes its ranks along */
            hier_comm_ops_t ops = {.allgather = fork_allgather, .agree = fork_agree, .progress = NULL, .arg = &fr};
            hier_comm_t *comm;
            int node = fork_ranks_per_node ? r / fork_ranks_per_node : -1;
            if (hier_comm_create(n, r, node, &ops, &comm) != HIER_OK) _exit(3);
            int rc = body(comm, r, n, w);
            hier_comm_destroy(comm);
            hier_core_finalize(); /* closes the endpoint: the shm provider leaves a file behind otherwise */
            _exit(rc);
        }
    }
    for (int r = 0; r < n; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        fabric_reap(pids[r]);
        statuses[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        ok += statuses[r] == 0;
    }
    munmap(w, sizeof(*w));
    return ok;
}

static void setup(void)
{
    hier_params_defaults(&hier_params);
    hier_params.shm_chunk_size = 4096;
    hier_params.spin_count = 50;
    hier_params.cma = 1; /* forked siblings may read each other: exercise single copy too */
}

TestSuite(shm, .init = setup, .timeout = 60);

/* 3000 collectives back to back, all algorithms, sizes from 1 element to
 * several chunks; every element checked exactly (int64 sums). */
static int many_collectives(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    (void)w;
    static int64_t s[6000], r[6000 * 8];
    size_t rcounts[64];
    int single_copies = 0, low_latency = 0;
    for (int it = 0; it < 3000; it++) {
        /* every fourth call small enough for the low-latency path */
        size_t count = it % 4 == 3 ? 1 + (size_t)(it % 100) : 1 + (size_t)(it * 7919 % 5000);
        hier_path_t path;
        static const int algos[] = {HIER_ALGO_AUTO, HIER_ALGO_FLAT, HIER_ALGO_RSAG, HIER_ALGO_NUMA, HIER_ALGO_CMA,
                                    HIER_ALGO_LL};
        hier_params.allreduce_algorithm = algos[it % 6];
        hier_params.allgather_algorithm = it % 7 < 2 ? HIER_ALGO_CMA : it % 7 < 4 ? HIER_ALGO_LL : HIER_ALGO_SHM;
        hier_params.reduce_scatter_algorithm = it % 11 < 5 ? HIER_ALGO_CMA : HIER_ALGO_AUTO;
        for (size_t i = 0; i < count; i++) s[i] = (int64_t)(me + 1) * (int64_t)(it + (int)i);
        switch (it % 3) {
        case 0:
            if (hier_comm_allreduce(comm, s, r, count, HIER_DT_INT64, HIER_OP_SUM, &path) != HIER_OK) return 10;
            for (size_t i = 0; i < count; i++)
                if (r[i] != (int64_t)n * (n + 1) / 2 * (it + (int)i)) return 11;
            break;
        case 1:
            if (hier_comm_allgather(comm, s, r, count * sizeof(int64_t), &path) != HIER_OK) return 20;
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < count; i++)
                    if (r[(size_t)j * count + i] != (int64_t)(j + 1) * (it + (int)i)) return 21;
            break;
        default: {
            size_t total = 0, mine = 0;
            for (int j = 0; j < n; j++) {
                rcounts[j] = (count + (size_t)j * 3) / (size_t)n;
                if (j < me) mine += rcounts[j];
                total += rcounts[j];
            }
            for (size_t i = 0; i < total; i++) s[i] = (int64_t)(me + 1) * (int64_t)(it + (int)i);
            if (hier_comm_reduce_scatter(comm, s, r, rcounts, HIER_DT_INT64, HIER_OP_SUM, &path) != HIER_OK)
                return 30;
            for (size_t i = 0; i < rcounts[me]; i++)
                if (r[i] != (int64_t)n * (n + 1) / 2 * (it + (int)(mine + i))) return 31;
        }
        }
        single_copies += path == HIER_PATH_CMA_RSAG || path == HIER_PATH_CMA_COPY || path == HIER_PATH_CMA_RS;
        low_latency += path == HIER_PATH_SHM_LL;
    }
    if (low_latency < 150) return 41;   /* the low-latency path ran too */
    return single_copies > 300 ? 0 : 40; /* and the single-copy schedules */
}

Test(shm, thousands_of_collectives_exact_and_nothing_left)
{
    int before = count_segments(), st[64];
    for (int n = 2; n <= 5; n += 3) {
        int ok = run_ranks(n, many_collectives, st);
        for (int r = 0; r < n; r++) cr_expect_eq(st[r], 0, "n %d rank %d exited with %d", n, r, st[r]);
        cr_assert_eq(ok, n);
    }
    cr_assert_eq(count_segments(), before, "segments left in /dev/shm");
}

/* The segment's name is gone as soon as set-up finished. */
static int unlinked_after_setup(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x = me, y;
    hier_path_t path;
    int before = count_segments();
    (void)n;
    if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &path) != HIER_OK) return 1;
    fork_barrier(w);
    return count_segments() <= before ? 0 : 2;
}

Test(shm, name_unlinked_once_everyone_attached)
{
    int st[64];
    cr_assert_eq(run_ranks(3, unlinked_after_setup, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

static int unusable_dir(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x = me, y;
    hier_path_t path = HIER_PATH_COUNT;
    (void)n, (void)w;
    hier_params.shm_dir = "/nonexistent/coll-hier-test";
    for (int i = 0; i < 3; i++) { /* stays a fallback, consistently on every rank */
        if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &path) != HIER_ERR_NOT_SUPPORTED)
            return 1;
        if (path != HIER_PATH_FALLBACK_SHM) return 2;
    }
    return 0;
}

Test(shm, unusable_directory_falls_back_on_every_rank)
{
    int st[64];
    cr_assert_eq(run_ranks(3, unusable_dir, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

/* Rank 1 leaves mid-stream: the others get HIER_ERR_PEER_DEAD, not a hang. */
static int peer_dies(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x[64] = {0}, y[64];
    hier_path_t path;
    (void)n, (void)w;
    for (int it = 0; it < 100000; it++) {
        if (me == 1 && it == 50) _exit(0);
        hier_status_t st = hier_comm_allreduce(comm, x, y, 64, HIER_DT_INT64, HIER_OP_SUM, &path);
        if (st == HIER_ERR_PEER_DEAD) return it >= 50 ? 0 : 5;
        if (st != HIER_OK) return 6;
    }
    return 7; /* never noticed */
}

Test(shm, dead_peer_is_reported_not_waited_for)
{
    int st[64];
    cr_assert_eq(run_ranks(3, peer_dies, st), 3, "statuses %d %d %d", st[0], st[1], st[2]);
}

Test(shm, attach_rejects_a_different_layout)
{
    char name[64];
    hier_shm_t *a, *b;
    snprintf(name, sizeof(name), "coll-hier-test-%d", (int)getpid());
    cr_assert_eq(hier_shm_create(NULL, name, 2, 4096, &a), HIER_OK);
    cr_assert_eq(hier_shm_attach(NULL, name, 2, 1, 8192, &b), HIER_ERR_SHM, "chunk size mismatch accepted");
    cr_assert_eq(hier_shm_attach(NULL, name, 3, 1, 4096, &b), HIER_ERR_SHM, "rank count mismatch accepted");
    cr_assert_eq(hier_shm_attach(NULL, name, 2, 1, 4096, &b), HIER_OK);
    cr_assert_eq(hier_shm_claim(b, 1, -1), HIER_OK);
    cr_assert_eq(hier_shm_claim(a, 0, 0), HIER_OK);
    cr_assert_eq(hier_shm_peer_numa(a, 0), 0);
    cr_assert_eq(hier_shm_peer_numa(a, 1), -1);
    hier_shm_unlink(a);
    hier_shm_detach(b);
    hier_shm_detach(a);
    cr_assert_eq(hier_shm_attach(NULL, name, 2, 1, 4096, &b), HIER_ERR_SHM, "unlinked name still attachable");
}

Test(shm, layout_is_a_wire_format)
{
    cr_assert_eq(sizeof(hier_shm_header_t), 128);
    cr_assert_eq(sizeof(hier_shm_ctl_t), 128);
    cr_assert_eq(HIER_SHM_LL_AREA, 8320);
    /* header, 2 control lines, 2 x 2 low-latency areas = 33664 bytes: 9 pages, then the slots */
    cr_assert_eq(hier_shm_segment_size(2, 4096), 9 * 4096 + 2 * 8192);
    cr_assert_eq(hier_shm_segment_size(40, 4096), 164 * 4096 + 40 * 8192); /* 670848 bytes before the slots */
}

/* ---- several nodes: forked ranks as nodes of 2, joined over libfabric ---- */

/* Allreduce, allgather and reduce_scatter of int64 on host or device
 * buffers, exact; every call must have been served between nodes. */
static int across_nodes(hier_comm_t *comm, int me, int n, fork_world_t *w, int on_device)
{
    size_t cap = 20000 * (size_t)n;
    int64_t *s = on_device ? tdev_alloc(cap * 8) : malloc(cap * 8);
    int64_t *r = on_device ? tdev_alloc(cap * 8) : malloc(cap * 8);
    int64_t *sh = on_device ? (int64_t *)tdev_alias(s) : s, *rh = on_device ? (int64_t *)tdev_alias(r) : r;
    size_t rcounts[64];
    (void)w;
    for (int it = 0; it < 60; it++) {
        size_t count = it % 2 ? 1 + (size_t)(it * 7919 % 20000) : 1 + (size_t)it;
        hier_path_t path;
        hier_params.net_algorithm = it % 3 == 0 ? HIER_ALGO_AUTO : it % 3 == 1 ? HIER_ALGO_RING : HIER_ALGO_RH;
        for (size_t i = 0; i < count * (size_t)n; i++) sh[i] = (int64_t)(me + 1) * (int64_t)(it + (int)i);
        switch (it % 3) {
        case 0:
            if (hier_comm_allreduce(comm, s, r, count, HIER_DT_INT64, HIER_OP_SUM, &path) != HIER_OK) return 10;
            for (size_t i = 0; i < count; i++)
                if (rh[i] != (int64_t)n * (n + 1) / 2 * (it + (int)i)) return 11;
            if (path != HIER_PATH_NET_RD && path != HIER_PATH_NET_RING && path != HIER_PATH_NET_RH) return 12;
            break;
        case 1:
            if (hier_comm_allgather(comm, s, r, count * 8, &path) != HIER_OK) return 20;
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < count; i++)
                    if (rh[(size_t)j * count + i] != (int64_t)(j + 1) * (it + (int)i)) return 21;
            if (path != HIER_PATH_NET_COPY) return 22;
            break;
        default: {
            size_t mine = 0;
            for (int j = 0; j < n; j++) {
                rcounts[j] = (count + (size_t)j * 5) / (size_t)n;
                if (j < me) mine += rcounts[j];
            }
            if (hier_comm_reduce_scatter(comm, s, r, rcounts, HIER_DT_INT64, HIER_OP_SUM, &path) != HIER_OK)
                return 30;
            for (size_t i = 0; i < rcounts[me]; i++)
                if (rh[i] != (int64_t)n * (n + 1) / 2 * (it + (int)(mine + i))) return 31;
            if (path != HIER_PATH_NET_RS) return 32;
        }
        }
        if (hier_comm_staged(comm) != on_device) return 40;
    }
    return 0;
}

static int across_nodes_host(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    return across_nodes(comm, me, n, w, 0);
}

static int across_nodes_device(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    return across_nodes(comm, me, n, w, 1);
}

static void nodes_setup(const char *provider)
{
    setup();
    hier_params.fabric_provider = (char *)provider;
    hier_params.fabric_iface = "lo";
    hier_params.net_chunk_size = 8192;
    hier_params.net_split_min = 1024;
    hier_params.fabric_slot_size = 4096;
    fork_ranks_per_node = 2;
}

Test(shm, several_nodes_over_tcp_and_shm_providers)
{
    static const char *const providers[] = {"tcp", "shm"};
    int st[64];
    for (int p = 0; p < 2; p++)
        for (int n = 3; n <= 4; n++) { /* 2 + 1 and 2 + 2 */
            nodes_setup(providers[p]);
            int ok = run_ranks(n, across_nodes_host, st);
            for (int r = 0; r < n; r++) cr_expect_eq(st[r], 0, "%s n %d rank %d exited with %d", providers[p], n, r, st[r]);
            cr_assert_eq(ok, n);
        }
    fork_ranks_per_node = 0;
}

/* Device buffers the CPU faults on, on one node and on two: staged. */
Test(shm, device_buffers_are_staged_never_touched)
{
    int st[64];
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK); /* the forked ranks inherit it */
    nodes_setup("tcp");
    cr_assert_eq(run_ranks(4, across_nodes_device, st), 4, "statuses %d %d %d %d", st[0], st[1], st[2], st[3]);
    fork_ranks_per_node = 0;
    hier_accel_reset();
}

/* One rank cannot open the fabric: every rank falls back, and keeps doing so. */
static int one_without_provider(hier_comm_t *comm, int me, int n, fork_world_t *w)
{
    int64_t x = me, y;
    hier_path_t path = HIER_PATH_COUNT;
    (void)w;
    /* the provider is missing there, not named differently (that is
     * fallback:params): libfabric reads FI_PROVIDER at its first call */
    if (me == n - 1) setenv("FI_PROVIDER", "no-such-provider", 1);
    for (int i = 0; i < 3; i++) {
        if (hier_comm_allreduce(comm, &x, &y, 1, HIER_DT_INT64, HIER_OP_SUM, &path) != HIER_ERR_NOT_SUPPORTED)
            return 1;
        if (path != HIER_PATH_FALLBACK_NET) return 2;
    }
    return 0;
}

Test(shm, a_rank_without_provider_makes_all_fall_back)
{
    int st[64];
    nodes_setup("tcp");
    cr_assert_eq(run_ranks(4, one_without_provider, st), 4, "statuses %d %d %d %d", st[0], st[1], st[2], st[3]);
    fork_ranks_per_node = 0;
}
