/* hier_comm.h: the core's view of one communicator, on one node or several, and its collectives: what the glue
 * calls; the glue supplies the services the core cannot provide itself (hier_comm_ops_t). A communicator costs
 * nothing until its first collective sets it up; its levels are made when first needed (docs/design.md, "A
 * communicator's life"). */
#ifndef HIER_COMM_H
#define HIER_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_dtype.h"
#include "base/hier_stats.h"
#include "base/hier_status.h"
#include "comm/hier_comm_ops.h"
#include "comm/hier_req.h"


/* A communicator of `size` ranks, this one being `rank`: nothing happens until its first collective. */
hier_status_t hier_comm_create(int size, int rank, const hier_comm_ops_t *ops, hier_comm_t **comm_p);
void hier_comm_destroy(hier_comm_t *comm);

/* Each returns HIER_OK when served, HIER_ERR_NOT_SUPPORTED when the caller must use its fallback (nothing touched),
 * or an error; *res_p says which path served the call or why it was refused, and what it put on the fabric and
 * staged. sbuf == HIER_IN_PLACE: in place (MPI_IN_PLACE), the data in rbuf. NULL is never in place: a NULL buffer
 * that should hold data is HIER_ERR_BUFFER. */
extern const char hier_in_place_marker;
#define HIER_IN_PLACE ((const void *)&hier_in_place_marker)

hier_status_t hier_comm_allreduce(hier_comm_t *comm, const void *sbuf, void *rbuf, size_t count, hier_dtype_t dt,
                                  hier_op_t op, hier_result_t *res_p);
/* block_bytes: bytes each rank contributes; rbuf holds nranks blocks. */
hier_status_t hier_comm_allgather(hier_comm_t *comm, const void *sbuf, void *rbuf, size_t block_bytes,
                                  hier_result_t *res_p);
/* rcounts[r]: elements rank r receives; sbuf holds their sum. */
hier_status_t hier_comm_reduce_scatter(hier_comm_t *comm, const void *sbuf, void *rbuf, const size_t *rcounts,
                                       hier_dtype_t dt, hier_op_t op, hier_result_t *res_p);

/* ---- nonblocking collectives (hier_comm_req.c) ----
 * A request on its communicator, started when the communicator's earlier requests are over (every rank starts
 * them in the same order) and advanced, as far as it goes without waiting, whenever a request is tested or the
 * process's requests are progressed; a blocking call on the communicator first sees them over. Each entry returns
 * HIER_OK with *req_p, HIER_ERR_NOT_SUPPORTED when the caller must use its fallback (*path_p: why; nothing
 * touched), or an error; a call that would first wait for its peers (set-up, pipeline segment, single-copy probe,
 * memory for longer schedules) falls back, every rank alike: HIER_PATH_FALLBACK_NONBLOCKING. The buffers stay the
 * caller's until the request is over; rcounts and `user` are copied. done(req, st, arg) is called once per end,
 * in the thread that advanced it (maybe before the entry returns). kind HIER_REQ_PERSISTENT (MPI_*_init,
 * collective): the set-up and the plan's collective steps are taken here, on every rank; the request runs at each
 * hier_req_start, and the buffers and `user` stay the caller's until it is freed. */
hier_status_t hier_comm_iallreduce(hier_comm_t *comm, const void *sbuf, void *rbuf, size_t count, hier_dtype_t dt,
                                   hier_op_t op, const hier_user_op_t *user, const hier_req_notify_t *notify,
                                   hier_req_kind_t kind, hier_path_t *path_p, hier_req_t **req_p);
hier_status_t hier_comm_iallgather(hier_comm_t *comm, const void *sbuf, void *rbuf, size_t block_bytes,
                                   const hier_req_notify_t *notify, hier_req_kind_t kind, hier_path_t *path_p,
                                   hier_req_t **req_p);
hier_status_t hier_comm_ireduce_scatter(hier_comm_t *comm, const void *sbuf, void *rbuf, const size_t *rcounts,
                                        hier_dtype_t dt, hier_op_t op, const hier_user_op_t *user,
                                        const hier_req_notify_t *notify, hier_req_kind_t kind, hier_path_t *path_p,
                                        hier_req_t **req_p);
/* The calling thread's user operation for its next calls with HIER_OP_USER (a call's reductions run in the thread
 * that makes it); NULL removes it. */
void hier_comm_user_op_set(const hier_user_op_t *user);

/* A getter of the MPI library's own hwloc topology (the same library as the core's: base/hier_topo.h), asked at
 * the first set-up that needs one instead of loading one; NULL: load one. */
void hier_comm_lend_topology(void *(*get)(void));

/* Whether the MPI library drives libfabric itself (an ofi MTL or BTL; assumed until said, before the first
 * communicator): then no thread of hier's calls it, and the endpoint opens on MPI's thread. */
void hier_comm_fabric_driven(int driven);

/* What a communicator holds: levels made, and bytes of this process's memory they use. For tests and benchmarks. */
typedef struct {
    int node, pipeline, net, peer_direct, staging;
    int recycled;                     /* its node segment was a freed communicator's */
    size_t mapped_bytes, heap_bytes;
} hier_comm_footprint_t;
void hier_comm_footprint(const hier_comm_t *comm, hier_comm_footprint_t *fp);

/* Release process-wide state (pools, channels, the fabric endpoint, the topology). */
void hier_proc_finalize(void);

#endif
