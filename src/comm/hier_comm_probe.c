/* hier_comm_probe.c: choices timed on the node they serve. Which path is
 * faster depends on the machine (single copy's page pinning against a
 * core's copy rate: which allgather blocks each wins differs between CPUs
 * and between a VM's runs; low latency's flag per line against a
 * schedule's barrier, with the node's ranks), so constants cannot choose.
 * At the first call a measurement would decide, the node's ranks time both
 * paths on a few sizes with hier's own executors, agree on the slowest
 * rank's times, and select/ draws the bound (hier_select_cma_window,
 * hier_select_ll_top). Kept per process by local rank count.
 * docs/design.md, "Choices that follow the machine". */
#include "comm/hier_comm_probe.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_xchg.h"
#include "exec/hier_exec_ll.h"
#include "select/hier_select.h"

/* Blocks timed (each with the whole result of every rank within
 * HIER_PROBE_MAX_TOTAL), and timed calls per block and path, the least
 * counts: as many as HIER_PROBE_BUDGET bytes of results hold, within
 * HIER_PROBE_REPS_MIN..MAX (small blocks are cheap and their times noisy). */
static const size_t hier_probe_blocks[] = {64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 8 << 20};
#define HIER_PROBE_MAX_TOTAL ((size_t)32 << 20)
#define HIER_PROBE_BUDGET ((size_t)16 << 20)
#define HIER_PROBE_REPS_MIN 2
#define HIER_PROBE_REPS_MAX 8
#define HIER_PROBE_KEPT 8

/* What this process measured, by local rank count: single copy's window
 * (when has_window) and each collective's low-latency cut-off (0: none). */
typedef struct {
    int nranks;
    int has_window;
    hier_select_window_t window;
    size_t ll_top[HIER_RULE_COLLS];
} hier_probe_kept_t;
static hier_probe_kept_t hier_probe_kept[HIER_PROBE_KEPT];
static const char *const hier_probe_coll_names[HIER_RULE_COLLS] = {"allreduce", "allgather", "reduce_scatter"};
static pthread_mutex_t hier_probe_lock = PTHREAD_MUTEX_INITIALIZER;

/* (the lock held) The slot of this many ranks; make: a new one if none,
 * the last one reused when all are taken. NULL: none. */
static hier_probe_kept_t *hier_probe_slot(int nranks, int make)
{
    int i = 0;
    while (i < HIER_PROBE_KEPT - 1 && hier_probe_kept[i].nranks && hier_probe_kept[i].nranks != nranks) i++;
    if (hier_probe_kept[i].nranks == nranks) return &hier_probe_kept[i];
    if (!make) return NULL;
    memset(&hier_probe_kept[i], 0, sizeof(hier_probe_kept[i]));
    hier_probe_kept[i].nranks = nranks;
    return &hier_probe_kept[i];
}

static int hier_probe_find(int nranks, hier_select_window_t *w_p)
{
    pthread_mutex_lock(&hier_probe_lock);
    hier_probe_kept_t *k = hier_probe_slot(nranks, 0);
    int found = k && k->has_window;
    if (found) *w_p = k->window;
    pthread_mutex_unlock(&hier_probe_lock);
    return found;
}

static void hier_probe_keep(int nranks, hier_select_window_t w)
{
    pthread_mutex_lock(&hier_probe_lock);
    hier_probe_kept_t *k = hier_probe_slot(nranks, 1);
    k->has_window = 1, k->window = w;
    pthread_mutex_unlock(&hier_probe_lock);
}

/* A window as two ints of an agreement (the least wins): minus its bottom,
 * its top, in KiB (INT_MAX: open), so that every rank gets the window all
 * windows share; and back. */
static int hier_probe_kib(size_t v)
{
    return v == SIZE_MAX ? INT_MAX : v / 1024 >= (size_t)INT_MAX ? INT_MAX - 1 : (int)(v / 1024);
}

