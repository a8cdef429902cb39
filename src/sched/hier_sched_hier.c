/* hier_sched_hier.c: collectives over several nodes, shared memory inside a node and the network between nodes
 * (UCC CL/hier's "split rail"; docs/design.md, "Between nodes": Algorithms). Every chunk is cut into P pieces,
 * P the fewest local ranks any node has; local index j owns piece j, and the owners of piece j on all nodes form
 * one inter-node group, so every local rank drives the network at once. Each builder has two node barriers per
 * chunk, so hier_sched_intra.c's barrier argument holds: network steps touch only the owner's receive buffer and
 * its own slot region, which nobody else reads before the next barrier. Allgather blocks and reduce_scatter
 * results are placed by communicator rank (args->node_ranks): a node's ranks need not be consecutive. */
#include "sched/hier_sched_hier.h"

#include <stdlib.h>

#include "base/hier_part.h"
#include "sched/hier_sched_net.h"
#include "sched/hier_sched_pattern.h"

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
                              .blocks = HIER_NET_BLOCKS_EVEN, .radix_max = a->net_radix};
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
 * 4. the owners of a piece allgather it over the nodes (ring, recursive
 *    doubling or Rabenseifner's allgather half; one range per node);
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
        hier_net_args_t na = {.kind = a->net_kind, .nparts = a->nnodes, .me = a->node, .esize = 1,    /* 4 */
                              .base = hier_ref(HIER_BUF_SLOT, a->me, p, u), .blocks = HIER_NET_BLOCKS_NODES,
                              .unit = ml, .node_first = a->node_first, .radix_max = a->net_radix};
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

/* Reduce_scatter, one chunk: elements [first, first + len) of the whole
 * vector, or, sliced, a slice of every rank's block. Contiguous chunks lie
 * in one node's result (or a few): only the nodes sending to it work, and of
 * them only the owners of the pieces that hold it, so at best half the
 * links are busy. Sliced, chunk k holds the k-th part of every rank's
 * block, and piece j (owner local index j) the j-th part of each such
 * slice (virtual rank j x T + r, see hier_sched_slices_t): every piece has
 * a share of every node's result, and every owner sends on every round.
 * 1. copy my input chunk into my slot, except my own piece (only I read it);
 * 2. barrier (node);
 * 3. owners fold their piece over every local slot (theirs from their input)
 *    into their own slot, where nobody else reads;
 * 4. the owners of a piece reduce-scatter it over the nodes (ring or
 *    Rabenseifner's first half: a node's part is what its ranks receive of
 *    the piece, one range per rank, and afterwards my node's part is
 *    complete in my slot), or, for small messages, allreduce it (recursive
 *    doubling: fewer rounds, all complete);
 * 5. barrier (node);
 * 6. everyone copies what it receives of each piece from the owner's slot.
 * In place (never sliced), results land at or below the elements they come
 * from, which every rank has consumed by the barrier. */

/* (see hier_sched.h; at thousands of ranks: issue 13's ground) */
int hier_sched_slices_pay(size_t units, int pieces, int total, int nnodes, int in_place)
{
    size_t p = pieces > 1 ? (size_t)pieces : 1;
    return nnodes > 1 && !in_place && units >= 32 * p * (size_t)total;
}

int hier_sched_hier_sliced(const hier_sched_args_t *a)
{
    return a->kind == HIER_SCHED_HIER_REDUCE_SCATTER && a->rs_slices &&
           hier_sched_slices_pay(hier_sched_hier_units(a), a->pieces, hier_sched_hier_total(a), a->nnodes,
                                 a->in_place) &&
           a->pieces <= a->rs_slices->pieces &&
           hier_sched_hier_total(a) == a->rs_slices->total && a->nnodes == a->rs_slices->nnodes;
}

/* The fewest chunks whose slices (each rank's block cut in as many
 * near-equal parts, the larger a rounding element up) fit in a chunk: one
 * more than the even split needs at most. */
size_t hier_sched_hier_sliced_nchunks(const hier_sched_args_t *a)
{
    size_t units = hier_sched_hier_units(a), nt = (size_t)hier_sched_hier_total(a);
    size_t n = hier_part_nchunks(a->count, units);
    for (int fits = 0; !fits && n;) {
        size_t most = 0;
        for (size_t r = 0; r < nt; r++) most += (a->rcounts[r] + n - 1) / n;
        fits = most <= units;
        n += !fits;
    }
    return n;
}

size_t hier_sched_hier_slice(const hier_sched_args_t *a, size_t k, size_t nchunks)
{
    hier_sched_slices_t *sl = a->rs_slices;
    size_t nt = (size_t)hier_sched_hier_total(a), len = 0, P = a->pieces > 1 ? (size_t)a->pieces : 1;
    for (size_t r = 0; r < nt; r++) { /* slice k of block r, cut in P: lo and vc first */
        size_t slo, sc;
        hier_part_range(a->rcounts[r], (int)nchunks, (int)k, 1, &slo, &sc);
        for (size_t j = 0; j < P; j++) {
            size_t o, l;
            hier_part_range(sc, (int)P, (int)j, 1, &o, &l);
            sl->lo[j * nt + r] = slo + o;
            sl->vc[j * nt + r] = l;
        }
    }
    for (size_t v = 0; v < P * nt; v++) {
        sl->vd[v] = len;
        len += sl->vc[v];
    }
    for (int n = 0, i = 0; n <= a->nnodes; n++) {
        sl->node_first[n] = (uint32_t)i;
        for (size_t j = 0; n < a->nnodes && j < P; j++)
            for (uint32_t q = a->node_first[n]; q < a->node_first[n + 1]; q++)
                sl->node_ranks[i++] = (uint32_t)(j * nt + a->node_ranks[q]);
    }
    return len;
}

/* The chunk's layout: the virtual ranks (sliced), or none. */
typedef struct {
    const hier_sched_slices_t *sl;
    size_t nt, nv, first, len;
} hier_rs_map_t;

static hier_rs_map_t hier_sched_hier_rs_map(const hier_sched_args_t *a, size_t first, size_t len)
{
    size_t nt = (size_t)hier_sched_hier_total(a), P = a->pieces > 1 ? (size_t)a->pieces : 1;
    if (!hier_sched_hier_sliced(a)) return (hier_rs_map_t){.first = first, .len = len};
    return (hier_rs_map_t){.sl = a->rs_slices, .nt = nt, .nv = P * nt, .first = 0, .len = len};
}

/* Piece j of the chunk: the j-th virtual ranks (sliced), or a near-equal cut. */
static void hier_sched_hier_rs_piece(const hier_sched_args_t *a, const hier_rs_map_t *m, int j, size_t *off_p,
                                     size_t *len_p)
{
    *off_p = *len_p = 0;
    if (j >= a->pieces) return;
    if (!m->sl) {
        hier_part_range(m->len, a->pieces, j, hier_part_align(a->esize), off_p, len_p);
        return;
    }
    size_t end = (size_t)(j + 1) * m->nt < m->nv ? m->sl->vd[(size_t)(j + 1) * m->nt] : m->len;
    *off_p = m->sl->vd[(size_t)j * m->nt];
    *len_p = end - *off_p;
}

/* Range i of chunk range [v, v + l) in my input: chunk offset, input element
 * and length (one range unsliced, one per virtual rank sliced); the count. */
static size_t hier_sched_hier_rs_input(const hier_sched_args_t *a, const hier_rs_map_t *m, size_t v, size_t l,
                                       size_t i, size_t *at_p, size_t *in_p, size_t *len_p)
{
    if (!m->sl) {
        *at_p = v, *in_p = m->first + v, *len_p = i == 0 ? l : 0;
        return 1;
    }
    hier_part_intersect(m->sl->vd[i], m->sl->vc[i], v, l, at_p, len_p);
    *in_p = a->rdispls[i % m->nt] + m->sl->lo[i] + (*at_p - m->sl->vd[i]);
    return m->nv;
}

static void hier_sched_hier_rs_copy_in(const hier_sched_args_t *a, const hier_rs_map_t *m, size_t v, size_t l, int p,
                                       hier_sched_out_t *out)
{
    size_t es = a->esize, at, in, got, n = hier_sched_hier_rs_input(a, m, v, l, 0, &at, &in, &got);
    for (size_t i = 0; i < n; i++) {
        if (i) hier_sched_hier_rs_input(a, m, v, l, i, &at, &in, &got);
        hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, at * es), hier_sched_input(a, in * es, in * es),
                        got * es);
    }
}

