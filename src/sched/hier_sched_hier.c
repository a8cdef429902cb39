/* hier_sched_hier.c: collectives over several nodes, shared memory inside a
 * node and the network between nodes (the "split rail" of UCC CL/hier).
 *
 * Every chunk is cut into P pieces, P being the fewest local ranks any node
 * has, so every node has an owner for every piece (local index j owns piece
 * j) and nodes with more ranks simply give the extra ones no piece. The
 * owners of piece j on all nodes form one inter-node group: every local rank
 * drives the network at once. Each builder has two node barriers per chunk,
 * so the barrier argument of hier_sched_intra.c holds unchanged; network steps
 * touch only the owner's receive buffer and its own slot region that nobody
 * else reads before the next barrier. Ranks of a node need not be consecutive
 * in the communicator: allgather blocks and reduce_scatter results are placed
 * by communicator rank (args->node_ranks). */
#include "sched/hier_sched_hier.h"

#include "base/hier_part.h"
#include "sched/hier_sched_net.h"

static int hier_sched_hier_rank(const hier_sched_args_t *a, int node, int l)
{
    return a->node_ranks[a->node_first[node] + l];
}

static int hier_sched_hier_total(const hier_sched_args_t *a)
{
    return a->node_first[a->nnodes];
}

/* Allgather: block bytes per chunk. A slot holds my block's chunk, then the
 * piece I own of every rank's block: (total + 1) chunks of U. */
size_t hier_sched_hier_units(const hier_sched_args_t *a)
{
    size_t u;
    switch (a->kind) {
    case HIER_SCHED_HIER_ALLGATHER:
        u = a->chunk_bytes / ((size_t)hier_sched_hier_total(a) + 1);
        return u >= 64 ? u & ~(size_t)63 : (u ? u : 1);
    default: return a->chunk_bytes / a->esize;
    }
}

/* The piece this rank owns of a chunk of `len` elements (zero length if none). */
static void hier_sched_hier_my_piece(const hier_sched_args_t *a, size_t len, size_t *off_p, size_t *len_p)
{
    *off_p = *len_p = 0;
    if (a->me < a->pieces) hier_part_range(len, a->pieces, a->me, hier_part_align(a->esize), off_p, len_p);
}

/* Steps 1-3 of allreduce and reduce_scatter: copy my input chunk into my
 * slot except my piece, barrier, and (owners) fold my piece over every
 * local slot, mine straight from my input, into my own slot. My piece of
 * the chunk in *off_p / *len_p (elements from the chunk's start; 0: none). */
static void hier_sched_hier_fold_piece(const hier_sched_args_t *a, size_t first, size_t len, int p,
                                       hier_sched_out_t *out, size_t *off_p, size_t *len_p)
{
    size_t es = a->esize, mo, ml;
    hier_sched_hier_my_piece(a, len, &mo, &ml);
    hier_sched_copy_in_except(a, first, len, first + mo, ml, p, out);
    hier_sched_barrier(out);
    if (ml) {
        hier_step_t *red = hier_sched_reduce(out, hier_ref(HIER_BUF_SLOT, a->me, p, mo * es),
                                             hier_ref(HIER_BUF_SLOT, 0, p, mo * es), ml, a->order, a->nranks);
        hier_sched_reduce_self(red, a->me, hier_sched_input(a, (first + mo) * es, (first + mo) * es));
    }
    *off_p = mo;
    *len_p = ml;
}

/* Allreduce, one chunk:
 * 1. copy my input chunk into my slot, except my own piece (only I read it);
 * 2. barrier (node);
 * 3. owners fold their piece over every local slot, in local rank order
 *    (their own straight from their input), into their own slot: the piece
 *    then leaves for the network from registered memory, without a copy;
 * 4. each owner allreduces its piece there with the owners of the same piece
 *    on the other nodes (ring, recursive doubling or Rabenseifner);
 * 5. barrier (node);
 * 6. everyone copies every piece, its own too, from its owner's slot. */
