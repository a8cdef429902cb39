/* hier_comm_life.c: a communicator's life: made (its set-up at the first call: hier_comm_setup.c), measured,
 * freed; and the process's settings (docs/design.md, "A communicator's life"). Its calls: hier_comm.c. */
#include <pthread.h>
#include <stdlib.h>

#include "base/hier_params.h"
#include "comm/hier_comm.h"
#include "comm/hier_comm_net.h"
#include "comm/hier_comm_node.h"
#include "comm/hier_comm_pd.h"
#include "comm/hier_comm_req.h"
#include "comm/hier_proc.h"
#include "exec/hier_reduce.h"
#include "exec/hier_stage.h"
#include "select/hier_select_rules.h"

/* The rules file, read once per process (refused: logged, the built-in rules serve). */
static void hier_comm_rules_once(void)
{
    (void)hier_rules_load(hier_params.rules);
}

hier_status_t hier_comm_create(int size, int rank, const hier_comm_ops_t *ops, hier_comm_t **comm_p)
{
    static pthread_once_t rules = PTHREAD_ONCE_INIT;
    pthread_once(&rules, hier_comm_rules_once);
    if (size < 1 || rank < 0 || rank >= size || !ops || !ops->peer) return HIER_ERR_INVALID_ARG;
    hier_comm_t *c = calloc(1, sizeof(*c));
    if (!c) return HIER_ERR_NO_MEMORY;
    c->size = size;
    c->rank = rank;
    c->ops = *ops;
    for (hier_coll_t k = HIER_COLL_ALLREDUCE; k <= HIER_COLL_REDUCE_SCATTER; k++) /* (parameters: fixed for the job) */
        c->served_colls |= (unsigned)(hier_select_algorithm(k) != HIER_ALGO_FALLBACK) << k;
    hier_proc_set_progress(ops->progress);
    hier_accel_init(); /* (before the first call classifies its buffers; cheap once done) */
    *comm_p = c;
    return HIER_OK;
}

void hier_comm_destroy(hier_comm_t *c)
{
    if (!c) return;
    hier_net_waiting(c, 0);
    hier_req_orphan(c);
    hier_comm_pd_close(c);
    hier_stage_free(c->stage);
    hier_net_free(c);
    hier_node_free(c);
    hier_layout_free(&c->layout);
    free(c->rs_displs);
    free(c->rs_slices);
    free(c);
}

void hier_comm_user_op_set(const hier_user_op_t *user)
{
    hier_reduce_user_set(user);
}

void hier_comm_lend_topology(void *(*get)(void))
{
    hier_proc_lend_topology(get);
}

void hier_proc_finalize(void)
{
    hier_req_thread_stop();
    hier_proc_release();
}

void hier_comm_footprint(const hier_comm_t *c, hier_comm_footprint_t *fp)
{
    const hier_node_t *nd = c->node;
    *fp = (hier_comm_footprint_t){.node = nd != NULL, .net = c->net != NULL, .peer_direct = c->pd != NULL,
                                  .staging = c->stage != NULL,
                                  .heap_bytes = sizeof(*c) + hier_stage_bytes(c->stage)};
    if (c->layout.node_ranks)
        fp->heap_bytes += ((size_t)c->size * 2 + 1) * sizeof(uint32_t) + /* (hier_layout_reserve) */
                          (size_t)c->size * sizeof(size_t);
    if (!nd) return;
    fp->pipeline = nd->pipe_state == HIER_PIPE_READY;
    fp->recycled = nd->recycled;
    fp->mapped_bytes = hier_shm_size(hier_shm_shape(nd->small.seg)) +
                       (nd->pipe.seg ? hier_shm_size(hier_shm_shape(nd->pipe.seg)) : 0);
    fp->heap_bytes += sizeof(*nd) + (size_t)c->layout.nranks * (2 * sizeof(uint8_t *) + 6 * sizeof(uint32_t)) +
                      nd->nsteps * nd->nqueues * sizeof(hier_net_send_t) +
                      (nd->scratch ? HIER_EXEC_SCRATCH_BYTES : 0);
    for (unsigned i = 0; i <= HIER_RUN_DEPTH_MAX && nd->steps[i]; i++) fp->heap_bytes += nd->nsteps * sizeof(hier_step_t);
    if (c->net) fp->heap_bytes += hier_net_bytes(c);
}

void hier_comm_fabric_driven(int driven)
{
    hier_proc_set_fabric_driven(driven);
}