/* Steps 1-3 (hier_sched_hier_fold_piece, through the layout). */
static void hier_sched_hier_rs_fold(const hier_sched_args_t *a, const hier_rs_map_t *m, int p, hier_sched_out_t *out,
                                    size_t *off_p, size_t *len_p)
{
    size_t es = a->esize, mo, ml, at, in, got;
    hier_sched_hier_rs_piece(a, m, a->me, &mo, &ml);
    hier_sched_hier_rs_copy_in(a, m, 0, ml ? mo : m->len, p, out);                                 /* 1 */
    if (ml) hier_sched_hier_rs_copy_in(a, m, mo + ml, m->len - mo - ml, p, out);
    hier_sched_barrier(out);                                                                       /* 2 */
    size_t n = ml ? hier_sched_hier_rs_input(a, m, mo, ml, 0, &at, &in, &got) : 0;                 /* 3 */
    for (size_t i = 0; i < n; i++) {
        if (i) hier_sched_hier_rs_input(a, m, mo, ml, i, &at, &in, &got);
        if (!got) continue;
        hier_step_t *red = hier_sched_reduce(out, hier_ref(HIER_BUF_SLOT, a->me, p, at * es),
                                             hier_ref(HIER_BUF_SLOT, 0, p, at * es), got, a->order, a->nranks);
        hier_sched_reduce_self(red, a->me, hier_sched_input(a, in * es, in * es));
    }
    *off_p = mo;
    *len_p = ml;
}

