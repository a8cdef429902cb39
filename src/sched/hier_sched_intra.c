/* hier_sched_intra.c: schedule builders for the collectives of one node.
 *
 * Why one barrier per chunk is enough to reuse a pipeline buffer: every chunk
 * contains at least one barrier, and a rank reaches chunk k+1's first barrier
 * only after finishing every step of chunk k. Chunk k+2 uses chunk k's buffer
 * again, and a rank writes into it only after passing a barrier of chunk k+1,
 * so by then every rank has finished reading what chunk k left there. The
 * chunk counter runs across calls, so this holds from one collective to the
 * next as well. Within a chunk, a slot region is written only by its owner and
 * read by others only after the barrier that follows the write. */
#include "sched/hier_sched_intra.h"

#include "base/hier_part.h"

size_t hier_sched_intra_units(const hier_sched_args_t *a)
{
    switch (a->kind) {
    case HIER_SCHED_ALLGATHER: return a->chunk_bytes;
    case HIER_SCHED_ALLREDUCE_NUMA: return a->chunk_bytes / 2 / a->esize;
    case HIER_SCHED_REDUCE_SCATTER: return a->chunk_bytes / a->esize / (size_t)a->nranks; /* per block */
    default: return a->chunk_bytes / a->esize;
    }
}

size_t hier_sched_intra_max_steps(const hier_sched_args_t *a)
{
    return (size_t)a->nranks + 8;
}

/* Flat allreduce, one chunk:
 * 1. copy my input into my slot;  2. barrier;
 * 3. fold every slot, in rank order, straight into my receive buffer. */
static void hier_sched_allreduce_flat(const hier_sched_args_t *a, size_t first, size_t len, int p,
                                      hier_sched_out_t *out)
{
    size_t off = first * a->esize;
    hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, 0), hier_sched_input(a, off, off), len * a->esize); /* 1 */
    hier_sched_barrier(out);                                                                          /* 2 */
    hier_sched_reduce(out, hier_ref(HIER_BUF_RECV, 0, 0, off), hier_ref(HIER_BUF_SLOT, 0, p, 0), len,
                      a->order, a->nranks);                                                           /* 3 */
}

/* NUMA two-level allreduce, one chunk (inputs in the first half of a slot,
 * group partials in the second):
 * 1. copy my input into my slot;  2. barrier;
 * 3. each group leader folds its group's slots, in rank order, into its partial;
 * 4. barrier;
 * 5. every rank folds the leaders' partials, in group order, into its receive buffer. */
static void hier_sched_allreduce_numa(const hier_sched_args_t *a, size_t first, size_t len, int p,
                                      hier_sched_out_t *out)
{
    const hier_sched_groups_t *g = &a->groups;
    size_t off = first * a->esize, half = a->chunk_bytes / 2;
    uint32_t grp = g->group_of[a->me];

    hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, 0), hier_sched_input(a, off, off), len * a->esize); /* 1 */
    hier_sched_barrier(out);                                                                          /* 2 */
    if (g->leader[grp] == (uint32_t)a->me)                                                                      /* 3 */
        hier_sched_reduce(out, hier_ref(HIER_BUF_SLOT, a->me, p, half), hier_ref(HIER_BUF_SLOT, 0, p, 0), len,
                          g->members + g->first[grp], (int)(g->first[grp + 1] - g->first[grp]));
    hier_sched_barrier(out);                                                                          /* 4 */
    hier_sched_reduce(out, hier_ref(HIER_BUF_RECV, 0, 0, off), hier_ref(HIER_BUF_SLOT, 0, p, half), len,
                      g->leader, g->ngroups);                                                      /* 5 */
}

/* Reduce-scatter + allgather allreduce, one chunk, split into one piece per rank:
 * 1. copy my input into my slot, except my own piece, which only I read;  2. barrier;
 * 3. fold my piece of every slot (mine straight from my input), in rank
 *    order, into my receive buffer and, for the others, into my slot;  4. barrier;
 * 5. copy every other rank's reduced piece from its slot into my receive
 *    buffer, starting after my own rank so readers spread over the slots. */