static void hier_probe_put(hier_select_window_t w, int *v)
{
    v[0] = -hier_probe_kib(w.lo), v[1] = hier_probe_kib(w.hi);
}

static hier_select_window_t hier_probe_get(const int *v)
{
    return (hier_select_window_t){.lo = v[0] == -INT_MAX ? SIZE_MAX : (size_t)-v[0] * 1024,
                                  .hi = v[1] == INT_MAX ? SIZE_MAX : (size_t)v[1] * 1024};
}

static uint64_t hier_probe_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One allgather of `block` bytes by `choice`, from a node barrier (as a
 * benchmark times it): its own signature, so a peer elsewhere is caught as
 * in any call. Its time in *ns_p. */
static hier_status_t hier_probe_call(hier_comm_t *c, const hier_select_t *choice, size_t block, const void *sbuf,
                                     void *rbuf, uint64_t *ns_p)
{
    hier_node_t *nd = c->node;
    hier_status_t st = hier_shm_barrier(nd->small.seg, &nd->wait);
    if (st != HIER_OK) return st;
    uint64_t t0 = hier_probe_now_ns(), sent = 0;
    (void)hier_shm_sign_call(nd->small.seg, &nd->wait, HIER_COLL_ALLGATHER, block, 0, 0, 0, ++c->calls);
    hier_sched_args_t args = {.kind = choice->kind, .esize = 1, .count = block, .pieces = 1}; /* (one node) */
    st = hier_node_run(c, &args, sbuf, rbuf, (hier_reduce_kernel_t){0}, &sent);
    *ns_p = hier_probe_now_ns() - t0;
    return st;
}

/* The probe's blocks for n local ranks (those single copy may serve). */
static void hier_probe_plan(int n, hier_select_probe_t *p)
{
    *p = (hier_select_probe_t){0};
    for (size_t i = 0; i < sizeof(hier_probe_blocks) / sizeof(hier_probe_blocks[0]); i++) {
        size_t b = hier_probe_blocks[i];
        if (b * (size_t)n <= HIER_PROBE_MAX_TOTAL && p->n < HIER_SELECT_PROBES)
            p->block[p->n++] = b;
    }
}

/* 3-4 of hier_probe_cma_window: the times, this rank's least of each.
 * Block by block, each path called once untimed first, so that both are
 * timed as a benchmark (and a training loop) runs them: the block's
 * buffers and the segment in the caches. Timed in turn across the blocks,
 * the segment ran after the largest block had evicted them and took 3-4
 * times its steady time (docs/performance.md, *The single-copy window*). */
static hier_status_t hier_probe_time(hier_comm_t *c, hier_select_probe_t *p, const uint8_t *sbuf, uint8_t *rbuf)
{
    static const hier_select_t shm = {.path = HIER_PATH_SHM_COPY, .kind = HIER_SCHED_ALLGATHER};
    static const hier_select_t cma = {.path = HIER_PATH_CMA_COPY, .kind = HIER_SCHED_CMA_ALLGATHER};
    for (int i = 0; i < p->n; i++) {
        size_t total = p->block[i] * (size_t)c->layout.nranks, fit = HIER_PROBE_BUDGET / total;
        int reps = fit < HIER_PROBE_REPS_MIN ? HIER_PROBE_REPS_MIN : fit > HIER_PROBE_REPS_MAX ? HIER_PROBE_REPS_MAX
                                                                                             : (int)fit;
        p->t_shm[i] = p->t_cma[i] = UINT64_MAX;
        for (int rep = -1; rep < reps; rep++) {
            uint64_t a, b;
            hier_status_t st = hier_probe_call(c, &shm, p->block[i], sbuf, rbuf, &a);
            if (st == HIER_OK) st = hier_probe_call(c, &cma, p->block[i], sbuf, rbuf, &b);
            if (st != HIER_OK) return st;
            if (rep < 0) continue; /* (the warming calls) */
            if (a < p->t_shm[i]) p->t_shm[i] = a;
            if (b < p->t_cma[i]) p->t_cma[i] = b;
        }
    }
    return HIER_OK;
}