/* Step 4 of the reduce_scatter, ring or Rabenseifner: node n's part of piece
 * [mo, mo + ml) of the chunk is one range per rank of n (per virtual rank, sliced). */
static void hier_sched_hier_rs_scatter(const hier_sched_args_t *a, const hier_rs_map_t *m, size_t mo, size_t ml, int p,
                                    hier_sched_out_t *out)
{
    hier_net_args_t na = {.kind = a->net_kind, .nparts = a->nnodes, .me = a->node, .radix_max = a->net_radix,
                          .esize = a->esize, .base = hier_ref(HIER_BUF_SLOT, a->me, p, 0), .off = mo, .count = ml,
                          .blocks = HIER_NET_BLOCKS_RANKS,
                          .node_first = m->sl ? m->sl->node_first : a->node_first,
                          .node_ranks = m->sl ? m->sl->node_ranks : a->node_ranks,
                          .rcounts = m->sl ? m->sl->vc : a->rcounts, .rdispls = m->sl ? m->sl->vd : a->rdispls,
                          .origin = m->first};
    out->n += hier_sched_net_build(&na, out->steps + out->n);
}

/* Step 6: what I receive of piece j, from its owner's slot. */
static void hier_sched_hier_rs_out(const hier_sched_args_t *a, const hier_rs_map_t *m, int j, int p,
                                   hier_sched_out_t *out)
{
    size_t es = a->esize, jo, jl, x, xl;
    int me = hier_sched_hier_rank(a, a->node, a->me);
    if (m->sl) { /* my virtual rank of piece j, whole */
        size_t v = (size_t)j * m->nt + (size_t)me;
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, m->sl->lo[v] * es),
                        hier_ref(HIER_BUF_SLOT, j, p, m->sl->vd[v] * es), m->sl->vc[v] * es);
        return;
    }
    hier_sched_hier_rs_piece(a, m, j, &jo, &jl);
    hier_part_intersect(a->rdispls[me], a->rcounts[me], m->first + jo, jl, &x, &xl);
    hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, (x - a->rdispls[me]) * es),
                    hier_ref(HIER_BUF_SLOT, j, p, (x - m->first) * es), xl * es);
}

