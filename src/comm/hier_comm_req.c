/* hier_comm_req.c: nonblocking collectives as requests (hier_comm.h).
 *
 * A request is the blocking call's plan (the choice of select/, its
 * schedule's arguments, made when the call is made) and the executor's
 * place in it: the low-latency path's post and looks (hier_exec_ll.c), or
 * a run of hier_run.c stopped where it would wait. A communicator runs its
 * requests one at a time, in the order they were made; the others wait in
 * its queue, started when the one ahead is over:
 * 1. made: decided, every rank alike, from what every rank knows alike
 *    (the communicator's state, select/'s shape), or it falls back;
 * 2. started (first in the queue): its signature goes out, the
 *    low-latency payload is posted or the run begins;
 * 3. advanced, by a test of any request of the process or its progress,
 *    as far as it goes without waiting;
 * 4. over: its status kept, done() told, the next one started.
 * Why a request never takes a collective step (set-up, segments,
 * agreements): those wait for the peers to reach them, and a peer may be
 * waiting for this rank elsewhere first (a receive before its own call). A
 * blocking call takes them; the requests after it find them made. (The
 * entries that make requests are hier_comm.c's, beside their blocking twins.)
 *
 * One lock over every queue: requests are advanced by whichever thread
 * tests one or runs Open MPI's progress; progress only tries it. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_host.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_req.h"
#include "exec/hier_run.h"

struct hier_req {
    hier_comm_t *c;
    struct hier_req *next;       /* the communicator's queue */
    hier_req_call_t call;
    size_t *counts;              /* reduce_scatter: rcounts, then their prefix sums (owned) */
    hier_req_notify_t notify;
    hier_reduce_kernel_t kernel;
    hier_select_t choice;
    hier_exec_ll_call_t llc;
    hier_exec_ll_req_t llq;
    hier_sched_args_t args;
    hier_run_t plan;
    hier_run_req_t run;
    hier_status_t st;            /* HIER_IN_PROGRESS until over */
    int freed;                   /* given back before it was over: freed then */
    uint64_t net_bytes;
};

static pthread_mutex_t hier_req_mutex = PTHREAD_MUTEX_INITIALIZER;
static hier_comm_t *hier_req_comms; /* communicators with requests, a doubly linked list */

/* Requests over, kept for the next ones (an allocation and its zeroing
 * were a tenth of an 8-byte call), under the lock. */
#define HIER_REQ_KEEP 16
static hier_req_t *hier_req_kept[HIER_REQ_KEEP];
static int hier_req_nkept;

/* The lock, where threads may call at once (MPI_THREAD_MULTIPLE): every
 * queue, the list and the kept requests. */
static void hier_req_lock(void)
{
    if (hier_lock_threaded()) pthread_mutex_lock(&hier_req_mutex);
}

static int hier_req_trylock(void)
{
    return !hier_lock_threaded() || pthread_mutex_trylock(&hier_req_mutex) == 0;
}

static void hier_req_unlock(void)
{
    if (hier_lock_threaded()) pthread_mutex_unlock(&hier_req_mutex);
}

/* ---- 1. made ------------------------------------------------------------------ */

/* The reason a call falls back; the process's first fallback:nonblocking
 * says why (coll_hier_verbose 1). */
static hier_status_t hier_req_refuse(hier_path_t why, const char *what, hier_path_t *path_p)
{
    static _Atomic unsigned said;
    if (why == HIER_PATH_FALLBACK_NONBLOCKING && !(atomic_fetch_or(&said, 1u) & 1u))
        HIER_LOG(HIER_LOG_COMM, "a nonblocking call falls back: %s (its first blocking calls make what it needs)",
                 what);
    *path_p = why;
    return HIER_ERR_NOT_SUPPORTED;
}

/* The communicator can start a call now, without waiting for its peers:
 * decided from what every rank knows alike. */
