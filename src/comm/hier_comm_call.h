/* hier_comm_call.h: a collective call's steps that the requests (hier_comm_req.c) share with the blocking calls
 * (hier_comm.c); a call's start and failure are hier_comm_setup.h's. */
#ifndef HIER_COMM_CALL_H
#define HIER_COMM_CALL_H

#include "base/hier_sig.h"
#include "comm/hier_comm_choice.h"
#include "comm/hier_comm_setup.h"
#include "comm/hier_comm_state.h"
#include "exec/hier_exec_ll.h"
#include "select/hier_select.h"

/* A path as the communicator's transport carries it now (net_rd, or pml_rd over Open MPI's point-to-point). */
static inline hier_path_t hier_comm_path(const hier_comm_t *c, hier_path_t path)
{
    return c->net && !c->net->fabric ? hier_path_over_pml(path) : path;
}

/* A call starts on the node: its signature goes where the peers look (my control line; the network's message
 * headers). */
static inline void hier_comm_sign(hier_comm_t *c, hier_coll_t coll, uint64_t count, hier_dtype_t dt, hier_op_t op,
                                  uint32_t digest)
{
    hier_sig_t sig = hier_shm_sign_call(c->node->small.seg, &c->node->wait, coll, count, dt, op, digest, ++c->calls);
    if (c->net) c->net->netx.sig = sig;
}

/* The low-latency executor over the node segment. */
static inline hier_exec_ll_t hier_comm_ll(hier_comm_t *c)
{
    return (hier_exec_ll_t){.shm = c->node->small.seg, .wait = &c->node->wait};
}

#endif
