/* hier_comm.h: the core's view of one communicator, on one node or several,
 * and its collectives: what the glue calls. The glue supplies the few
 * services the core cannot provide itself, through hier_comm_ops_t.
 *
 * A communicator costs nothing until its first collective, which sets it up
 * (collective, one exchange of a small record and one agreement in the
 * common case); its levels are made when first needed: the node's segment
 * at set-up, pipeline buffers at the first message too large for the small
 * ones, the network level only when it spans nodes, peer direct and device
 * staging only for device buffers. */
#ifndef HIER_COMM_H
#define HIER_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_dtype.h"
#include "base/hier_stats.h"
#include "base/hier_status.h"
#include "comm/hier_comm_ops.h"
#include "comm/hier_req.h"


/* A communicator of `size` ranks, this one being `rank`: nothing happens
 * until its first collective. */
hier_status_t hier_comm_create(int size, int rank, const hier_comm_ops_t *ops, hier_comm_t **comm_p);
void hier_comm_destroy(hier_comm_t *comm);

/* Each returns HIER_OK when served, HIER_ERR_NOT_SUPPORTED when the caller
 * must use its fallback (nothing has been touched then), or an error.
 * *res_p says which path served the call or why it was refused, and
 * what the call put on the fabric and staged (hier_result_t).
 * sbuf == HIER_IN_PLACE: the call is in place (MPI_IN_PLACE), the data is
 * in rbuf. NULL is never in place: a NULL buffer that should hold data is
 * HIER_ERR_BUFFER. */
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
 * A nonblocking call is a request on its communicator. It starts at once
 * when no earlier request of the communicator is still on, else when they
 * are over (every rank starts them in the same order, as MPI has it), and
 * advances whenever a request is tested or the process's requests are
 * progressed: as far as it can without waiting. A blocking call on the
 * communicator first sees its requests over. Each entry returns HIER_OK
 * with *req_p, HIER_ERR_NOT_SUPPORTED when the caller must use its
 * fallback (*path_p: why; nothing touched), or an error. A call hier
 * cannot start without waiting for its peers first (the communicator's
 * set-up, its pipeline segment, the single-copy probe, room for longer
 * schedules: what its first blocking calls make) falls back, every rank
 * alike: HIER_PATH_FALLBACK_NONBLOCKING. The buffers stay the caller's
 * until the request is over; rcounts and `user` are copied. done(req, st,
 * arg) is called once, when the request is over, in the thread that
 * advanced it (maybe before the entry returns).
 * kind HIER_REQ_PERSISTENT (MPI_*_init, a collective call): the
 * communicator's set-up and the collective steps the plan needs are taken
 * here, on every rank, and the request does not run until hier_req_start
 * (as often as wanted; done() at each end); the buffers and `user` stay the
 * caller's until it is freed. */
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
/* The calling thread's user operation for its next calls with HIER_OP_USER
 * (the reductions of a call run in the thread that makes it); NULL removes it. */
void hier_comm_user_op_set(const hier_user_op_t *user);

/* Where the MPI library's own topology of this machine is (an hwloc
 * topology of the same library as the core's: base/hier_topo.h), asked for
 * at the first set-up that needs one instead of loading one; NULL: load one. */
void hier_comm_lend_topology(void *(*get)(void));

/* Whether the MPI library drives libfabric itself (an ofi MTL or BTL in
 * use): then no thread of hier's calls it, and the endpoint opens on MPI's
 * thread (assumed until said, before the first communicator). */
void hier_comm_fabric_driven(int driven);

/* What a communicator holds: levels made, and bytes of this process's
 * memory they use (segments mapped, and heap). For tests and benchmarks. */
typedef struct {
    int node, pipeline, net, peer_direct, staging;
    int recycled;                     /* its node segment was a freed communicator's */
    size_t mapped_bytes, heap_bytes;
} hier_comm_footprint_t;
void hier_comm_footprint(const hier_comm_t *comm, hier_comm_footprint_t *fp);

/* Release process-wide state (pools, channels, the fabric endpoint, the topology). */
void hier_proc_finalize(void);

#endif
