/* hier_req_thread.c: the progress thread (coll_hier_progress_thread):
 * requests move while the application computes. What a pass does is the
 * requests' (hier_comm_req.c); here, when the thread runs and how long it
 * naps. */
#define _GNU_SOURCE /* (sched_getaffinity) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "base/hier_lock.h"
#include "base/hier_log.h"
#include "base/hier_params.h"
#include "comm/hier_proc.h"
#include "comm/hier_comm_req_impl.h"

static pthread_t hier_req_thread;
static _Atomic int hier_req_thread_state; /* 0 none, 1 running, 2 told to stop */

static int (*hier_req_thread_pass)(void); /* (set before the thread starts) */

void hier_req_thread_stop(void)
{
    int running = 1;
    if (atomic_compare_exchange_strong(&hier_req_thread_state, &running, 2)) {
        pthread_join(hier_req_thread, NULL);
        atomic_store(&hier_req_thread_state, 0);
    }
}

/* Passes over every communicator with requests; between them it naps:
 * HIER_REQ_THREAD_BUSY_NS after a pass that moved a request (the network's
 * pace), twice as long after each that did not, up to _WAIT_NS while its
 * requests wait for peers and _IDLE_NS while it has none it may move (only
 * MPI's thread moves some: between nodes when the MPI library drives
 * libfabric, over the point-to-point, set-ups). A thread that woke every
 * 10 us for requests it could not move took the CPU its rank needed: with
 * ranks sharing CPUs, calls took seconds. */
#define HIER_REQ_THREAD_BUSY_NS 10000L
#define HIER_REQ_THREAD_WAIT_NS 160000L
#define HIER_REQ_THREAD_IDLE_NS 1000000L
static void *hier_req_thread_main(void *arg)
{
    long nap = HIER_REQ_THREAD_IDLE_NS;
    (void)arg;
    while (atomic_load_explicit(&hier_req_thread_state, memory_order_acquire) == 1) {
        int most = hier_req_thread_pass();
        long most_nap = most ? HIER_REQ_THREAD_WAIT_NS : HIER_REQ_THREAD_IDLE_NS;
        nap = most == 2 ? HIER_REQ_THREAD_BUSY_NS : nap * 2 < most_nap ? nap * 2 : most_nap;
        nanosleep(&(struct timespec){.tv_nsec = nap}, NULL);
    }
    return NULL;
}

/* At the first request, when asked for, where the locks are taken (the glue
 * says threads may call at once when the parameter is on). */
void hier_req_thread_start(int (*pass)(void))
{
    int none = 0;
    if (!hier_params.progress_thread || !hier_lock_threaded() ||
        !atomic_compare_exchange_strong(&hier_req_thread_state, &none, 1))
        return;
    hier_req_thread_pass = pass;
    hier_proc_threads_guard(hier_req_thread_stop);
    if (pthread_create(&hier_req_thread, NULL, hier_req_thread_main, NULL) != 0) {
        HIER_ERROR("no progress thread could be started: requests advance in MPI calls only");
        atomic_store(&hier_req_thread_state, 0);
    }
}

int hier_req_thread_choose(int local_ranks)
{
    cpu_set_t mine;
    long cpus = hier_proc_cpus();
    int allowed = sched_getaffinity(0, sizeof(mine), &mine) == 0 ? CPU_COUNT(&mine) : 1;
    int on = allowed > 1 && cpus > local_ranks;
    HIER_LOG(HIER_LOG_COMM, "progress thread %s: %d rank(s) on this node, %ld CPU(s), %d this process may run on%s",
             on ? "on" : "off", local_ranks, cpus, allowed,
             on ? "" : allowed > 1 ? " (no CPU free for it)" : " (bound to one: it would take the rank's)");
    return on;
}