/* The slowest rank's times, on every rank: n of a, then n of b (an
 * agreement takes the least: of the negated times, in 10 ns). -1 if it
 * failed. */
static int hier_probe_slowest(hier_comm_t *c, int n, uint64_t *a, uint64_t *b)
{
    int v[2 * HIER_SELECT_PROBES];
    for (int i = 0; i < 2 * n; i++) {
        uint64_t t = (i < n ? a[i] : b[i - n]) / 10;
        v[i] = -(int)(t > INT_MAX ? INT_MAX : t);
    }
    if (hier_xchg_agree(c, v, 2 * n) != 0) return -1;
    for (int i = 0; i < 2 * n; i++) *(i < n ? &a[i] : &b[i - n]) = (uint64_t)-v[i] * 10;
    return 0;
}

static void hier_probe_log(const hier_select_probe_t *p, hier_select_window_t w, uint64_t ns)
{
    char line[320], lo[32] = "any", hi[32] = "any";
    int n = 0;
    for (int i = 0; i < p->n && n < (int)sizeof(line) - 64; i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %zu KiB: %.1f / %.1f us;", p->block[i] >> 10,
                      (double)p->t_shm[i] / 1e3, (double)p->t_cma[i] / 1e3);
    if (w.lo) snprintf(lo, sizeof(lo), "%zu B", w.lo);
    if (w.hi != SIZE_MAX) snprintf(hi, sizeof(hi), "%zu B", w.hi);
    double ms = (double)ns / 1e6;
    if (w.lo > w.hi)
        HIER_LOG(HIER_LOG_COMM, "allgather single copy: no block (segment / single copy:%s measured in %.1f ms)", line,
                 ms);
    else
        HIER_LOG(HIER_LOG_COMM, "allgather single copy: blocks from %s to %s (segment / single copy:%s measured in "
                 "%.1f ms)", lo, hi, line, ms);
}

/* 1. every rank keeps a window for this many local ranks: the one they share;
 * 2. else the blocks to time (none: any block);
 * 3. scratch buffers on every rank, or no timing (any block);
 * 4. block by block, through the segment and by single copy in turn, each
 *    warmed by one call, the least of 2-8 calls each;
 * 5. the slowest rank's times; 6. the window, kept;
 * 7. the call the probe ran in signed again, after the probe's. */
hier_status_t hier_probe_cma_window(hier_comm_t *c, hier_select_window_t *w_p)
{
    int n = c->layout.nranks;
    hier_select_window_t kept = HIER_SELECT_WINDOW_ANY, w = HIER_SELECT_WINDOW_ANY;
    int have = hier_probe_find(n, &kept);
    int v[3] = {have};                                                                                /* 1 */
    hier_probe_put(kept, v + 1);
    if (hier_xchg_agree(c, v, 3) != 0) return HIER_ERR_INTERNAL;
    if (v[0]) {
        *w_p = hier_probe_get(v + 1);
        return HIER_OK;
    }
    hier_select_probe_t p;
    hier_probe_plan(n, &p);                                                                           /* 2 */
    size_t most = p.n ? p.block[p.n - 1] : 0;
    uint8_t *sbuf = p.n ? malloc(most) : NULL, *rbuf = p.n ? malloc(most * (size_t)n) : NULL;
    int ok[1] = {sbuf && rbuf};                                                                       /* 3 */
    hier_sig_t user = c->node->wait.sig;
    uint64_t t0 = hier_probe_now_ns();
    hier_status_t st = p.n && hier_xchg_agree(c, ok, 1) != 0 ? HIER_ERR_INTERNAL : HIER_OK;
    if (st == HIER_OK && p.n && ok[0]) {
        memset(sbuf, 0x5a, most); /* (the pages faulted in before the clock runs) */
        memset(rbuf, 0, most * (size_t)n);
        st = hier_probe_time(c, &p, sbuf, rbuf);                                                      /* 4 */
        if (st == HIER_OK && hier_probe_slowest(c, p.n, p.t_shm, p.t_cma) != 0) st = HIER_ERR_INTERNAL; /* 5 */
        if (st == HIER_OK) w = hier_select_cma_window(&p);                                            /* 6 */
        hier_shm_sign(c->node->small.seg, &c->node->wait, hier_sig_renumber(user, ++c->calls));       /* 7 */
    }
    free(sbuf);
    free(rbuf);
    if (st != HIER_OK) return st;
    if (p.n && ok[0]) hier_probe_log(&p, w, hier_probe_now_ns() - t0);
    hier_probe_keep(n, w);
    *w_p = w;
    return HIER_OK;
}

