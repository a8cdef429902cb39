/* hier_sched_net.c: inter-node schedules (pure builders), the level that
 * runs between nodes once each node has reduced its share in shared memory.
 * Participants are the ranks of one local index, one per node; a block is
 * one or several ranges of the vector, given per participant (uneven nodes
 * give uneven blocks), computed where they are needed (hier_net_blocks_t).
 * Every element is reduced along exactly one chain and then copied, or
 * reduced by partners from the same two operands, so all participants end
 * with the same bits. */
#include "sched/hier_sched_net.h"

#include "base/hier_part.h"
#include "sched/hier_sched_pattern.h"

/* Where element `off` (from a->off) of the vector lives. */
static hier_ref_t hier_sched_net_at(const hier_net_args_t *a, size_t off)
{
    hier_ref_t r = a->base;
    r.off += (a->off + off) * a->esize;
    return r;
}

/* Ranges of block b: one, except for RANKS (one per rank of node b, empty ones included). */
static size_t hier_sched_net_nsegs(const hier_net_args_t *a, int b)
{
    return a->blocks == HIER_NET_BLOCKS_RANKS ? a->node_first[b + 1] - a->node_first[b] : 1;
}

static void hier_sched_net_seg(const hier_net_args_t *a, int b, size_t i, size_t *off_p, size_t *len_p)
{
    switch (a->blocks) {
    case HIER_NET_BLOCKS_EVEN:
        hier_part_range(a->count, a->nparts, b, hier_part_align(a->esize), off_p, len_p);
        break;
    case HIER_NET_BLOCKS_NODES:
        *off_p = (size_t)a->node_first[b] * a->unit;
        *len_p = (size_t)(a->node_first[b + 1] - a->node_first[b]) * a->unit;
        break;
    case HIER_NET_BLOCKS_RANKS: {
        uint32_t r = a->node_ranks[a->node_first[b] + i];
        hier_part_intersect(a->rdispls[r], a->rcounts[r], a->origin + a->off, a->count, off_p, len_p);
        *off_p -= a->origin + a->off;
        break;
    }
    }
}

/* Where the blocks of participants [lo, hi] start and how many elements
 * they span (blocks consecutive in participant order, one range each). */
static void hier_sched_net_span(const hier_net_args_t *a, int lo, int hi, size_t *off_p, size_t *len_p)
{
    size_t o, l;
    hier_sched_net_seg(a, lo, 0, off_p, &l);
    hier_sched_net_seg(a, hi, 0, &o, &l);
    *len_p = o + l - *off_p;
}

static int hier_sched_net_mod(int v, int n)
{
    return ((v % n) + n) % n;
}

/* Recursive doubling over the whole vector, for any number of participants
 * (the numbering of hier_sched_pattern.h):
 * 1. fold in: each extra hands its vector to the stand-in above it, which
 *    reduces it;
 * 2. log2(p2) rounds: exchange vectors with the partner at distance 2^i and
 *    reduce (the ops are commutative, so both partners compute the same bits);
 * 3. fold out: each stand-in hands the result back to its extra. */
static void hier_sched_net_rd_allreduce(const hier_net_args_t *a, hier_sched_out_t *out)
{
    hier_rd_t rd = hier_rd(a->nparts);
    int me = a->me, fold = hier_rd_folded(&rd, me);
    size_t bytes = a->count * a->esize;
    hier_ref_t vec = hier_sched_net_at(a, 0);
    unsigned t = a->tag_base, last = t + 1 + (unsigned)rd.rounds;

    if (hier_rd_is_extra(&rd, me)) { /* 1, and 3 for the ones that hand over */
        hier_sched_net(out, HIER_STEP_NET_SEND, me + 1, t, vec, bytes, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, me + 1, last, vec, bytes, 0);
        return;
    }
    if (fold >= 0) hier_sched_net(out, HIER_STEP_NET_RECV, fold, t, vec, a->count, 1);
    for (int i = 0, v = hier_rd_vrank(&rd, me); i < rd.rounds; i++) { /* 2 */
        int peer = hier_rd_partner(&rd, v, 1 << i);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)i, vec, bytes, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)i, vec, a->count, 1);
    }
    if (fold >= 0) hier_sched_net(out, HIER_STEP_NET_SEND, fold, last, vec, bytes, 0); /* 3 */
}