static void hier_sched_hier_allreduce(const hier_sched_args_t *a, size_t first, size_t len, int p, hier_sched_out_t *out)
{
    size_t es = a->esize, off = first * es, align = hier_part_align(es), poff, plen;

    hier_sched_hier_fold_piece(a, first, len, p, out, &poff, &plen);                              /* 1-3 */
    if (plen) {                                                                                   /* 4 */
        hier_net_args_t na = {.kind = a->net_kind, .nparts = a->nnodes, .me = a->node, .esize = es,
                              .base = hier_ref(HIER_BUF_SLOT, a->me, p, 0), .off = poff, .count = plen,
                              .blocks = HIER_NET_BLOCKS_EVEN};
        out->n += hier_sched_net_build(&na, out->steps + out->n);
    }
    hier_sched_barrier(out);                                                                      /* 5 */
    for (int i = 0; i < a->pieces; i++) {                                                         /* 6 */
        int j = (a->me + i) % a->pieces;
        size_t jo, jl;
        hier_part_range(len, a->pieces, j, align, &jo, &jl);
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, off + jo * es), hier_ref(HIER_BUF_SLOT, j, p, jo * es),
                        jl * es);
    }
}

/* Allgather, one chunk: bytes [first, first + len) of every block (esize 1).
 * An owner's slot holds the chunk of its own block, then (from U on) its
 * piece of every block in node order (node_ranks), so a node's pieces are
 * one range and travel as one message.
 * 1. copy my block's chunk into my slot, except my own piece;
 * 2. barrier (node);
 * 3. owners copy their piece of every local block into their slot, in node order;
 * 4. the owners of a piece allgather it over the nodes (ring, or recursive
 *    doubling for small messages; one range per node);
 * 5. barrier (node);
 * 6. everyone copies every owner's piece of every block into place. */
static void hier_sched_hier_allgather(const hier_sched_args_t *a, size_t first, size_t len, int p, hier_sched_out_t *out)
{
    size_t block = a->count, u = hier_sched_hier_units(a), mo, ml;
    int total = hier_sched_hier_total(a), mine = a->node_first[a->node];
    int me = hier_sched_hier_rank(a, a->node, a->me);
    hier_ref_t in = hier_sched_input(a, first, (size_t)me * block + first), tail = in;

    hier_sched_hier_my_piece(a, len, &mo, &ml);
    tail.off += mo + ml;                                                                          /* 1 */
    hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, 0), in, ml ? mo : len);
    if (ml) hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, mo + ml), tail, len - mo - ml);
    hier_sched_barrier(out);                                                                      /* 2 */
    if (ml) {
        for (int l = 0; l < a->nranks; l++) {                                                     /* 3 */
            hier_ref_t src = hier_ref(HIER_BUF_SLOT, l, p, mo);
            if (l == a->me) {
                src = in;
                src.off += mo;
            }
            hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, u + (size_t)(mine + l) * ml), src, ml);
        }
        hier_net_args_t na = {.kind = a->net_kind == HIER_NET_RD_ALLGATHER ? HIER_NET_RD_ALLGATHER    /* 4 */
                                                                           : HIER_NET_RING_ALLGATHER,
                              .nparts = a->nnodes, .me = a->node, .esize = 1,
                              .base = hier_ref(HIER_BUF_SLOT, a->me, p, u), .blocks = HIER_NET_BLOCKS_NODES,
                              .unit = ml, .node_first = a->node_first};
        out->n += hier_sched_net_build(&na, out->steps + out->n);
    }
    hier_sched_barrier(out);                                                                      /* 5 */
    for (int i = 0; i < a->pieces; i++) {                                                         /* 6 */
        int j = (a->me + i) % a->pieces;
        size_t jo, jl;
        hier_part_range(len, a->pieces, j, 64, &jo, &jl);
        for (int x = 0; x < total; x++) {
            int r = a->node_ranks[x];
            if (r != me || !a->in_place)
                hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, (size_t)r * block + first + jo),
                                hier_ref(HIER_BUF_SLOT, j, p, u + (size_t)x * jl), jl);
        }
    }
}

/* Reduce_scatter, one chunk: elements [first, first + len) of the whole vector.
 * 1. copy my input chunk into my slot, except my own piece;
 * 2. barrier (node);
 * 3. owners fold their piece over every local slot (theirs from their input)
 *    into their own slot, where nobody else reads;
 * 4. the owners of a piece reduce-scatter it over the nodes (ring: a node's
 *    part is what its ranks receive of the piece, one range per rank, and
 *    afterwards my node's part is complete in my slot), or, for small
 *    messages, allreduce it (recursive doubling: fewer rounds, all complete);
 * 5. barrier (node);
 * 6. everyone copies what it receives of each piece from the owner's slot.
 * In place, results land at or below the elements they come from, which
 * every rank has consumed by the barrier. */