int hier_probe_cma_window_kept(hier_comm_t *c, hier_select_window_t *w_p)
{
    hier_select_window_t kept = HIER_SELECT_WINDOW_ANY;
    int v[2];
    (void)hier_probe_find(c->layout.nranks, &kept);
    hier_probe_put(kept, v);
    if (hier_xchg_agree(c, v, 2) != 0) return -1;
    *w_p = hier_probe_get(v);
    return 0;
}

/* ---- the low-latency cut-off ---- */

#define HIER_PROBE_LL_REPS 16

static size_t hier_probe_ll_find(int nranks, hier_coll_t coll)
{
    pthread_mutex_lock(&hier_probe_lock);
    hier_probe_kept_t *k = hier_probe_slot(nranks, 0);
    size_t top = k ? k->ll_top[coll] : 0;
    pthread_mutex_unlock(&hier_probe_lock);
    return top;
}

static void hier_probe_ll_keep(int nranks, hier_coll_t coll, size_t top)
{
    pthread_mutex_lock(&hier_probe_lock);
    hier_probe_slot(nranks, 1)->ll_top[coll] = top;
    pthread_mutex_unlock(&hier_probe_lock);
}

/* A kept cut-off as two ints of an agreement (the least wins): whether
 * this rank keeps one, and it (INT_MAX: any the area holds); and back. */
static void hier_probe_ll_put(size_t kept, int v[2])
{
    v[0] = kept != 0;
    v[1] = kept == SIZE_MAX || kept > INT_MAX ? INT_MAX : (int)kept;
}

static size_t hier_probe_ll_get(const int v[2])
{
    return v[1] == INT_MAX ? SIZE_MAX : (size_t)v[1];
}

/* A cut-off as the logs say it. */
static const char *hier_probe_ll_upto(size_t top, char *buf, size_t len)
{
    if (top == SIZE_MAX) return "any the area holds";
    snprintf(buf, len, "%zu B", top);
    return buf;
}

int hier_probe_ll_tops_kept(hier_comm_t *c, size_t top[HIER_RULE_COLLS])
{
    int v[2 * HIER_RULE_COLLS];
    for (int coll = 0; coll < HIER_RULE_COLLS; coll++)
        hier_probe_ll_put(hier_probe_ll_find(c->layout.nranks, (hier_coll_t)coll), v + 2 * coll);
    if (hier_xchg_agree(c, v, 2 * HIER_RULE_COLLS) != 0) return -1;
    char line[160];
    int n = 0;
    for (int coll = 0; coll < HIER_RULE_COLLS; coll++) {
        if (!v[2 * coll] || top[coll]) continue;
        top[coll] = hier_probe_ll_get(v + 2 * coll);
        char upto[32];
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s up to %s;", hier_probe_coll_names[coll],
                      hier_probe_ll_upto(top[coll], upto, sizeof(upto)));
    }
    if (n) HIER_LOG(HIER_LOG_COMM, "low latency, the cut-offs the process kept:%s", line);
    return 0;
}