/* Recursive doubling allgather for any number of participants, with the
 * numbering of the allreduce above:
 * 1. fold in: each extra hands its block to the stand-in above it, which
 *    then holds both (they are adjacent);
 * 2. round i: exchange everything held (the blocks of 2^i consecutive
 *    stand-ins, one contiguous range) with the partner at distance 2^i;
 * 3. fold out: each stand-in hands the whole vector to its extra. */
static void hier_sched_net_rd_allgather(const hier_net_args_t *a, hier_sched_out_t *out)
{
    hier_rd_t rd = hier_rd(a->nparts);
    int me = a->me, fold = hier_rd_folded(&rd, me);
    size_t all_off, all_len, o, l;
    unsigned t = a->tag_base, last = t + 1 + (unsigned)rd.rounds;

    hier_sched_net_span(a, 0, a->nparts - 1, &all_off, &all_len);
    if (hier_rd_is_extra(&rd, me)) { /* 1, and 3 for the ones that hand over */
        hier_sched_net_span(a, me, me, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, me + 1, t, hier_sched_net_at(a, o), l * a->esize, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, me + 1, last, hier_sched_net_at(a, all_off), all_len * a->esize, 0);
        return;
    }
    if (fold >= 0) {
        hier_sched_net_span(a, fold, fold, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, fold, t, hier_sched_net_at(a, o), l * a->esize, 0);
    }
    for (int i = 0, v = hier_rd_vrank(&rd, me); i < rd.rounds; i++) { /* 2 */
        int mask = (1 << i) - 1, pv = v ^ (1 << i), peer = hier_rd_partner(&rd, v, 1 << i);
        int mine_lo = v & ~mask, theirs_lo = pv & ~mask;
        hier_sched_net_span(a, hier_rd_real_lo(&rd, mine_lo), hier_rd_real_hi(&rd, mine_lo + mask), &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l * a->esize, 0);
        hier_sched_net_span(a, hier_rd_real_lo(&rd, theirs_lo), hier_rd_real_hi(&rd, theirs_lo + mask), &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l * a->esize, 0);
    }
    if (fold >= 0) /* 3 */
        hier_sched_net(out, HIER_STEP_NET_SEND, fold, last, hier_sched_net_at(a, all_off), all_len * a->esize, 0);
}

/* One message of `len` elements from `off` (none when empty). */
static void hier_sched_net_run(const hier_net_args_t *a, hier_step_op_t op, int peer, unsigned tag, size_t off,
                               size_t len, int reduce, hier_sched_out_t *out)
{
    hier_sched_net(out, op, peer, tag, hier_sched_net_at(a, off), reduce ? len : len * a->esize, reduce);
}

/* Send (or receive) the ranges of participants [lo, hi], adjacent ones
 * joined into one message and empty ones left out: both ends compute the
 * same list from the same arguments, so the messages match one to one. */
static void hier_sched_net_range(const hier_net_args_t *a, hier_step_op_t op, int peer, unsigned tag, int lo,
                                 int hi, int reduce, hier_sched_out_t *out)
{
    size_t run_off = 0, run_len = 0, o, l;
    for (int b = lo; b <= hi; b++)
        for (size_t i = 0; i < hier_sched_net_nsegs(a, b); i++) {
            hier_sched_net_seg(a, b, i, &o, &l);
            if (!l) continue;
            if (run_len && run_off + run_len == o) {
                run_len += l;
                continue;
            }
            hier_sched_net_run(a, op, peer, tag, run_off, run_len, reduce, out);
            run_off = o, run_len = l;
        }
    hier_sched_net_run(a, op, peer, tag, run_off, run_len, reduce, out);
}

/* Send block b to `peer`, then receive block c from `from` (reduced into
 * place, or copied), each as few messages as its ranges allow: the executor
 * queues the sends, so all of them are on their way before the first
 * receive waits. */
