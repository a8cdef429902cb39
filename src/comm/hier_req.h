/* hier_req.h: a nonblocking call's request (hier_comm_req.c) as its caller sees it: what hier_comm.h's nonblocking
 * entries return. */
#ifndef HIER_REQ_H
#define HIER_REQ_H

#include <stdint.h>

#include "base/hier_stats.h"
#include "base/hier_status.h"
#include "comm/hier_comm_ops.h"

typedef struct hier_req hier_req_t;
/* A nonblocking call's request runs once; a persistent one (MPI_*_init) is planned once, run at every start. */
typedef enum { HIER_REQ_ONCE, HIER_REQ_PERSISTENT } hier_req_kind_t;
typedef void (*hier_req_done_fn_t)(hier_req_t *req, hier_status_t st, void *arg);
typedef struct {
    hier_req_done_fn_t done;
    void *arg;
} hier_req_notify_t;
/* What every entry checks first, for callers that prepare buffers before (packing): HIER_OK, or
 * HIER_ERR_NOT_SUPPORTED and why (coll: the blocking twin). */
hier_status_t hier_req_ready(hier_comm_t *comm, hier_coll_t coll, hier_path_t *path_p);
/* Whether the communicator is busy (its set-up under way without waiting, or requests not over): then every
 * nonblocking call on it goes through its queue, those the caller refuses itself by hier_req_defer, so the calls
 * the previous component runs start in the order they were made on every rank. */
int hier_req_busy(const hier_comm_t *comm);
/* A call the caller hands to the previous component, queued while comm is busy: done(req, HIER_ERR_NOT_SUPPORTED)
 * at its turn (hier_req_path: why), when the caller starts it. HIER_ERR_NOT_SUPPORTED: not busy, start it now. */
hier_status_t hier_req_defer(hier_comm_t *comm, hier_path_t why, const hier_req_notify_t *notify,
                             hier_req_t **req_p);
/* What served the request, or why it was handed back (done with HIER_ERR_NOT_SUPPORTED: the caller runs it). */
hier_path_t hier_req_path(const hier_req_t *req);
/* Run a persistent request again (MPI_Start; it must not be running): HIER_OK, queued, or HIER_ERR_NOT_SUPPORTED
 * and why this start is the previous component's (the same answer on every rank). */
hier_status_t hier_req_start(hier_req_t *req, hier_path_t *path_p);
/* Advance the request's communicator: HIER_IN_PROGRESS, or the request's final status. */
hier_status_t hier_req_test(hier_req_t *req);
/* Advance every communicator's requests (Open MPI's progress loop) unless another thread is at it; how many ended. */
int hier_req_progress(void);
/* Log every communicator's requests not over and where each stands in its plan (a watchdog's question,
 * mca_coll_hier_report); nothing changes. */
void hier_req_report(void);
/* What the request put on the fabric (once over). */
uint64_t hier_req_net_bytes(const hier_req_t *req);
/* Whether its buffers went through host mirrors (device memory). */
int hier_req_staged_through_host(const hier_req_t *req);
/* coll_hier_progress_thread -1 (auto): 1 to run the thread where a CPU is free for it (this process may run on
 * more than one CPU, and the node's local_ranks leave one free), else 0; logged. */
int hier_req_thread_choose(int local_ranks);
/* The progress thread (coll_hier_progress_thread) ends, if it runs: at finalize. */
void hier_req_thread_stop(void);
/* Give the request back: at once when it is over (a persistent one: not running), else when it is. */
void hier_req_free(hier_req_t *req);

#endif
