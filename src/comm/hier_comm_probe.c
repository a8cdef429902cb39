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
    size_t top;
} hier_probe_kept[HIER_PROBE_KEPT];
static pthread_mutex_t hier_probe_lock = PTHREAD_MUTEX_INITIALIZER;

static int hier_probe_find(int nranks, size_t *top_p)
{
    int found = 0;
    pthread_mutex_lock(&hier_probe_lock);
    for (int i = 0; i < HIER_PROBE_KEPT && !found; i++)
        if (hier_probe_kept[i].nranks == nranks) *top_p = hier_probe_kept[i].top, found = 1;
    pthread_mutex_unlock(&hier_probe_lock);
    return found;
}

static void hier_probe_keep(int nranks, size_t top)
{
    pthread_mutex_lock(&hier_probe_lock);
    int i = 0;
    while (i < HIER_PROBE_KEPT - 1 && hier_probe_kept[i].nranks && hier_probe_kept[i].nranks != nranks) i++;
    hier_probe_kept[i].nranks = nranks, hier_probe_kept[i].top = top;
    pthread_mutex_unlock(&hier_probe_lock);
}

/* A window as an agreement's int (KiB; INT_MAX: any block), and back. */
static int hier_probe_kib(size_t top)
{
    return top == SIZE_MAX ? INT_MAX : top / 1024 >= (size_t)INT_MAX ? INT_MAX - 1 : (int)(top / 1024);
}

static size_t hier_probe_top(int kib)
{
    return kib == INT_MAX ? SIZE_MAX : (size_t)kib * 1024;
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
        if (b >= hier_params.allgather_cma_min && b * (size_t)n <= HIER_PROBE_MAX_TOTAL && p->n < HIER_SELECT_PROBES)
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

static void hier_probe_log(const hier_select_probe_t *p, size_t top)
{
    char line[256];
    int n = 0;
    for (int i = 0; i < p->n && n < (int)sizeof(line) - 64; i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %zu KiB: %.1f / %.1f us;", p->block[i] >> 10,
                      (double)p->t_shm[i] / 1e3, (double)p->t_cma[i] / 1e3);
    if (top == SIZE_MAX) HIER_LOG(HIER_LOG_COMM, "allgather single copy: any block from %zu B (segment / single copy:%s)",
                                  hier_params.allgather_cma_min, n ? line : " not timed");
    else HIER_LOG(HIER_LOG_COMM, "allgather single copy: blocks of %zu B to %zu B (segment / single copy:%s)",
                  hier_params.allgather_cma_min, top, line);
}

/* 1. every rank keeps a window for this many local ranks: the least;
 * 2. else the blocks to time (none: any block);
 * 3. scratch buffers on every rank, or no timing (any block);
 * 4. each block through the segment and by single copy, in turn, the least
 *    of HIER_PROBE_REPS calls each;
 * 5. the slowest rank's times; 6. the window, kept;
 * 7. the call the probe ran in signed again, after the probe's. */
hier_status_t hier_probe_cma_window(hier_comm_t *c, size_t *top_p)
{
    int n = c->layout.nranks;
    size_t kept = SIZE_MAX, top = SIZE_MAX;
    int have = hier_probe_find(n, &kept);
    int v[2] = {have, have ? hier_probe_kib(kept) : INT_MAX};                                          /* 1 */
    if (hier_xchg_agree(c, v, 2) != 0) return HIER_ERR_INTERNAL;
    if (v[0]) {
        *top_p = hier_probe_top(v[1]);
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
        if (st == HIER_OK) top = hier_select_cma_window(&p);                                          /* 6 */
        hier_shm_sign(c->node->small.seg, &c->node->wait, hier_sig_renumber(user, ++c->calls));       /* 7 */
    }
    free(sbuf);
    free(rbuf);
    if (st != HIER_OK) return st;
    if (p.n && ok[0]) hier_probe_log(&p, top);
    hier_probe_keep(n, top);
    *top_p = top;
    return HIER_OK;
}

int hier_probe_cma_window_kept(hier_comm_t *c, size_t *top_p)
{
    size_t kept = SIZE_MAX;
    int v[1] = {hier_probe_find(c->layout.nranks, &kept) ? hier_probe_kib(kept) : INT_MAX};
    if (hier_xchg_agree(c, v, 1) != 0) return -1;
    *top_p = hier_probe_top(v[0]);
    return 0;
}
