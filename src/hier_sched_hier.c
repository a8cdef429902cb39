/* hier_sched_hier.c: collectives over several nodes, shared memory inside a
 * node and the network between nodes (the "split rail" of UCC CL/hier).
 *
 * Allreduce, one chunk: the chunk is cut into P pieces, P being the fewest
 * local ranks any node has, so every node has a rank for every piece and
 * nodes with more ranks simply give the extra ones no piece.
 * 1. copy my input chunk into my slot, except my own piece (only I read it);
 * 2. barrier (node);
 * 3. owners of a piece fold it over every local slot, in local rank order
 *    (their own straight from their input), into their receive buffer;
 * 4. each owner allreduces its piece with the owners of the same piece on the
 *    other nodes (ring or recursive doubling): every local rank drives the
 *    network at once;
 * 5. the owner copies the finished piece into its slot;
 * 6. barrier (node);
 * 7. everyone copies the other pieces from their owners' slots.
 * The barrier argument of hier_sched.c holds unchanged (two per chunk); the
 * network steps touch only the owner's receive buffer. */
#include "hier_part.h"
#include "hier_sched_impl.h"

void hier_sched_hier_allreduce(const hier_sched_args_t *a, size_t first, size_t len, int p, hier_sched_out_t *out)
{
    size_t es = a->esize, off = first * es, align = hier_part_align(es), poff = 0, plen = 0;
    int owner = a->me < a->pieces;

    if (owner) hier_part_range(len, a->pieces, a->me, align, &poff, &plen);
    hier_sched_copy_in_except(a, first, len, first + poff, plen, p, out);                         /* 1 */
    hier_sched_barrier(out);                                                                      /* 2 */
    if (owner && plen) {
        hier_step_t *red = hier_sched_reduce(out, hier_ref(HIER_BUF_RECV, 0, 0, off + poff * es),  /* 3 */
                                             hier_ref(HIER_BUF_SLOT, 0, p, poff * es), plen, a->order, a->nranks);
        hier_sched_reduce_self(red, a->me, hier_sched_input(a, off + poff * es, off + poff * es));
        if (a->nnodes > 1) {                                                                      /* 4 */
            size_t counts[HIER_SCHED_MAX_NODES], displs[HIER_SCHED_MAX_NODES];
            hier_sched_net_even_blocks(plen, a->nnodes, es, counts, displs);
            hier_net_args_t na = {.kind = (hier_net_kind_t)a->net_kind, .nparts = a->nnodes, .me = a->node,
                                  .esize = es, .off = first + poff, .count = plen, .counts = counts,
                                  .displs = displs};
            out->n += hier_sched_net_build(&na, out->steps + out->n);
        }
        hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, poff * es),                         /* 5 */
                        hier_ref(HIER_BUF_RECV, 0, 0, off + poff * es), plen * es);
    }
    hier_sched_barrier(out);                                                                      /* 6 */
    for (int i = 1; i <= a->pieces; i++) {                                                        /* 7 */
        int j = (a->me + i) % a->pieces;
        if (j == a->me) continue;
        size_t jo, jl;
        hier_part_range(len, a->pieces, j, align, &jo, &jl);
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, off + jo * es), hier_ref(HIER_BUF_SLOT, j, p, jo * es),
                        jl * es);
    }
}