hier_status_t hier_req_ready(hier_comm_t *c, hier_coll_t coll, hier_path_t *path_p)
{
    int algo = coll == HIER_COLL_ALLREDUCE   ? hier_params.allreduce_algorithm
               : coll == HIER_COLL_ALLGATHER ? hier_params.allgather_algorithm
                                             : hier_params.reduce_scatter_algorithm;
    if (algo == HIER_ALGO_FALLBACK || !hier_params.nonblocking)
        return hier_req_refuse(HIER_PATH_FALLBACK_FORCED, "", path_p);
    if (c->size == 1) return HIER_OK;
    if (c->state == HIER_COMM_REFUSED) return hier_req_refuse(c->refused, "", path_p);
    if (c->state != HIER_COMM_READY)
        return hier_req_refuse(HIER_PATH_FALLBACK_NONBLOCKING, "the communicator is not set up yet", path_p);
    if (c->dev_possible) /* (ranks may differ in where their buffers are: staging is for blocking calls) */
        return hier_req_refuse(HIER_PATH_FALLBACK_NONBLOCKING, "some rank has a device backend", path_p);
    return HIER_OK;
}

/* select/'s choice and the schedule's arguments: the plan, or a fallback. */
static hier_status_t hier_req_plan(hier_req_t *q, hier_path_t *path_p)
{
    hier_comm_t *c = q->c;
    const hier_req_call_t *k = &q->call;
    size_t esize = k->coll == HIER_COLL_ALLGATHER ? 1 : hier_dtype_size(k->dt);
    hier_select_shape_t shape = hier_comm_shape(c);
    hier_select(&shape, k->coll, k->count * esize, &q->choice);
    if (q->choice.path == HIER_PATH_CMA_COPY && shape.cma < 0)
        return hier_req_refuse(HIER_PATH_FALLBACK_NONBLOCKING, "single copy not probed yet", path_p);
    q->llc = (hier_exec_ll_call_t){.sbuf = k->sbuf, .rbuf = k->rbuf, .esize = esize, .kernel = q->kernel};
    if (k->coll == HIER_COLL_ALLGATHER) q->llc.block = k->count;
    else q->llc.total = k->count;
    if (k->coll == HIER_COLL_REDUCE_SCATTER) {
        q->llc.rcounts = q->counts;
        q->llc.rdispls = q->counts + c->size;
    }
    if (q->choice.path == HIER_PATH_SHM_LL) return HIER_OK;
    q->args = hier_comm_args(c, &q->choice, esize, k->count, k->sbuf == NULL);
    if (k->coll == HIER_COLL_REDUCE_SCATTER) {
        q->args.rcounts = q->llc.rcounts;
        q->args.rdispls = q->llc.rdispls;
        if (!c->rs_slices && hier_sched_slices_pay(hier_params.net_chunk_size / esize, c->layout.pieces, c->size,
                                                   c->layout.nnodes, q->args.in_place))
            c->rs_slices = hier_sched_slices_new(c->layout.pieces, c->size, c->layout.nnodes);
        q->args.rs_slices = c->rs_slices;
    }
    hier_status_t st = hier_node_prep(c, &q->args, 1, &q->plan);
    if (st == HIER_IN_PROGRESS)
        return hier_req_refuse(HIER_PATH_FALLBACK_NONBLOCKING, "a segment or room it needs is not made yet", path_p);
    if (st == HIER_ERR_NOT_SUPPORTED) return hier_req_refuse(HIER_PATH_FALLBACK_SHM, "", path_p);
    return st;
}

/* (the lock held) */
static hier_req_t *hier_req_alloc(const hier_comm_t *c, const hier_req_call_t *k, const hier_req_notify_t *notify)
{
    hier_req_t *q = hier_req_nkept ? hier_req_kept[--hier_req_nkept] : malloc(sizeof(*q));
    if (!q) return NULL;
    q->c = (hier_comm_t *)c;
    q->next = NULL;
    q->call = *k;
    q->counts = NULL;
    q->notify = *notify;
    q->st = HIER_IN_PROGRESS;
    q->freed = 0;
    q->net_bytes = 0;
    if (k->coll != HIER_COLL_REDUCE_SCATTER) return q;
    if (!(q->counts = malloc(2 * (size_t)c->size * sizeof(size_t)))) {
        free(q);
        return NULL;
    }
    size_t total = 0;
    for (int r = 0; r < c->size; r++) {
        q->counts[r] = k->rcounts[r];
        q->counts[c->size + r] = total;
        total += k->rcounts[r];
    }
    q->call.rcounts = q->counts;
    q->call.count = total;
    return q;
}