static void hier_sched_net_blocks(const hier_net_args_t *a, int peer, int b, int from, int c, unsigned tag,
                                  int reduce, hier_sched_out_t *out)
{
    hier_sched_net_range(a, HIER_STEP_NET_SEND, peer, tag, b, b, 0, out);
    hier_sched_net_range(a, HIER_STEP_NET_RECV, from, tag, c, c, reduce, out);
}

/* Ring reduce-scatter, N-1 steps: at step s send block (me - s - 1) to the
 * next participant and fold block (me - s - 2) from the previous one into
 * mine; afterwards block `me` is complete here. */
static void hier_sched_net_ring_rs(const hier_net_args_t *a, unsigned tag, hier_sched_out_t *out)
{
    int n = a->nparts, next = (a->me + 1) % n, prev = (a->me + n - 1) % n;
    for (int s = 0; s < n - 1; s++) {
        int b = hier_sched_net_mod(a->me - s - 1, n), c = hier_sched_net_mod(a->me - s - 2, n);
        hier_sched_net_blocks(a, next, b, prev, c, tag + (unsigned)s, 1, out);
    }
}

/* Ring allgather, N-1 steps: at step s send block (me - s) on and take block
 * (me - s - 1) from the previous participant as it is. */
static void hier_sched_net_ring_ag(const hier_net_args_t *a, unsigned tag, hier_sched_out_t *out)
{
    int n = a->nparts, next = (a->me + 1) % n, prev = (a->me + n - 1) % n;
    for (int s = 0; s < n - 1; s++) {
        int b = hier_sched_net_mod(a->me - s, n), c = hier_sched_net_mod(a->me - s - 1, n);
        hier_sched_net_blocks(a, next, b, prev, c, tag + (unsigned)s, 0, out);
    }
}

/* One level of the mixed-radix pattern for virtual rank v: the level's
 * range [lo, lo + f w) is cut into f parts of w virtual ranks, part j
 * belonging to the member with digit j (mine: d). Scatter: part j goes to
 * member j and every member's copy of part d is folded into mine; gather:
 * part d goes to every member and part j comes from member j. Sends start
 * at member d + 1, receives at d - 1, as a ring step would. */
static void hier_sched_net_level(const hier_net_args_t *a, const hier_radix_t *x, int v, int lo, int i,
                                 unsigned tag, int scatter, hier_sched_out_t *out)
{
    int f = x->radix[i], w = x->weight[i], d = (v - lo) / w;
    for (int s = 1; s < 2 * f - 1; s++) {
        int send = s < f, j = send ? (d + s) % f : (d - (s - f + 1) + f) % f; /* sends first */
        int vlo = lo + (send == scatter ? j : d) * w;
        hier_sched_net_range(a, send ? HIER_STEP_NET_SEND : HIER_STEP_NET_RECV,
                             hier_rd_real_hi(&x->fold, v + (j - d) * w), tag, hier_rd_real_lo(&x->fold, vlo),
                             hier_rd_real_hi(&x->fold, vlo + w - 1), !send && scatter, out);
    }
}

/* Rabenseifner's allreduce in mixed radix (hier_radix_t), for any number of
 * participants: the ring's data, in 2 x levels rounds (2 log2 p with radix 2).
 * 1. fold in: each extra hands its vector (reduce-scatter: all of it; allgather:
 *    its block) to the stand-in above it;
 * 2. reduce-scatter, levels 0, 1, ...: my range of virtual ranks, cut into
 *    radix[i] parts of weight[i], goes part j to the member with digit j,
 *    and each member's copy of my part is folded into mine; afterwards
 *    virtual rank v holds the blocks of the participants it speaks for;
 * 3. allgather, levels ..., 1, 0: the members of a level swap what they hold
 *    until every range is whole again;
 * 4. fold out: the stand-in hands the extra its block (reduce-scatter) or the
 *    whole vector.
 * A level is hier_sched_net_level. Blocks are
 * the participants' (even, by node, by rank), so a reduce_scatter ends with
 * each node's own; each element is reduced at one stand-in and copied to the
 * rest, so every participant ends with the same bits. */