static void hier_sched_hier_reduce_scatter(const hier_sched_args_t *a, size_t first, size_t len, int p,
                                    hier_sched_out_t *out)
{
    size_t es = a->esize, mo, ml;
    hier_rs_map_t m = hier_sched_hier_rs_map(a, first, len);

    hier_sched_hier_rs_fold(a, &m, p, out, &mo, &ml);                                              /* 1-3 */
    if (ml) {
        if (a->net_kind == HIER_NET_RD_ALLREDUCE) {                                               /* 4 */
            hier_net_args_t na = {.kind = a->net_kind, .nparts = a->nnodes, .me = a->node, .esize = es,
                                  .base = hier_ref(HIER_BUF_SLOT, a->me, p, 0), .off = mo, .count = ml,
                                  .blocks = HIER_NET_BLOCKS_EVEN};
            out->n += hier_sched_net_build(&na, out->steps + out->n);
        } else {
            hier_sched_hier_rs_scatter(a, &m, mo, ml, p, out);
        }
    }
    hier_sched_barrier(out);                                                                      /* 5 */
    for (int j = 0; j < a->pieces; j++) hier_sched_hier_rs_out(a, &m, j, p, out);                 /* 6 */
}

hier_sched_slices_t *hier_sched_slices_new(int pieces, int total, int nnodes)
{
    size_t nv = (size_t)(pieces > 1 ? pieces : 1) * (size_t)total;
    hier_sched_slices_t *sl = malloc(sizeof(*sl) + 3 * nv * sizeof(size_t) + (nv + (size_t)nnodes + 1) * sizeof(uint32_t));
    if (!sl) return NULL;
    sl->vc = (size_t *)(sl + 1);
    sl->vd = sl->vc + nv;
    sl->lo = sl->vd + nv;
    sl->node_first = (uint32_t *)(sl->lo + nv);
    sl->node_ranks = sl->node_first + nnodes + 1;
    sl->pieces = pieces > 1 ? pieces : 1;
    sl->total = total;
    sl->nnodes = nnodes;
    return sl;
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

/* Allreduce: its own count, nothing per rank in all (a communicator's step
 * array is this large; at 1,000 nodes x 8 the bound below would be 11 MiB
 * where 0.8 do). Otherwise steps 1-3 and 5 take at most nranks + 8 (sliced
 * reduce_scatter: copies and folds per virtual rank, pieces x total, 4 x
 * that at most), step 6 pieces x (ranks in all) (allgather: one copy per
 * piece and block), step 4 what its network schedule takes. The same on every rank of the communicator (the ranks in
 * all, not this node's), so all grow their step arrays at the same call. */
static size_t hier_sched_hier_steps_bound(const hier_sched_args_t *a, int sliced)
{
    size_t total = (size_t)hier_sched_hier_total(a), P = a->pieces > 1 ? (size_t)a->pieces : 1;
    if (a->kind == HIER_SCHED_HIER_ALLREDUCE) /* two copies in, a fold, two barriers, a copy per piece */
        return 8 + P + hier_sched_net_max_steps_for(a->nnodes, (size_t)a->nnodes, 1, a->net_radix);
    size_t virt = sliced ? P * total : total, segs = a->nnodes, smax = 1; /* (ranks, or virtual ranks) */
    if (a->kind == HIER_SCHED_HIER_REDUCE_SCATTER) {
        segs = virt;
        for (int n = 0; n < a->nnodes; n++) {
            size_t here = (size_t)(a->node_first[n + 1] - a->node_first[n]) * (sliced ? P : 1);
            smax = here > smax ? here : smax;
        }
    }
    size_t net = hier_sched_net_max_steps_for(a->nnodes, segs, smax, a->net_radix);
    return 4 * virt + 8 + P * (total + 1) + net;
}

size_t hier_sched_hier_max_steps(const hier_sched_args_t *a)
{
    return hier_sched_hier_steps_bound(a, hier_sched_hier_sliced(a));
}

size_t hier_sched_hier_max_steps_any(const hier_sched_args_t *a)
{
    size_t plain = hier_sched_hier_steps_bound(a, 0);
    if (a->kind != HIER_SCHED_HIER_REDUCE_SCATTER) return plain;
    size_t sliced = hier_sched_hier_steps_bound(a, 1);
    return sliced > plain ? sliced : plain;
}
