/* fork_ranks.c: forked ranks for unit tests (fork_ranks.h). */
#include "fork_ranks.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fabric_reap.h"

void fork_barrier(fork_world_t *w)
{
    int gen = atomic_load(&w->generation);
    if (atomic_fetch_add(&w->arrived, 1) == w->nranks - 1) {
        atomic_store(&w->arrived, 0);
        atomic_fetch_add(&w->generation, 1);
    } else {
        while (atomic_load(&w->generation) == gen) sched_yield();
    }
}

int fork_exchanges;

static int fork_allgather(const void *sbuf, void *rbuf, size_t len, void *arg)
{
    fork_rank_t *r = arg;
    fork_exchanges++;
    if (len * (size_t)r->w->nranks > sizeof(r->w->buf)) return -1;
    memcpy(r->w->buf + (size_t)r->me * len, sbuf, len);
    fork_barrier(r->w);
    memcpy(rbuf, r->w->buf, len * (size_t)r->w->nranks);
    fork_barrier(r->w);
    return 0;
}

static int fork_agree(int *values, int n, void *arg)
{
    fork_rank_t *r = arg;
    fork_exchanges++;
    if (n > 8) return -1;
    memcpy(r->w->values[r->me], values, (size_t)n * sizeof(int));
    fork_barrier(r->w);
    for (int i = 0; i < r->w->nranks; i++)
        for (int k = 0; k < n; k++)
            if (r->w->values[i][k] < values[k]) values[k] = r->w->values[i][k];
    fork_barrier(r->w);
    return 0;
}

/* ---- Open MPI's point-to-point between the forked ranks (the glue's p2p,
 * net/hier_pml.h): a ring of FORK_P2P_SLOTS messages per (from, to, mailbox)
 * in a shared mapping; a send finds room or waits, in order, in its
 * rank's own list until a test finds room. One context for every
 * communicator of the bodies: they run their collectives one at a time. */
#define FORK_P2P_SLOTS 16
#define FORK_P2P_BYTES 8256 /* (a 4 KiB segment or 8 KiB and its header: nodes_setup's slot size) */

typedef struct {
    _Atomic uint64_t head, tail; /* sent by `from`, taken by `to` */
    uint64_t len[FORK_P2P_SLOTS];
    uint8_t data[FORK_P2P_SLOTS][FORK_P2P_BYTES];
} fork_ring_t;

typedef struct fork_req {
    struct fork_req *next; /* a send waiting for room, in its ring's order */
    int send, peer, posted;
    uint32_t mbox;
    void *buf;
    size_t len;
} fork_req_t;

static fork_ring_t *fork_rings; /* [from][to][mailbox] */
static int fork_n;
static fork_req_t *fork_waiting; /* this rank's sends not in a ring yet, oldest first */

static fork_ring_t *fork_ring(int from, int to, uint32_t mbox)
{
    return &fork_rings[((size_t)from * (size_t)fork_n + (size_t)to) * HIER_PML_MBOXES + mbox];
}

/* Sends waiting for room go in, oldest first (one ring's stay in order). */
static void fork_p2p_push(int me)
{
    for (fork_req_t **p = &fork_waiting; *p;) {
        fork_req_t *q = *p;
        fork_ring_t *g = fork_ring(me, q->peer, q->mbox);
        uint64_t h = atomic_load_explicit(&g->head, memory_order_relaxed);
        int blocked = 0;
        for (fork_req_t *o = fork_waiting; o != q; o = o->next) blocked |= o->peer == q->peer && o->mbox == q->mbox;
        if (blocked || h - atomic_load_explicit(&g->tail, memory_order_acquire) == FORK_P2P_SLOTS) {
            p = &q->next;
            continue;
        }
        memcpy(g->data[h % FORK_P2P_SLOTS], q->buf, q->len);
        g->len[h % FORK_P2P_SLOTS] = q->len;
        atomic_store_explicit(&g->head, h + 1, memory_order_release);
        free(q->buf);
        q->buf = NULL;
        q->posted = 1;
        *p = q->next;
    }
}