/* Step 4 of the reduce_scatter, ring form: node n's part of piece [mo, mo + ml)
 * of the chunk is one range per rank of n. */
static void hier_sched_hier_rs_ring(const hier_sched_args_t *a, size_t first, size_t mo, size_t ml, int p,
                                    hier_sched_out_t *out)
{
    hier_net_args_t na = {.kind = HIER_NET_RING_REDUCE_SCATTER, .nparts = a->nnodes, .me = a->node,
                          .esize = a->esize, .base = hier_ref(HIER_BUF_SLOT, a->me, p, 0), .off = mo, .count = ml,
                          .blocks = HIER_NET_BLOCKS_RANKS, .node_first = a->node_first,
                          .node_ranks = a->node_ranks, .rcounts = a->rcounts, .rdispls = a->rdispls,
                          .origin = first};
    out->n += hier_sched_net_build(&na, out->steps + out->n);
}

static void hier_sched_hier_reduce_scatter(const hier_sched_args_t *a, size_t first, size_t len, int p,
                                    hier_sched_out_t *out)
{
    size_t es = a->esize, mo, ml;
    int me = hier_sched_hier_rank(a, a->node, a->me);

    hier_sched_hier_fold_piece(a, first, len, p, out, &mo, &ml);                                  /* 1-3 */
    if (ml) {
        if (a->net_kind == HIER_NET_RD_ALLREDUCE) {                                               /* 4 */
            hier_net_args_t na = {.kind = HIER_NET_RD_ALLREDUCE, .nparts = a->nnodes, .me = a->node, .esize = es,
                                  .base = hier_ref(HIER_BUF_SLOT, a->me, p, 0), .off = mo, .count = ml,
                                  .blocks = HIER_NET_BLOCKS_EVEN};
            out->n += hier_sched_net_build(&na, out->steps + out->n);
        } else {
            hier_sched_hier_rs_ring(a, first, mo, ml, p, out);
        }
    }
    hier_sched_barrier(out);                                                                      /* 5 */
    for (int j = 0; j < a->pieces; j++) {                                                         /* 6 */
        size_t jo, jl, x, xl;
        hier_part_range(len, a->pieces, j, hier_part_align(es), &jo, &jl);
        hier_part_intersect(a->rdispls[me], a->rcounts[me], first + jo, jl, &x, &xl);
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, (x - a->rdispls[me]) * es),
                        hier_ref(HIER_BUF_SLOT, j, p, (x - first) * es), xl * es);
    }
}

void hier_sched_hier_build(const hier_sched_args_t *a, size_t first, size_t len, int p, hier_sched_out_t *out)
{
    switch (a->kind) {
    case HIER_SCHED_HIER_ALLREDUCE: hier_sched_hier_allreduce(a, first, len, p, out); break;
    case HIER_SCHED_HIER_ALLGATHER: hier_sched_hier_allgather(a, first, len, p, out); break;
    case HIER_SCHED_HIER_REDUCE_SCATTER: hier_sched_hier_reduce_scatter(a, first, len, p, out); break;
    default: break;
    }
}

/* Steps 1-3 and 5 take at most nranks + 8, step 6 pieces x (ranks in all)
 * (allgather: one copy per piece and block), step 4 what its network
 * schedule takes. The same on every rank of the communicator (the ranks in
 * all, not this node's), so all grow their step arrays at the same call. */
size_t hier_sched_hier_max_steps(const hier_sched_args_t *a)
{
    size_t total = (size_t)hier_sched_hier_total(a);
    hier_net_args_t na = {.kind = HIER_NET_RING_ALLREDUCE, .nparts = a->nnodes, .node_first = a->node_first,
                          .blocks = a->kind == HIER_SCHED_HIER_REDUCE_SCATTER ? HIER_NET_BLOCKS_RANKS
                                                                              : HIER_NET_BLOCKS_EVEN};
    return total + 8 + (size_t)(a->pieces > 0 ? a->pieces : 1) * (total + 1) +
           hier_sched_net_max_steps(&na);
}