/* (the lock held) */
static void hier_req_release(hier_req_t *q)
{
    free(q->counts);
    if (hier_req_nkept < HIER_REQ_KEEP) hier_req_kept[hier_req_nkept++] = q;
    else free(q);
}

/* ---- 2-4. started, advanced, over ------------------------------------------- */

static void hier_req_start(hier_req_t *q)
{
    hier_comm_t *c = q->c;
    const hier_req_call_t *k = &q->call;
    if (c->size == 1) return;
    uint32_t digest = k->coll == HIER_COLL_REDUCE_SCATTER ? hier_sig_digest(q->counts, c->size) : 0;
    hier_comm_sign(c, k->sig_coll, k->count, k->dt, k->op, digest);
    if (q->choice.path == HIER_PATH_SHM_LL) {
        hier_exec_ll_t ll = hier_comm_ll(c);
        hier_exec_ll_post(&ll, &q->llc, &q->llq);
    } else {
        hier_run_begin(&q->run, &q->plan, &q->args, k->sbuf, k->rbuf, q->kernel);
    }
}

/* A one-rank communicator's result is its input. */
static hier_status_t hier_req_self(hier_req_t *q)
{
    const hier_req_call_t *k = &q->call;
    size_t bytes = k->coll == HIER_COLL_ALLGATHER ? k->count : k->count * hier_dtype_size(k->dt);
    if (k->sbuf) memcpy(k->rbuf, k->sbuf, bytes);
    return HIER_OK;
}

/* 3: as far as it goes; the user's operation installed in this thread meanwhile. */
static hier_status_t hier_req_step(hier_req_t *q)
{
    hier_comm_t *c = q->c;
    if (c->size == 1) return hier_req_self(q);
    hier_reduce_user_saved_t saved;
    hier_status_t st;
    if (q->call.op == HIER_OP_USER) hier_reduce_user_swap(&q->call.user, q->call.dt, &saved);
    if (q->choice.path == HIER_PATH_SHM_LL) {
        hier_exec_ll_t ll = hier_comm_ll(c);
        st = hier_exec_ll_test(&ll, &q->llc, &q->llq);
    } else {
        st = hier_run_advance(&q->run, 0, &q->net_bytes);
        if (st != HIER_IN_PROGRESS) st = hier_node_ran(c, &q->args, st);
    }
    if (q->call.op == HIER_OP_USER) hier_reduce_user_restore(&saved);
    return st;
}

static void hier_req_list(hier_comm_t *c)
{
    c->req_prev = NULL;
    c->req_next = hier_req_comms;
    if (hier_req_comms) hier_req_comms->req_prev = c;
    hier_req_comms = c;
}

static void hier_req_unlist(hier_comm_t *c)
{
    if (c->req_prev) c->req_prev->req_next = c->req_next;
    else hier_req_comms = c->req_next;
    if (c->req_next) c->req_next->req_prev = c->req_prev;
    c->req_prev = c->req_next = NULL;
}

/* The first request is out of the queue with its status, told. */
static void hier_req_pop(hier_comm_t *c, hier_status_t st)
{
    hier_req_t *q = c->req_head;
    c->req_head = q->next;
    if (!c->req_head) {
        c->req_tail = NULL;
        hier_req_unlist(c);
    }
    q->st = st;
    if (q->notify.done) q->notify.done(q, st, q->notify.arg);
    if (q->freed) hier_req_release(q);
}

/* 4: the first request is over, and the next starts; one that failed
 * failed the communicator, and every request behind it with its status
 * (they never start: the peers' fail alike). */
