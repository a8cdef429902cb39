/* hier_sched_cma.c: single-copy schedules. Ranks read each other's buffers
 * directly through the kernel (cross-memory attach, process_vm_readv), so no
 * byte goes through the segment: only its barriers are used. Each rank has
 * published where its input and receive buffers are before the first barrier,
 * and the last barrier keeps every buffer alive until nobody reads it. */
#include "sched/hier_sched_cma.h"

#include "base/hier_part.h"

/* Allreduce, one piece of the vector per rank:
 * 1. barrier: every rank's buffers are published;
 * 2. fold my piece of every rank's input, in rank order (mine read locally),
 *    into my receive buffer;
 * 3. barrier: every piece is reduced;
 * 4. read every other rank's reduced piece from its receive buffer into mine;
 * 5. barrier: nobody returns while its buffer is being read.
 * In place, step 2 writes only my piece, which nobody else reads before step 3. */
static void hier_sched_cma_allreduce(const hier_sched_args_t *a, hier_sched_out_t *out)
{
    size_t es = a->esize, align = hier_part_align(es), off, len;

    hier_sched_barrier(out); /* 1 */
    hier_part_range(a->count, a->nranks, a->me, align, &off, &len);
    hier_step_t *red = hier_sched_reduce(out, hier_ref(HIER_BUF_RECV, 0, 0, off * es), /* 2 */
                      hier_ref(HIER_BUF_PEER_INPUT, 0, 0, off * es), len, a->order, a->nranks);
    hier_sched_reduce_self(red, a->me, hier_sched_input(a, off * es, off * es));
    hier_sched_barrier(out); /* 3 */
    for (int i = 1; i < a->nranks; i++) { /* 4 */
        int j = (a->me + i) % a->nranks;
        hier_part_range(a->count, a->nranks, j, align, &off, &len);
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, off * es), hier_ref(HIER_BUF_PEER_RECV, j, 0, off * es),
                        len * es);
    }
    hier_sched_barrier(out); /* 5 */
}

/* Allgather:
 * 1. barrier: every rank's block is published;
 * 2. copy my block into place (not in place), and read every other rank's
 *    block straight into its place;
 * 3. barrier: nobody returns while its block is being read. */
static void hier_sched_cma_allgather(const hier_sched_args_t *a, hier_sched_out_t *out)
{
    size_t block = a->count * a->esize;

    hier_sched_barrier(out); /* 1 */
    if (!a->in_place) /* 2 */
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, (size_t)a->me * block), hier_ref(HIER_BUF_SEND, 0, 0, 0),
                        block);
    for (int i = 1; i < a->nranks; i++) {
        int j = (a->me + i) % a->nranks;
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, (size_t)j * block), hier_ref(HIER_BUF_PEER_INPUT, j, 0, 0),
                        block);
    }
    hier_sched_barrier(out); /* 3 */
}

/* Reduce_scatter (not in place):
 * 1. barrier: every rank's input is published;
 * 2. fold my block of every rank's input, in rank order, into my receive buffer;
 * 3. barrier: nobody returns while its input is being read. */
static void hier_sched_cma_reduce_scatter(const hier_sched_args_t *a, hier_sched_out_t *out)
{
    size_t es = a->esize, d = a->rdispls[a->me];

    hier_sched_barrier(out); /* 1 */
    hier_step_t *red = hier_sched_reduce(out, hier_ref(HIER_BUF_RECV, 0, 0, 0), /* 2 */
                                         hier_ref(HIER_BUF_PEER_INPUT, 0, 0, d * es),
                      a->rcounts[a->me], a->order, a->nranks);
    hier_sched_reduce_self(red, a->me, hier_ref(HIER_BUF_SEND, 0, 0, d * es));
    hier_sched_barrier(out); /* 3 */
}

void hier_sched_cma_build(const hier_sched_args_t *a, hier_sched_out_t *out)
{
    switch (a->kind) {
    case HIER_SCHED_CMA_ALLREDUCE: hier_sched_cma_allreduce(a, out); break;
    case HIER_SCHED_CMA_ALLGATHER: hier_sched_cma_allgather(a, out); break;
    case HIER_SCHED_CMA_REDUCE_SCATTER: hier_sched_cma_reduce_scatter(a, out); break;
    default: break;
    }
}

size_t hier_sched_cma_input_offset(const hier_sched_args_t *a, int rank)
{
    return a->in_place && a->kind == HIER_SCHED_CMA_ALLGATHER ? (size_t)rank * a->count * a->esize : 0;
}
