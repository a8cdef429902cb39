/* hier_req.h: a nonblocking call's request (comm/hier_comm_req.c), as its
 * caller sees it: what hier_comm.h's nonblocking entries return. */
#ifndef HIER_REQ_H
#define HIER_REQ_H

#include <stdint.h>

#include "base/hier_stats.h"
#include "base/hier_status.h"
#include "comm/hier_comm_ops.h"

typedef struct hier_req hier_req_t;
typedef void (*hier_req_done_fn_t)(hier_req_t *req, hier_status_t st, void *arg);
typedef struct {
    hier_req_done_fn_t done;
    void *arg;
} hier_req_notify_t;
/* What every entry checks first, for callers that prepare buffers before
 * (packing): HIER_OK, or HIER_ERR_NOT_SUPPORTED and why (coll: the
 * blocking twin). */
hier_status_t hier_req_ready(hier_comm_t *comm, hier_coll_t coll, hier_path_t *path_p);
/* Advance the request's communicator: HIER_IN_PROGRESS, or the request's
 * final status. */
hier_status_t hier_req_test(hier_req_t *req);
/* Advance every communicator's requests (Open MPI's progress loop), unless
 * another thread is at it; how many came to their end. */
int hier_req_progress(void);
/* What the request put on the fabric (once over). */
uint64_t hier_req_net_bytes(const hier_req_t *req);
/* Give the request back: at once when it is over, else when it is. */
void hier_req_free(hier_req_t *req);

#endif