static void hier_sched_net_rh(const hier_net_args_t *a, int rs, int ag, hier_sched_out_t *out)
{
    hier_radix_t x = hier_radix(a->nparts, a->radix_max);
    int me = a->me, fold = hier_rd_folded(&x.fold, me), n = a->nparts, base[HIER_RADIX_MAX_LEVELS];
    unsigned t = a->tag_base, last = t + 1 + 2 * (unsigned)x.levels;

    if (hier_rd_is_extra(&x.fold, me)) { /* 1, and 4 for the ones that hand over */
        hier_sched_net_range(a, HIER_STEP_NET_SEND, me + 1, t, rs ? 0 : me, rs ? n - 1 : me, 0, out);
        hier_sched_net_range(a, HIER_STEP_NET_RECV, me + 1, last, ag ? 0 : me, ag ? n - 1 : me, 0, out);
        return;
    }
    if (fold >= 0) hier_sched_net_range(a, HIER_STEP_NET_RECV, fold, t, rs ? 0 : fold, rs ? n - 1 : fold, rs, out);
    int v = hier_rd_vrank(&x.fold, me);
    for (int i = 0, lo = 0; i < x.levels; i++) { /* 2 (the ranges only, without rs) */
        base[i] = lo;
        if (rs) hier_sched_net_level(a, &x, v, lo, i, t + 1 + (unsigned)i, 1, out);
        lo += (v - lo) / x.weight[i] * x.weight[i];
    }
    for (int i = x.levels - 1; ag && i >= 0; i--) /* 3 */
        hier_sched_net_level(a, &x, v, base[i], i, t + 1 + (unsigned)(2 * x.levels - 1 - i), 0, out);
    if (fold >= 0) /* 4 */
        hier_sched_net_range(a, HIER_STEP_NET_SEND, fold, last, ag ? 0 : fold, ag ? n - 1 : fold, 0, out);
}

size_t hier_sched_net_build(const hier_net_args_t *a, hier_step_t *steps)
{
    hier_sched_out_t out = {.steps = steps, .n = 0};
    if (a->nparts < 2) return 0;
    switch (a->kind) {
    case HIER_NET_RING_ALLREDUCE: /* 1. reduce-scatter, 2. allgather: 2 (N-1)/N of the vector each way */
        hier_sched_net_ring_rs(a, a->tag_base, &out);
        hier_sched_net_ring_ag(a, a->tag_base + (unsigned)(a->nparts - 1), &out);
        break;
    case HIER_NET_RING_REDUCE_SCATTER: hier_sched_net_ring_rs(a, a->tag_base, &out); break;
    case HIER_NET_RING_ALLGATHER: hier_sched_net_ring_ag(a, a->tag_base, &out); break;
    case HIER_NET_RD_ALLREDUCE: hier_sched_net_rd_allreduce(a, &out); break;
    case HIER_NET_RD_ALLGATHER: hier_sched_net_rd_allgather(a, &out); break;
    case HIER_NET_RH_ALLREDUCE: hier_sched_net_rh(a, 1, 1, &out); break;
    case HIER_NET_RH_REDUCE_SCATTER: hier_sched_net_rh(a, 1, 0, &out); break;
    case HIER_NET_RH_ALLGATHER: hier_sched_net_rh(a, 0, 1, &out); break;
    }
    return out.n;
}

/* Ranges of [lo, hi] participants at most: smax each, segs in all. */
static size_t hier_sched_net_cap(size_t segs, size_t smax, size_t parts)
{
    return smax * parts < segs ? smax * parts : segs;
}

/* Ring and recursive doubling: a send and a receive per range of two blocks
 * a step, and the folds. Rabenseifner: at level i, the current range (f x w
 * virtual ranks, twice as many participants at most) goes out but for my
 * part, and my part (w) comes in f - 1 times; twice (reduce-scatter and
 * allgather), plus the folds (everything each way). */
static size_t hier_sched_net_max_steps_of(int nparts, size_t segs, size_t smax, int radix_max)
{
    hier_radix_t x = hier_radix(nparts, radix_max);
    size_t ring = 4 * segs + 4 * (size_t)nparts + 4 * (size_t)hier_rd(nparts).rounds + 8, rh = 4 * segs + 8;
    for (int i = 0; i < x.levels; i++) {
        size_t f = (size_t)x.radix[i], w = (size_t)x.weight[i];
        rh += 2 * (hier_sched_net_cap(segs, smax, 2 * f * w) + (f - 1) * hier_sched_net_cap(segs, smax, 2 * w));
    }
    return ring > rh ? ring : rh;
}