static void hier_sched_allreduce_rsag(const hier_sched_args_t *a, size_t first, size_t len, int p,
                                      hier_sched_out_t *out)
{
    size_t off = first * a->esize, align = hier_part_align(a->esize), poff, plen;

    hier_part_range(len, a->nranks, a->me, align, &poff, &plen);
    hier_sched_copy_in_except(a, first, len, first + poff, plen, p, out);                             /* 1 */
    hier_sched_barrier(out);                                                                          /* 2 */
    hier_step_t *red = hier_sched_reduce(out, hier_ref(HIER_BUF_RECV, 0, 0, off + poff * a->esize), /* 3 */
                      hier_ref(HIER_BUF_SLOT, 0, p, poff * a->esize), plen, a->order, a->nranks);
    hier_sched_reduce_self(red, a->me, hier_sched_input(a, off + poff * a->esize, off + poff * a->esize));
    if (red) {
        red->has_dst2 = 1;
        red->dst2 = hier_ref(HIER_BUF_SLOT, a->me, p, poff * a->esize);
    }
    hier_sched_barrier(out);                                                                          /* 4 */
    for (int i = 1; i < a->nranks; i++) {                                                             /* 5 */
        int j = (a->me + i) % a->nranks;
        hier_part_range(len, a->nranks, j, align, &poff, &plen);
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, off + poff * a->esize),
                        hier_ref(HIER_BUF_SLOT, j, p, poff * a->esize), plen * a->esize);
    }
}

/* Allgather, one chunk of every rank's block:
 * 1. copy my block's chunk into my slot, and (not in place) into my own place
 *    in the receive buffer;  2. barrier;
 * 3. copy every other rank's chunk from its slot into its place. */
static void hier_sched_allgather(const hier_sched_args_t *a, size_t first, size_t len, int p, hier_sched_out_t *out)
{
    size_t block = a->count * a->esize;

    hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, 0),                                        /* 1 */
                    hier_sched_input(a, first, (size_t)a->me * block + first), len);
    if (!a->in_place)
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, (size_t)a->me * block + first),
                        hier_ref(HIER_BUF_SEND, 0, 0, first), len);
    hier_sched_barrier(out);                                                                          /* 2 */
    for (int i = 1; i < a->nranks; i++) {                                                             /* 3 */
        int j = (a->me + i) % a->nranks;
        hier_sched_copy(out, hier_ref(HIER_BUF_RECV, 0, 0, (size_t)j * block + first),
                        hier_ref(HIER_BUF_SLOT, j, p, 0), len);
    }
}

/* Reduce_scatter, step k of every rank's result block at once (each block is
 * cut into pieces of chunk_units elements; my slot holds one piece per rank):
 * 1. copy piece k of every other rank's block of my input into that rank's
 *    place in my slot (my own block is read by me alone, from my input);
 * 2. barrier;
 * 3. fold piece k of my block over every slot (mine from my input), in rank
 *    order, into my receive buffer. In place, the result lands below every
 *    piece still to be copied (all start at (k+1) pieces or later), and the
 *    executor stages a reduction whose output overlaps an operand. */
static void hier_sched_reduce_scatter(const hier_sched_args_t *a, size_t k, int p, hier_sched_out_t *out)
{
    size_t es = a->esize, u = hier_sched_intra_units(a), first, len;

    for (int i = 1; i < a->nranks; i++) {                                                            /* 1 */
        int j = (a->me + i) % a->nranks;
        hier_part_intersect(a->rdispls[j] + k * u, u, a->rdispls[j], a->rcounts[j], &first, &len);
        hier_sched_copy(out, hier_ref(HIER_BUF_SLOT, a->me, p, (size_t)j * u * es),
                        hier_sched_input(a, first * es, first * es), len * es);
    }
    hier_sched_barrier(out);                                                                          /* 2 */
    hier_part_intersect(a->rdispls[a->me] + k * u, u, a->rdispls[a->me], a->rcounts[a->me], &first, &len);
    hier_step_t *red = hier_sched_reduce(out, hier_ref(HIER_BUF_RECV, 0, 0, k * u * es),          /* 3 */
                      hier_ref(HIER_BUF_SLOT, 0, p, (size_t)a->me * u * es), len, a->order, a->nranks);
    hier_sched_reduce_self(red, a->me, hier_sched_input(a, first * es, first * es));
}

void hier_sched_intra_build(const hier_sched_args_t *a, size_t k, size_t first, size_t len, int p,
                            hier_sched_out_t *out)
{
    switch (a->kind) {
    case HIER_SCHED_ALLREDUCE_FLAT: hier_sched_allreduce_flat(a, first, len, p, out); break;
    case HIER_SCHED_ALLREDUCE_NUMA: hier_sched_allreduce_numa(a, first, len, p, out); break;
    case HIER_SCHED_ALLREDUCE_RSAG: hier_sched_allreduce_rsag(a, first, len, p, out); break;
    case HIER_SCHED_ALLGATHER: hier_sched_allgather(a, first, len, p, out); break;
    case HIER_SCHED_REDUCE_SCATTER: hier_sched_reduce_scatter(a, k, p, out); break;
    default: break;
    }
}