static int fork_p2p_isend(const void *buf, size_t len, int to, uint32_t mbox, void *arg, void **req_p)
{
    fork_rank_t *r = arg;
    fork_req_t *q = calloc(1, sizeof(*q)), **p = &fork_waiting;
    if (!q || len > FORK_P2P_BYTES || !(q->buf = malloc(len ? len : 1))) {
        free(q);
        return -1;
    }
    memcpy(q->buf, buf, len);
    *q = (fork_req_t){.send = 1, .peer = to, .mbox = mbox, .buf = q->buf, .len = len};
    while (*p) p = &(*p)->next;
    *p = q;
    fork_p2p_push(r->me);
    *req_p = q;
    return 0;
}

static int fork_p2p_irecv(void *buf, size_t len, int from, uint32_t mbox, void *arg, void **req_p)
{
    (void)arg;
    fork_req_t *q = calloc(1, sizeof(*q));
    if (!q) return -1;
    *q = (fork_req_t){.peer = from, .mbox = mbox, .buf = buf, .len = len};
    *req_p = q;
    return 0;
}

static int fork_p2p_me; /* (a test needs only the request: the rank is the process's) */

static int fork_p2p_test(void *req, size_t *len_p)
{
    fork_req_t *q = req;
    if (q->send) {
        fork_p2p_push(fork_p2p_me);
        if (!q->posted) return 0;
        free(q);
        return 1;
    }
    fork_ring_t *g = fork_ring(q->peer, fork_p2p_me, q->mbox);
    uint64_t t = atomic_load_explicit(&g->tail, memory_order_relaxed);
    if (atomic_load_explicit(&g->head, memory_order_acquire) == t) return 0;
    size_t len = g->len[t % FORK_P2P_SLOTS];
    int ret = len > q->len ? HIER_PML_TRUNCATED : 1;
    *len_p = len > q->len ? q->len : len;
    memcpy(q->buf, g->data[t % FORK_P2P_SLOTS], *len_p);
    atomic_store_explicit(&g->tail, t + 1, memory_order_release);
    free(q);
    return ret;
}

static void fork_p2p_cancel(void *req)
{
    free(req);
}

int fork_ranks_per_node;

/* Rank r shares my node when the layout says so; its process is r. */
static int fork_peer(int r, uint64_t *proc, void *arg)
{
    fork_rank_t *fr = arg;
    *proc = (uint64_t)r + 1000;
    return !fork_ranks_per_node || r / fork_ranks_per_node == fr->me / fork_ranks_per_node;
}

hier_comm_ops_t fork_ops;

int run_ranks(int n, rank_body_t body, int *statuses)
{
    fork_world_t *w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    size_t rings = (size_t)n * (size_t)n * HIER_PML_MBOXES * sizeof(fork_ring_t);
    pid_t pids[64];
    int ok = 0;
    memset(w, 0, sizeof(*w));
    w->nranks = n;
    fork_n = n;
    fork_rings = mmap(NULL, rings, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (fork_rings == MAP_FAILED) return 0;
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            fork_rank_t fr = {w, r};
            prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* let siblings read us (Yama ptrace_scope 1) */
            prctl(PR_SET_PDEATHSIG, SIGKILL);          /* a test killed on timeout takes its ranks along */
            fabric_reap_self();
            fork_p2p_me = r;
            fork_ops = (hier_comm_ops_t){.allgather = fork_allgather, .agree = fork_agree, .peer = fork_peer,
                                         .progress = NULL,
                                         .p2p = {.isend = fork_p2p_isend, .irecv = fork_p2p_irecv,
                                                 .test = fork_p2p_test, .cancel = fork_p2p_cancel, .arg = &fr},
                                         .arg = &fr};
            hier_comm_t *comm;
            if (hier_comm_create(n, r, &fork_ops, &comm) != HIER_OK) _exit(3);
            int rc = body(comm, r, n, w);
            hier_comm_destroy(comm);
            hier_proc_finalize(); /* closes the endpoint: the shm provider leaves a file behind otherwise */
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
    munmap(fork_rings, rings);
    return ok;
}

