/* hier_comm_req.c: nonblocking collectives as requests (hier_comm.h): the blocking call's plan and the
 * executor's place in it, run one at a time per communicator in the order made, never taking a collective step
 * (docs/design.md, "Nonblocking and persistent calls"):
 * 1. made: decided, every rank alike, from what every rank knows alike (the communicator's state, select/'s
 *    shape), or it falls back;
 * 2. started (first in the queue): its signature goes out, the low-latency payload is posted or the run begins;
 * 3. advanced, by a test of any request of the process or its progress, as far as it goes without waiting;
 * 4. over: its status kept, done() told, the next one started.
 * A persistent request is made once, then queued at every start (2-4). */
#define _GNU_SOURCE /* (sched_getaffinity) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hier_keep.h"
#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_comm_call.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_proc.h"
#include "comm/hier_comm_req.h"
#include "comm/hier_comm_req_impl.h"
#include "exec/hier_run.h"

static pthread_mutex_t hier_req_mutex = PTHREAD_MUTEX_INITIALIZER;
static hier_comm_t *hier_req_comms; /* communicators with requests, a doubly linked list */

static hier_keep_t hier_req_kept; /* requests over, kept for the next ones (under the lock) */

/* The lock, where threads may call at once (MPI_THREAD_MULTIPLE): every
 * queue, the list and the kept requests. */
static void hier_req_lock(void)
{
    hier_lock_mutex_take(&hier_req_mutex);
}

static int hier_req_trylock(void)
{
    return hier_lock_mutex_try(&hier_req_mutex);
}

static void hier_req_unlock(void)
{
    hier_lock_mutex_drop(&hier_req_mutex);
}

/* ---- 1. made (the plan: hier_req_plan.c) ------------------------------------ */

hier_status_t hier_req_ready(hier_comm_t *c, hier_coll_t coll, hier_path_t *path_p)
{
    if (hier_req_enabled(c, coll, path_p) != HIER_OK) return HIER_ERR_NOT_SUPPORTED;
    if (hier_req_busy(c) || hier_req_sets_up(c)) return HIER_OK; /* (decided when it begins) */
    return hier_req_servable(c, coll, path_p);
}

/* (the lock held) */
static hier_req_t *hier_req_alloc(const hier_comm_t *c, const hier_req_call_t *k, const hier_req_notify_t *notify)
{
    hier_req_t *q = hier_keep_take(&hier_req_kept);
    if (!q) q = malloc(sizeof(*q));
    if (!q) return NULL;
    q->c = (hier_comm_t *)c;
    q->next = NULL;
    q->call = *k;
    q->counts = NULL;
    q->notify = *notify;
    q->st = HIER_IN_PROGRESS;
    q->freed = 0;
    q->planned = q->decided = q->started = q->decide = q->handback = q->finished = q->ask = 0;
    q->path = HIER_PATH_SELF;
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
    if (hier_req_staged(&q->call.stage)) hier_req_stage_free(&q->call.stage);
    if (!hier_keep_put(&hier_req_kept, q)) free(q);
}

/* ---- 2-4. started, advanced, over ------------------------------------------- */

static int hier_req_thread_pass(void);


/* A request made while its communicator was busy (its set-up without
 * waiting, or requests ahead), decided when it begins, alike on every rank
 * (every rank begins it after the same ones): planned, or handed back
 * (HIER_ERR_NOT_SUPPORTED, q->path: why) for its caller to run otherwise. */
static hier_status_t hier_req_decide(hier_req_t *q)
{
    if (q->handback) return HIER_ERR_NOT_SUPPORTED;
    if (q->c->size == 1) return HIER_OK;
    return hier_req_replan(q, &q->path);
}

/* 2: begins, the first in its queue: the move to libfabric asked first
 * when the call is due to ask (0: not begun, the communicator is
 * SETTING); decided (made while the communicator was busy); where its run
 * wants the pipeline segment and there is none yet, the segment is made
 * first, without waiting (0 again); then signed and posted (1). */