/* A probe call's buffers: the largest size's input and result, and a
 * reduce_scatter's counts (its own: the communicator's displacements hold
 * the call the probe runs in). */
typedef struct {
    uint8_t *sbuf, *rbuf;
    size_t *rcounts, *rdispls;
} hier_probe_bufs_t;

/* One call of `coll` on `bytes` (reductions: floats summed; allgather: a
 * block per rank), by low latency or (sched not NULL) by its schedule, from
 * a node barrier, signed as its own. Its time in *ns_p. */
static hier_status_t hier_probe_ll_call(hier_comm_t *c, hier_coll_t coll, const hier_select_t *sched, size_t bytes,
                                        const hier_probe_bufs_t *b, uint64_t *ns_p)
{
    hier_node_t *nd = c->node;
    int n = c->layout.nranks;
    size_t esize = coll == HIER_COLL_ALLGATHER ? 1 : sizeof(float), count = bytes / esize;
    hier_reduce_kernel_t kernel = {0};
    if (coll != HIER_COLL_ALLGATHER && hier_reduce_kernel_get(HIER_DT_FLOAT, HIER_OP_SUM, &kernel) != HIER_OK)
        return HIER_ERR_INTERNAL;
    uint32_t digest = 0;
    if (coll == HIER_COLL_REDUCE_SCATTER) {
        for (int r = 0; r < n; r++) b->rcounts[r] = count / (size_t)n + (r < (int)(count % (size_t)n));
        for (int r = 0; r < n; r++) b->rdispls[r] = r ? b->rdispls[r - 1] + b->rcounts[r - 1] : 0;
        digest = hier_sig_digest(b->rcounts, n);
    }
    hier_status_t st = hier_shm_barrier(nd->small.seg, &nd->wait);
    if (st != HIER_OK) return st;
    uint64_t t0 = hier_probe_now_ns(), sent = 0;
    (void)hier_shm_sign_call(nd->small.seg, &nd->wait, coll, count, HIER_DT_FLOAT, HIER_OP_SUM, digest, ++c->calls);
    hier_exec_ll_t ll = {.shm = nd->small.seg, .wait = &nd->wait};
    if (sched) {
        hier_sched_args_t args = {.kind = sched->kind, .esize = esize, .count = count, .pieces = 1,
                                  .rcounts = b->rcounts, .rdispls = b->rdispls};
        st = hier_node_run(c, &args, b->sbuf, b->rbuf, kernel, &sent);
    } else if (coll == HIER_COLL_ALLREDUCE) {
        st = hier_exec_ll_allreduce(&ll, b->sbuf, b->rbuf, count, esize, kernel);
    } else if (coll == HIER_COLL_ALLGATHER) {
        st = hier_exec_ll_allgather(&ll, b->sbuf, b->rbuf, count);
    } else {
        st = hier_exec_ll_reduce_scatter(&ll, b->sbuf, b->rbuf, b->rcounts, b->rdispls, count, esize, kernel);
    }
    *ns_p = hier_probe_now_ns() - t0;
    return st;
}

/* 4 of hier_probe_ll_top: each size by low latency and by the schedule
 * that serves it without, in turn, this rank's least of each (single copy
 * only once probed available: the kernel may forbid it, and the probe is
 * not the place to find out). */
static hier_status_t hier_probe_ll_time(hier_comm_t *c, hier_coll_t coll, hier_select_ll_probe_t *p,
                                        const hier_probe_bufs_t *b)
{
    hier_select_shape_t without = c->shape;
    without.ll_capacity = 0;
    if (without.cma < 0) without.cma = 0;
    for (int i = 0; i < p->n; i++) p->t_ll[i] = p->t_sched[i] = UINT64_MAX;
    for (int rep = 0; rep < HIER_PROBE_LL_REPS; rep++)
        for (int i = 0; i < p->n; i++) {
            hier_select_t sched;
            hier_select(&without, coll, p->bytes[i], &sched);
            uint64_t a, s;
            hier_status_t st = hier_probe_ll_call(c, coll, NULL, p->bytes[i], b, &a);
            if (st == HIER_OK) st = hier_probe_ll_call(c, coll, &sched, p->bytes[i], b, &s);
            if (st != HIER_OK) return st;
            if (a < p->t_ll[i]) p->t_ll[i] = a;
            if (s < p->t_sched[i]) p->t_sched[i] = s;
        }
    return HIER_OK;
}