/* The last answer is kept: a communicator asks the same every call, and
 * the radices cost more than the call's own schedule at small counts. */
size_t hier_sched_net_max_steps_for(int nparts, size_t segs, size_t smax, int radix_max)
{
    static _Thread_local struct {
        int nparts, radix_max;
        size_t segs, smax, steps;
    } last;
    if (last.steps && last.nparts == nparts && last.segs == segs && last.smax == smax && last.radix_max == radix_max)
        return last.steps;
    size_t steps = hier_sched_net_max_steps_of(nparts, segs, smax, radix_max);
    last.nparts = nparts, last.segs = segs, last.smax = smax, last.radix_max = radix_max, last.steps = steps;
    return steps;
}

size_t hier_sched_net_max_steps(const hier_net_args_t *a)
{
    size_t segs = (size_t)a->nparts, smax = 1;
    if (a->blocks == HIER_NET_BLOCKS_RANKS) {
        segs = a->node_first[a->nparts];
        for (int b = 0; b < a->nparts; b++)
            if (a->node_first[b + 1] - a->node_first[b] > smax) smax = a->node_first[b + 1] - a->node_first[b];
    }
    return hier_sched_net_max_steps_for(a->nparts, segs, smax, a->radix_max);
}

/* 4 + the doubling rounds (below 31) + the radices less one each, whose
 * sum is below their product (at most nparts). */
int hier_sched_net_max_peers_upto(int most)
{
    return (most > 1 ? most : 1) + 34;
}

int hier_sched_net_max_peers(int nparts, int radix_max)
{
    hier_radix_t x = hier_radix(nparts, radix_max);
    int n = 4 + hier_rd(nparts).rounds;
    for (int i = 0; i < x.levels; i++) n += x.radix[i] - 1;
    return n;
}

static size_t hier_sched_net_add_peer(int *peers, size_t n, int p)
{
    for (size_t i = 0; i < n; i++)
        if (peers[i] == p) return n;
    peers[n] = p;
    return n + 1;
}

/* The fold partner and the partners at every distance of a pattern. */
static size_t hier_sched_net_add_fold(const hier_rd_t *rd, int me, int *peers, size_t n)
{
    if (hier_rd_is_extra(rd, me)) return hier_sched_net_add_peer(peers, n, me + 1);
    if (hier_rd_folded(rd, me) >= 0) n = hier_sched_net_add_peer(peers, n, me - 1);
    return n;
}

/* Ring neighbours, and for recursive doubling and Rabenseifner the fold
 * partner and every partner at every level: every participant any schedule
 * above has `me` talk to. Symmetric: p is in me's list when me is in p's. */
size_t hier_sched_net_peers(int nparts, int me, int radix_max, int *peers)
{
    size_t n = 0;
    if (nparts < 2) return 0;
    hier_rd_t rd = hier_rd(nparts);
    hier_radix_t x = hier_radix(nparts, radix_max);
    n = hier_sched_net_add_peer(peers, n, (me + 1) % nparts);
    n = hier_sched_net_add_peer(peers, n, (me + nparts - 1) % nparts);
    n = hier_sched_net_add_fold(&rd, me, peers, n);
    if (!hier_rd_is_extra(&rd, me))
        for (int d = 1, v = hier_rd_vrank(&rd, me); d < rd.p2; d *= 2)
            n = hier_sched_net_add_peer(peers, n, hier_rd_partner(&rd, v, d));
    n = hier_sched_net_add_fold(&x.fold, me, peers, n);
    if (hier_rd_is_extra(&x.fold, me)) return n;
    for (int i = 0, v = hier_rd_vrank(&x.fold, me); i < x.levels; i++) {
        int w = x.weight[i], d = (v / w) % x.radix[i];
        for (int j = 0; j < x.radix[i]; j++)
            if (j != d) n = hier_sched_net_add_peer(peers, n, hier_rd_real_hi(&x.fold, v + (j - d) * w));
    }
    return n;
}