static int hier_req_begin(hier_req_t *q, int in_thread)
{
    hier_comm_t *c = q->c;
    const hier_req_call_t *k = &q->call;
    if (q->ask) { /* (never in the progress thread: a communicator over the point-to-point is MPI's thread's) */
        q->ask = 0;
        if (hier_req_switch_due(c, k) && hier_comm_switch_begin(c) && c->state == HIER_COMM_SETTING) return 0;
    }
    if (!q->decided) {
        q->decided = 1;
        q->begun = q->decide ? hier_req_decide(q) : HIER_OK;
    }
    if (q->begun == HIER_OK && c->size > 1 && q->choice.path != HIER_PATH_SHM_LL && hier_params.nonblocking_setup &&
        hier_node_wants_pipe(c, &q->args) && (in_thread || (hier_comm_pipe_begin(c) && c->state == HIER_COMM_SETTING)))
        return 0; /* (the progress thread leaves the segment's making, Open MPI's messages, to MPI's thread) */
    q->started = 1;
    if (q->begun != HIER_OK || c->size == 1) return 1;
    uint32_t digest = k->coll == HIER_COLL_REDUCE_SCATTER ? hier_sig_digest(q->counts, c->size) : 0;
    hier_comm_sign(c, k->sig_coll, k->count, k->dt, k->op, digest);
    if (q->choice.path == HIER_PATH_SHM_LL) {
        hier_exec_ll_t ll = hier_comm_ll(c);
        hier_exec_ll_post(&ll, &q->llc, &q->llq);
    } else if ((q->begun = hier_node_prep(c, &q->args, 1, &q->plan)) == HIER_OK) {
        q->path = hier_comm_path(c, q->choice.path); /* (the transport it runs over from here) */
        hier_run_begin(&q->run, &q->plan, &q->args, k->sbuf, k->rbuf, q->kernel);
    } else if (q->begun != HIER_ERR_NO_MEMORY) {
        q->begun = HIER_ERR_INTERNAL; /* (its fit was decided before, and nothing changed it since) */
    }
    return 1;
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
    if (q->begun != HIER_OK) return q->begun;
    if (c->size == 1) return hier_req_self(q);
    hier_reduce_user_saved_t saved;
    hier_status_t st;
    if (q->call.op == HIER_OP_USER) hier_reduce_user_swap(&q->call.user, q->call.dt, &saved);
    if (q->choice.path == HIER_PATH_SHM_LL) {
        hier_exec_ll_t ll = hier_comm_ll(c);
        st = hier_exec_ll_test(&ll, &q->llc, &q->llq);
    } else {
        st = hier_run_advance(&q->run, 0, &q->net_bytes);
        if (st != HIER_IN_PROGRESS) st = hier_node_ran(c, st);
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
    if (st == HIER_OK && hier_req_staged(&q->call.stage)) st = hier_req_stage_out(&q->call.stage);
    q->st = st;
    if (q->notify.done) q->notify.done(q, st, q->notify.arg);
    if (q->freed) hier_req_release(q);
}

/* 4: the first request is over (handed back: over for hier), and the next
 * begins. One that failed failed the communicator: hier refuses it from
 * now on, and the requests behind it, which never began on any rank (the
 * peers' fail at the same one), are handed back with its later calls, to
 * run and complete under the previous component. */
static void hier_req_over(hier_comm_t *c, hier_status_t st)
{
    hier_req_pop(c, st);
    if (st == HIER_OK || st == HIER_ERR_NOT_SUPPORTED) return;
    hier_comm_failed(c, st);
    while (c->req_head) {
        c->req_head->path = c->refused;
        hier_req_pop(c, HIER_ERR_NOT_SUPPORTED);
    }
}

/* The communicator's set-up and requests, as far as they go (the lock
 * held); how many requests ended. */
static int hier_req_advance(hier_comm_t *c)
{
    int ended = 0;
    if (c->state == HIER_COMM_SETTING && !hier_comm_setup_step(c)) return 0;
    while (c->req_head) {
        hier_req_t *q = c->req_head;
        if (!q->started && !hier_req_begin(q, 0)) break; /* (SETTING: its pipeline segment first) */
        hier_status_t st = q->finished ? q->finish_st : hier_req_step(q);
        if (st == HIER_IN_PROGRESS) break;
        hier_req_over(c, st);
        ended++;
    }
    return ended;
}

/* 2: queued, and advanced (the lock held). */
static void hier_req_queue(hier_comm_t *c, hier_req_t *q)
{
    if (c->req_tail) {
        c->req_tail->next = q;
    } else {
        c->req_head = q;
        hier_req_list(c);
    }
    c->req_tail = q;
    hier_req_advance(c);
}

int hier_req_busy(const hier_comm_t *c)
{
    return c->req_head != NULL || c->state == HIER_COMM_SETTING;
}

/* 1: made, then queued. A communicator's first call, nonblocking, starts
 * its set-up without waiting (every rank meets it NEW at the same call).
 * While the communicator is busy, a request is decided when it begins: the
 * calls it runs, and those it hands back to the previous component, then
 * start in the order they were made on every rank. */
hier_status_t hier_req_make(hier_comm_t *c, const hier_req_call_t *call, const hier_req_notify_t *notify,
                            hier_path_t *path_p, hier_req_t **req_p)
{
    hier_status_t st = hier_req_enabled(c, call->coll, path_p);
    if (st != HIER_OK) return st;
    hier_path_t path = HIER_PATH_SELF;
    if (hier_params.progress_thread) hier_req_thread_start(hier_req_thread_pass);
    hier_req_lock(); /* (the plan reads what a request ahead may change: failing) */
    if (hier_req_sets_up(c)) hier_comm_setup_begin(c);
    int busy = hier_req_busy(c);
    hier_req_t *q = NULL;
    if (!busy) st = hier_req_servable(c, call->coll, &path);
    if (st == HIER_OK && !(q = hier_req_alloc(c, call, notify))) st = HIER_ERR_NO_MEMORY;
    if (q && (st = hier_req_kernel(q, &path)) == HIER_OK && c->size > 1 && !busy) st = hier_req_plan(q, 1, &path);
    if (q && busy && st == HIER_ERR_NOT_SUPPORTED) { /* (its turn hands it back) */
        q->handback = 1;
        st = HIER_OK;
    }
    if (st != HIER_OK) {
        if (q) q->call.stage = (hier_req_stage_t){0}; /* (the caller's still) */
        if (q) hier_req_release(q);
        hier_req_unlock();
        if (st == HIER_ERR_NOT_SUPPORTED) *path_p = path;
        return st;
    }
    q->decide = busy;
    q->ask = 1; /* (when it begins: the communicator's state then is every rank's, not when it is made) */
    q->path = busy || c->size == 1 ? path : hier_comm_path(c, q->choice.path);
    *req_p = q;
    *path_p = q->path;
    hier_req_queue(c, q);
    hier_req_unlock();
    return HIER_OK;
}

hier_status_t hier_req_defer(hier_comm_t *c, hier_path_t why, const hier_req_notify_t *notify, hier_req_t **req_p)
{
    hier_req_call_t none = {.coll = HIER_COLL_ALLGATHER};
    hier_req_lock();
    if (!hier_req_busy(c)) {
        hier_req_unlock();
        return HIER_ERR_NOT_SUPPORTED;
    }
    hier_req_t *q = hier_req_alloc(c, &none, notify);
    if (!q) {
        hier_req_unlock();
        return HIER_ERR_NO_MEMORY;
    }
    q->decide = q->handback = 1;
    q->path = why;
    *req_p = q;
    hier_req_queue(c, q);
    hier_req_unlock();
    return HIER_OK;
}

hier_path_t hier_req_path(const hier_req_t *q)
{
    return q->path;
}

/* 1, persistent: the set-up (its first call) and the plan's collective
 * steps, every rank alike. */
hier_status_t hier_req_init(hier_comm_t *c, const hier_req_call_t *call, const hier_req_notify_t *notify,
                            hier_path_t *path_p, hier_req_t **req_p)
{
    hier_path_t path = HIER_PATH_SELF;
    hier_status_t st = hier_req_enabled(c, call->coll, path_p);
    if (st != HIER_OK) return st;
    if (hier_params.progress_thread) hier_req_thread_start(hier_req_thread_pass);
    if (c->size > 1) {
        hier_req_drain(c); /* (the steps below are collective: the requests ahead first) */
        if (c->state == HIER_COMM_NEW) /* (its verdict: c->state) */
            (void)hier_comm_prepare(c, call->coll, hier_req_bytes(c, call), NULL, &path);
    }
    if ((st = hier_req_servable(c, call->coll, path_p)) != HIER_OK) return st;
    hier_req_lock();
    hier_req_t *q = hier_req_alloc(c, call, notify);
    if (q) st = hier_req_kernel(q, &path);
    hier_req_unlock();
    if (!q) return HIER_ERR_NO_MEMORY;
    q->st = HIER_OK; /* (not running) */
    if (st == HIER_OK && c->size > 1) {
        st = hier_comm_failed(c, hier_req_plan(q, 0, &path));
        q->planned = st == HIER_OK;
    }
    if (st != HIER_OK) {
        hier_req_free(q);
        if (st == HIER_ERR_NOT_SUPPORTED) *path_p = path;
        return st;
    }
    q->path = q->planned ? hier_comm_path(c, q->choice.path) : HIER_PATH_SELF;
    *path_p = q->path;
    *req_p = q;
    return HIER_OK;
}

void hier_req_restage(hier_req_t *q, const hier_req_stage_t *stage)
{
    hier_req_call_t *k = &q->call;
    k->stage = *stage;
    if (k->sbuf) k->sbuf = hier_accel_mirror_at(&stage->s, (void *)k->sbuf);
    k->rbuf = hier_accel_mirror_at(&stage->r, k->rbuf);
    q->llc.sbuf = k->sbuf;
    q->llc.rbuf = k->rbuf;
}

/* 2-4 again, persistent. */
hier_status_t hier_req_start(hier_req_t *q, hier_path_t *path_p)
{
    hier_comm_t *c = q->c;
    hier_path_t path = HIER_PATH_SELF;
    hier_status_t st = HIER_OK;
    hier_req_lock();
    if (q->st == HIER_IN_PROGRESS) {
        hier_req_unlock();
        HIER_ERROR("rank %d: a persistent collective started again before its end", c->rank);
        return HIER_ERR_INVALID_ARG;
    }
    int busy = hier_req_busy(c);
    if (c->size > 1 && !busy) st = hier_req_replan(q, &path);
    if (st == HIER_OK && hier_req_staged(&q->call.stage)) st = hier_req_stage_in(&q->call.stage);
    if (st != HIER_OK) {
        hier_req_unlock();
        if (st == HIER_ERR_NOT_SUPPORTED) *path_p = path;
        return st;
    }
    q->st = HIER_IN_PROGRESS;
    q->next = NULL;
    q->net_bytes = 0;
    q->decided = q->started = q->handback = q->finished = 0;
    q->decide = busy;
    q->path = path;
    *path_p = path;
    hier_req_queue(c, q);
    hier_req_unlock();
    return HIER_OK;
}

/* ---- the progress thread's work (the thread: hier_req_thread.c) ------------- */

/* Where a request's run stands, as one number that changes whenever it
 * moves (a step, a chunk, a segment sent or received). */
static uint64_t hier_req_mark(const hier_req_t *q)
{
    const hier_run_req_t *r = &q->run;
    if (!q->started || q->begun != HIER_OK || q->c->size == 1 || q->choice.path == HIER_PATH_SHM_LL)
        return q->started; /* (no run: begun or not is all it says) */
    uint64_t moved = r->r.netx ? r->r.netx->moved : 0;
    return 1 + moved + ((uint64_t)r->plan.at << 56) + ((uint64_t)r->plan.k << 40) + ((uint64_t)r->plan.started << 24) +
           r->pos;
}

/* What the thread does to a communicator's first request: moves its data
 * (begins it, decided as MPI's thread would; steps it). What needs Open
 * MPI (a fiber's messages, a user's operation, a handed-back call) and the
 * end's telling (done()) it leaves to the next MPI call's progress.
 * Returns 2 if the request moved, 1 if it was the thread's to move but
 * waits (for a peer), 0 if it is MPI's thread's. */
static int hier_req_thread_step(hier_comm_t *c)
{
    hier_req_t *q = c->req_head;
    if (!q || q->finished || c->state == HIER_COMM_SETTING || q->call.op == HIER_OP_USER) return 0;
    /* (between nodes, a libfabric the MPI library also drives is left to MPI's
     * threads, unless the parameter says 2: Open MPI 6.0 with its ofi
     * components hung with it so, on 2 x 2 fake nodes) */
    if (c->layout.nnodes > 1 && hier_params.progress_thread < 2 && hier_proc_fabric_shared()) return 0;
    if (c->net && !c->net->fabric) return 0; /* (over Open MPI's point-to-point: MPI's thread) */
    uint64_t mark = hier_req_mark(q);
    if (!q->started && !hier_req_begin(q, 1)) return 0; /* (left to MPI's thread) */
    hier_status_t st = hier_req_step(q);
    if (st != HIER_IN_PROGRESS) {
        q->finish_st = st;
        q->finished = 1;
    }
    return hier_req_mark(q) != mark ? 2 : 1;
}

/* One pass of the progress thread (hier_req_thread.c) over every
 * communicator with requests: 2 if one moved, 1 if some wait for a peer,
 * 0 if none is the thread's to move. */
static int hier_req_thread_pass(void)
{
    int most = 0;
    pthread_mutex_lock(&hier_req_mutex);
    for (hier_comm_t *c = hier_req_comms; c; c = c->req_next) {
        int got = hier_req_thread_step(c);
        if (got > most) most = got;
    }
    pthread_mutex_unlock(&hier_req_mutex);
    return most;
}

hier_status_t hier_req_test(hier_req_t *q)
{
    hier_req_lock();
    if (q->st == HIER_IN_PROGRESS) hier_req_advance(q->c);
    hier_status_t st = q->st;
    hier_req_unlock();
    return st;
}

/* Open MPI's progress, entered again from inside it (a set-up's fiber
 * testing its messages, the previous component starting a handed-back
 * call): nothing then. (Threaded, the lock already says so to the other
 * threads; a plain flag, not a thread-local one: a shared library's
 * thread-local costs a call at each look, and progress looks often.) */
static _Atomic int hier_req_progressing;

int hier_req_progress(void)
{
    int ended = 0;
    if (!hier_req_comms || atomic_load_explicit(&hier_req_progressing, memory_order_relaxed) ||
        !hier_req_trylock())
        return 0;
    atomic_store_explicit(&hier_req_progressing, 1, memory_order_relaxed);
    for (hier_comm_t *c = hier_req_comms, *next; c; c = next) {
        next = c->req_next; /* (c leaves the list when its last request ends) */
        ended += hier_req_advance(c);
    }
    atomic_store_explicit(&hier_req_progressing, 0, memory_order_relaxed);
    hier_req_unlock();
    return ended;
}

/* One request's account (the lock held). */
static void hier_req_describe(const hier_req_t *q, int i)
{
    char sig[128];
    hier_sig_describe(hier_sig_make(q->call.sig_coll, q->call.count, q->call.dt, q->call.op, 0, 0), sig, sizeof(sig));
    HIER_ERROR("  request %d: %s: %s%s, path %s", i, sig, !q->started ? "not begun (waits for the ones ahead)"
               : q->begun != HIER_OK ? "ended when it began: " : "running",
               q->started && q->begun != HIER_OK ? hier_status_str(q->begun) : "", hier_path_name(q->path));
    if (q->started && q->begun == HIER_OK && q->choice.path != HIER_PATH_SHM_LL && q->c->size > 1)
        hier_run_describe(&q->run);
}

void hier_req_report(void)
{
    if (!hier_req_trylock()) { /* (a thread holds it, maybe the one asking: say so rather than wait) */
        HIER_ERROR("requests: the lock is held (a request is advancing); no report");
        return;
    }
    if (!hier_req_comms) HIER_ERROR("requests: none in flight");
    for (const hier_comm_t *c = hier_req_comms; c; c = c->req_next) {
        HIER_ERROR("requests of rank %d of a communicator of %d ranks (%d nodes), state %d, %llu calls signed:",
                   c->rank, c->size, c->layout.nnodes, (int)c->state, (unsigned long long)c->calls);
        int i = 0;
        for (const hier_req_t *q = c->req_head; q; q = q->next) hier_req_describe(q, i++);
    }
    hier_req_unlock();
}

uint64_t hier_req_net_bytes(const hier_req_t *q)
{
    return q->net_bytes;
}

int hier_req_staged_through_host(const hier_req_t *q)
{
    return hier_req_staged(&q->call.stage);
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
        int left = hier_req_busy(c);
        hier_req_unlock();
        if (!left) return;
        if (c->ops.progress) c->ops.progress();
        if (turn >= HIER_REQ_DRAIN_SPIN) sched_yield();
    }
}

void hier_req_orphan(hier_comm_t *c)
{
    while (c->state == HIER_COMM_SETTING && !hier_comm_setup_step(c)) /* (its messages are in flight: to their end) */
        if (c->ops.progress) c->ops.progress();
    hier_req_lock();
    if (c->req_head)
        HIER_ERROR("rank %d: a communicator was freed with nonblocking collectives not over: they fail", c->rank);
    while (c->req_head) hier_req_pop(c, HIER_ERR_INTERNAL);
    hier_req_unlock();
}