static void hier_probe_ll_log(hier_coll_t coll, const hier_select_ll_probe_t *p, size_t top)
{
    char line[320], upto[32];
    int n = 0;
    for (int i = 0; i < p->n && n < (int)sizeof(line) - 64; i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %zu KiB: %.2f / %.2f us;", p->bytes[i] >> 10,
                      (double)p->t_ll[i] / 1e3, (double)p->t_sched[i] / 1e3);
    HIER_LOG(HIER_LOG_COMM, "%s low latency: up to %s (low latency / schedule:%s)", hier_probe_coll_names[coll],
             hier_probe_ll_upto(top, upto, sizeof(upto)), line);
}

static void hier_probe_ll_free(hier_probe_bufs_t *b)
{
    free(b->sbuf), free(b->rbuf), free(b->rcounts), free(b->rdispls);
}

/* 1. every rank keeps a cut-off of this collective for this many local
 *    ranks: the least;
 * 2. the sizes to time;
 * 3. scratch buffers on every rank, or no timing (the cut-off below the
 *    first size);
 * 4. each size by low latency and by the schedule, in turn, the least of
 *    HIER_PROBE_LL_REPS calls each;
 * 5. the slowest rank's times; 6. the cut-off, kept. */
hier_status_t hier_probe_ll_top(hier_comm_t *c, hier_coll_t coll, size_t *top_p)
{
    int n = c->layout.nranks;
    size_t kept = hier_probe_ll_find(n, coll), top = HIER_SELECT_LL_PROBE_MIN - 1;
    int v[2];
    hier_probe_ll_put(kept, v);                                                                       /* 1 */
    if (hier_xchg_agree(c, v, 2) != 0) return HIER_ERR_INTERNAL;
    if (v[0]) {
        *top_p = hier_probe_ll_get(v);
        return HIER_OK;
    }
    hier_select_ll_probe_t p;
    hier_select_ll_plan(&c->shape, &p);                                                               /* 2 */
    size_t most = p.n ? p.bytes[p.n - 1] : 0;
    hier_probe_bufs_t b = {.sbuf = malloc(most + 1), .rbuf = malloc(most * (size_t)n + 1),
                           .rcounts = malloc(sizeof(size_t) * (size_t)n),
                           .rdispls = malloc(sizeof(size_t) * (size_t)n)};
    int ok[1] = {p.n && b.sbuf && b.rbuf && b.rcounts && b.rdispls};                                 /* 3 */
    hier_status_t st = hier_xchg_agree(c, ok, 1) != 0 ? HIER_ERR_INTERNAL : HIER_OK;
    if (st == HIER_OK && ok[0]) {
        memset(b.sbuf, 0, most); /* (zeros: a sum of floats that stays finite) */
        memset(b.rbuf, 0, most * (size_t)n);
        st = hier_probe_ll_time(c, coll, &p, &b);                                                     /* 4 */
        if (st == HIER_OK && hier_probe_slowest(c, p.n, p.t_ll, p.t_sched) != 0) st = HIER_ERR_INTERNAL; /* 5 */
        if (st == HIER_OK) top = hier_select_ll_top(&p);                                              /* 6 */
    }
    hier_probe_ll_free(&b);
    if (st != HIER_OK) return st;
    if (ok[0]) hier_probe_ll_log(coll, &p, top);
    hier_probe_ll_keep(n, coll, top);
    *top_p = top;
    return HIER_OK;
}
