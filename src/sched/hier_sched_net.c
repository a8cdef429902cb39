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

/* Send every range of block b to `peer`, then receive every range of block
 * c from `from` (reduced into place, or copied): the executor queues the
 * sends, so all of them are on their way before the first receive waits. */
static void hier_sched_net_blocks(const hier_net_args_t *a, int peer, int b, int from, int c, unsigned tag,
                                  int reduce, hier_sched_out_t *out)
{
    size_t o, l;
    for (size_t i = 0; i < hier_sched_net_nsegs(a, b); i++) {
        hier_sched_net_seg(a, b, i, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, tag, hier_sched_net_at(a, o), l * a->esize, 0);
    }
    for (size_t i = 0; i < hier_sched_net_nsegs(a, c); i++) {
        hier_sched_net_seg(a, c, i, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, from, tag, hier_sched_net_at(a, o), reduce ? l : l * a->esize,
                       reduce);
    }
}

static int hier_sched_net_mod(int v, int n)
{
    return ((v % n) + n) % n;
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

/* Elements [*off_p, + *len_p) of blocks [lo, hi) of the vector cut into p2 even blocks. */
static void hier_sched_net_even_span(const hier_net_args_t *a, int p2, int lo, int hi, size_t *off_p, size_t *len_p)
{
    size_t o, l, align = hier_part_align(a->esize);
    hier_part_range(a->count, p2, lo, align, off_p, &l);
    hier_part_range(a->count, p2, hi - 1, align, &o, &l);
    *len_p = o + l - *off_p;
}

/* Rabenseifner's allreduce for any number of participants: the bandwidth of
 * the ring in 2 log2(p2) rounds.
 * 1. fold in as recursive doubling does (the extras hand their vector over);
 * 2. recursive halving: with the vector cut into p2 blocks, at distance
 *    p2/2, p2/4, ..., 1 each stand-in keeps the half of its current blocks on
 *    its side, sends the other half to its partner and folds in the partner's
 *    copy of its own half; afterwards stand-in v holds block v complete;
 * 3. recursive doubling at distance 1, 2, ..., p2/2: partners swap what they
 *    hold, so the ranges grow back to the whole vector;
 * 4. fold out to the extras.
 * Each element is reduced at one stand-in and copied to the rest, so every
 * participant ends with the same bits. */
static void hier_sched_net_rh_allreduce(const hier_net_args_t *a, hier_sched_out_t *out)
{
    hier_rd_t rd = hier_rd(a->nparts);
    int me = a->me, fold = hier_rd_folded(&rd, me), lo = 0, hi = rd.p2;
    size_t bytes = a->count * a->esize, o, l;
    unsigned t = a->tag_base, last = t + 1 + 2 * (unsigned)rd.rounds;

    if (hier_rd_is_extra(&rd, me)) { /* 1, and 4 for the ones that hand over */
        hier_sched_net(out, HIER_STEP_NET_SEND, me + 1, t, hier_sched_net_at(a, 0), bytes, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, me + 1, last, hier_sched_net_at(a, 0), bytes, 0);
        return;
    }
    if (fold >= 0) hier_sched_net(out, HIER_STEP_NET_RECV, fold, t, hier_sched_net_at(a, 0), a->count, 1);
    int v = hier_rd_vrank(&rd, me);
    for (int i = 0, d = rd.p2 / 2; d >= 1; i++, d /= 2) { /* 2 */
        int pv = v ^ d, peer = hier_rd_partner(&rd, v, d), mid = lo + (hi - lo) / 2;
        int keep_lo = v < pv ? lo : mid, keep_hi = v < pv ? mid : hi;
        int give_lo = v < pv ? mid : lo, give_hi = v < pv ? hi : mid;
        hier_sched_net_even_span(a, rd.p2, give_lo, give_hi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l * a->esize, 0);
        hier_sched_net_even_span(a, rd.p2, keep_lo, keep_hi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l, 1);
        lo = keep_lo;
        hi = keep_hi;
    }
    for (int i = 0, d = 1; d < rd.p2; i++, d *= 2) { /* 3 */
        int pv = v ^ d, peer = hier_rd_partner(&rd, v, d);
        int plo = v < pv ? hi : lo - (hi - lo), phi = v < pv ? hi + (hi - lo) : lo;
        hier_sched_net_even_span(a, rd.p2, lo, hi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)(rd.rounds + i), hier_sched_net_at(a, o),
                       l * a->esize, 0);
        hier_sched_net_even_span(a, rd.p2, plo, phi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)(rd.rounds + i), hier_sched_net_at(a, o),
                       l * a->esize, 0);
        lo = v < pv ? lo : plo;
        hi = v < pv ? phi : hi;
    }
    if (fold >= 0) hier_sched_net(out, HIER_STEP_NET_SEND, fold, last, hier_sched_net_at(a, 0), bytes, 0); /* 4 */
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
    case HIER_NET_RH_ALLREDUCE: hier_sched_net_rh_allreduce(a, &out); break;
    }
    return out.n;
}

size_t hier_sched_net_max_steps(const hier_net_args_t *a)
{
    size_t segs = a->blocks == HIER_NET_BLOCKS_RANKS ? a->node_first[a->nparts] : (size_t)a->nparts;
    return 4 * segs + 4 * (size_t)a->nparts + 4 * (size_t)hier_rd(a->nparts).rounds + 8;
}

int hier_sched_net_max_peers(int nparts)
{
    return 3 + hier_rd(nparts).rounds;
}

static size_t hier_sched_net_add_peer(int *peers, size_t n, int p)
{
    for (size_t i = 0; i < n; i++)
        if (peers[i] == p) return n;
    peers[n] = p;
    return n + 1;
}

/* Ring neighbours, the fold partner, and the partners at every distance of
 * recursive doubling and halving: every participant any schedule above has
 * `me` talk to. Symmetric: p is in me's list when me is in p's. */
size_t hier_sched_net_peers(int nparts, int me, int *peers)
{
    size_t n = 0;
    if (nparts < 2) return 0;
    hier_rd_t rd = hier_rd(nparts);
    n = hier_sched_net_add_peer(peers, n, (me + 1) % nparts);
    n = hier_sched_net_add_peer(peers, n, (me + nparts - 1) % nparts);
    if (hier_rd_is_extra(&rd, me)) return hier_sched_net_add_peer(peers, n, me + 1);
    if (hier_rd_folded(&rd, me) >= 0) n = hier_sched_net_add_peer(peers, n, me - 1);
    for (int d = 1, v = hier_rd_vrank(&rd, me); d < rd.p2; d *= 2) n = hier_sched_net_add_peer(peers, n, hier_rd_partner(&rd, v, d));
    return n;
}
