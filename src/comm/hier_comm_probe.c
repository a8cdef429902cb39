/* hier_comm_probe.c: single copy against the segment, timed on the node
 * it runs on. Which of the allgather's two paths is faster depends on the
 * machine (the kernel's page pinning against a core's copy rate: on one
 * Intel VM the segment won at every block, on an AMD EPYC VM single copy
 * did), so a constant cannot choose. At the first allgather that would use
 * single copy, the node's ranks time both on a few block sizes with hier's
 * own schedules, agree on the slowest rank's times, and select/ draws the
 * window (hier_select_cma_window). Kept per process by local rank count.
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
#include "select/hier_select.h"

/* Blocks timed (each with the whole result of every rank within
 * HIER_PROBE_MAX_TOTAL), and calls per block and path (the least counts). */
static const size_t hier_probe_blocks[] = {64 << 10, 1 << 20, 8 << 20};
#define HIER_PROBE_MAX_TOTAL ((size_t)32 << 20)
#define HIER_PROBE_REPS 3
#define HIER_PROBE_KEPT 8

/* Windows measured by this process, by local rank count. */
static struct {
    int nranks;
    hier_select_window_t window;
} hier_probe_kept[HIER_PROBE_KEPT];
static pthread_mutex_t hier_probe_lock = PTHREAD_MUTEX_INITIALIZER;

static int hier_probe_find(int nranks, hier_select_window_t *w_p)
{
    int found = 0;
    pthread_mutex_lock(&hier_probe_lock);
    for (int i = 0; i < HIER_PROBE_KEPT && !found; i++)
        if (hier_probe_kept[i].nranks == nranks) *w_p = hier_probe_kept[i].window, found = 1;
    pthread_mutex_unlock(&hier_probe_lock);
    return found;
}

static void hier_probe_keep(int nranks, hier_select_window_t w)
{
    pthread_mutex_lock(&hier_probe_lock);
    int i = 0;
    while (i < HIER_PROBE_KEPT - 1 && hier_probe_kept[i].nranks && hier_probe_kept[i].nranks != nranks) i++;
    hier_probe_kept[i].nranks = nranks, hier_probe_kept[i].window = w;
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
    hier_shm_sign(nd->small.seg, &nd->wait, hier_sig_make(HIER_COLL_ALLGATHER, block, 0, 0, 0, ++c->calls));
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

/* 3-4 of hier_probe_cma_window: the times, this rank's least of each. */
static hier_status_t hier_probe_time(hier_comm_t *c, hier_select_probe_t *p, const uint8_t *sbuf, uint8_t *rbuf)
{
    static const hier_select_t shm = {.path = HIER_PATH_SHM_COPY, .kind = HIER_SCHED_ALLGATHER};
    static const hier_select_t cma = {.path = HIER_PATH_CMA_COPY, .kind = HIER_SCHED_CMA_ALLGATHER};
    for (int i = 0; i < p->n; i++) p->t_shm[i] = p->t_cma[i] = UINT64_MAX;
    for (int rep = 0; rep < HIER_PROBE_REPS; rep++) {
        for (int i = 0; i < p->n; i++) {
            uint64_t a, b;
            hier_status_t st = hier_probe_call(c, &shm, p->block[i], sbuf, rbuf, &a);
            if (st == HIER_OK) st = hier_probe_call(c, &cma, p->block[i], sbuf, rbuf, &b);
            if (st != HIER_OK) return st;
            if (a < p->t_shm[i]) p->t_shm[i] = a;
            if (b < p->t_cma[i]) p->t_cma[i] = b;
        }
    }
    return HIER_OK;
}

/* 5: the slowest rank's times, on every rank (an agreement takes the
 * least: of the negated times, in 100 ns). -1 if it failed. */
static int hier_probe_slowest(hier_comm_t *c, hier_select_probe_t *p)
{
    int v[2 * HIER_SELECT_PROBES];
    for (int i = 0; i < p->n; i++) {
        v[2 * i] = -(int)(p->t_shm[i] / 100 > INT_MAX ? INT_MAX : p->t_shm[i] / 100);
        v[2 * i + 1] = -(int)(p->t_cma[i] / 100 > INT_MAX ? INT_MAX : p->t_cma[i] / 100);
    }
    if (hier_xchg_agree(c, v, 2 * p->n) != 0) return -1;
    for (int i = 0; i < p->n; i++) p->t_shm[i] = (uint64_t)-v[2 * i] * 100, p->t_cma[i] = (uint64_t)-v[2 * i + 1] * 100;
    return 0;
}

static void hier_probe_log(const hier_select_probe_t *p, hier_select_window_t w)
{
    char line[320], lo[32] = "any", hi[32] = "any";
    int n = 0;
    for (int i = 0; i < p->n && n < (int)sizeof(line) - 64; i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %zu KiB: %.1f / %.1f us;", p->block[i] >> 10,
                      (double)p->t_shm[i] / 1e3, (double)p->t_cma[i] / 1e3);
    if (w.lo) snprintf(lo, sizeof(lo), "%zu B", w.lo);
    if (w.hi != SIZE_MAX) snprintf(hi, sizeof(hi), "%zu B", w.hi);
    if (w.lo > w.hi) HIER_LOG(HIER_LOG_COMM, "allgather single copy: no block (segment / single copy:%s)", line);
    else HIER_LOG(HIER_LOG_COMM, "allgather single copy: blocks from %s to %s (segment / single copy:%s)", lo, hi,
                  line);
}

/* 1. every rank keeps a window for this many local ranks: the one they share;
 * 2. else the blocks to time (none: any block);
 * 3. scratch buffers on every rank, or no timing (any block);
 * 4. each block through the segment and by single copy, in turn, the least
 *    of HIER_PROBE_REPS calls each;
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
    hier_status_t st = p.n && hier_xchg_agree(c, ok, 1) != 0 ? HIER_ERR_INTERNAL : HIER_OK;
    if (st == HIER_OK && p.n && ok[0]) {
        memset(sbuf, 0x5a, most); /* (the pages faulted in before the clock runs) */
        memset(rbuf, 0, most * (size_t)n);
        st = hier_probe_time(c, &p, sbuf, rbuf);                                                      /* 4 */
        if (st == HIER_OK && hier_probe_slowest(c, &p) != 0) st = HIER_ERR_INTERNAL;                   /* 5 */
        if (st == HIER_OK) w = hier_select_cma_window(&p);                                            /* 6 */
        hier_shm_sign(c->node->small.seg, &c->node->wait, hier_sig_renumber(user, ++c->calls));       /* 7 */
    }
    free(sbuf);
    free(rbuf);
    if (st != HIER_OK) return st;
    if (p.n && ok[0]) hier_probe_log(&p, w);
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