static void hier_req_over(hier_comm_t *c, hier_status_t st)
{
    hier_req_pop(c, st);
    if (st != HIER_OK) {
        hier_comm_failed(c, st);
        while (c->req_head) hier_req_pop(c, st);
    }
    if (c->req_head) hier_req_start(c->req_head);
}

/* The communicator's requests, as far as they go (the lock held); how many ended. */
static int hier_req_advance(hier_comm_t *c)
{
    int ended = 0;
    while (c->req_head) {
        hier_status_t st = hier_req_step(c->req_head);
        if (st == HIER_IN_PROGRESS) break;
        hier_req_over(c, st);
        ended++;
    }
    return ended;
}

/* 1: made; queued, and started and advanced once when it is first. */
hier_status_t hier_req_make(hier_comm_t *c, const hier_req_call_t *call, const hier_req_notify_t *notify,
                            hier_path_t *path_p, hier_req_t **req_p)
{
    hier_status_t st = hier_req_ready(c, call->coll, path_p);
    if (st != HIER_OK) return st;
    hier_path_t path = HIER_PATH_SELF;
    hier_req_lock(); /* (the plan reads what a request ahead may change: failing) */
    hier_req_t *q = hier_req_alloc(c, call, notify);
    if (!q) st = HIER_ERR_NO_MEMORY;
    else if (call->coll != HIER_COLL_ALLGATHER && hier_reduce_kernel_get(call->dt, call->op, &q->kernel) != HIER_OK)
        st = hier_req_refuse(HIER_PATH_FALLBACK_OP, "", &path);
    else if (c->size > 1)
        st = hier_req_plan(q, &path);
    if (st != HIER_OK) {
        if (q) hier_req_release(q);
        hier_req_unlock();
        if (st == HIER_ERR_NOT_SUPPORTED) *path_p = path;
        return st;
    }
    if (c->size > 1) path = q->choice.path;
    *req_p = q;
    *path_p = path;
    if (c->req_tail) {
        c->req_tail->next = q;
    } else {
        c->req_head = q;
        hier_req_list(c);
        hier_req_start(q);
    }
    c->req_tail = q;
    hier_req_advance(c);
    hier_req_unlock();
    return HIER_OK;
}

hier_status_t hier_req_test(hier_req_t *q)
{
    hier_req_lock();
    if (q->st == HIER_IN_PROGRESS) hier_req_advance(q->c);
    hier_status_t st = q->st;
    hier_req_unlock();
    return st;
}

int hier_req_progress(void)
{
    int ended = 0;
    if (!hier_req_comms || !hier_req_trylock()) return 0;
    for (hier_comm_t *c = hier_req_comms, *next; c; c = next) {
        next = c->req_next; /* (c leaves the list when its last request ends) */
        ended += hier_req_advance(c);
    }
    hier_req_unlock();
    return ended;
}

uint64_t hier_req_net_bytes(const hier_req_t *q)
{
    return q->net_bytes;
}

void hier_req_free(hier_req_t *q)
{
    if (!q) return;
    hier_req_lock();
    if (q->st != HIER_IN_PROGRESS) hier_req_release(q);
    else q->freed = 1;
    hier_req_unlock();
}

void hier_req_drain(hier_comm_t *c)
{
    for (unsigned turn = 0;; turn++) {
        hier_req_lock();
        hier_req_advance(c);
        int left = c->req_head != NULL;
        hier_req_unlock();
        if (!left) return;
        if (c->ops.progress) c->ops.progress();
        if (turn >= HIER_REQ_DRAIN_SPIN) sched_yield();
    }
}

void hier_req_orphan(hier_comm_t *c)
{
    hier_req_lock();
    if (c->req_head)
        HIER_ERROR("rank %d: a communicator was freed with nonblocking collectives not over: they fail", c->rank);
    while (c->req_head) hier_req_pop(c, HIER_ERR_INTERNAL);
    hier_req_unlock();
}
