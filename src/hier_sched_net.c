/* hier_sched_net.c: inter-node schedules (pure builders), the level that
 * runs between nodes once each node has reduced its share in shared memory.
 * Participants are the ranks of one local index, one per node; a block is a
 * range of elements of RECV, given per participant (uneven nodes give
 * uneven blocks). Every element is reduced along exactly one chain and then
 * copied, or reduced by partners from the same two operands, so all
 * participants end with the same bits. */
#include <string.h>

#include "hier_part.h"
#include "hier_sched_impl.h"

static void hier_sched_net(hier_sched_out_t *out, hier_step_op_t op, int peer, unsigned tag, hier_ref_t ref,
                           size_t len, int reduce)
{
    if (!len) return;
    hier_step_t st = {.op = op, .len = len, .peer = (uint16_t)peer, .tag = (uint16_t)tag,
                      .net_reduce = (uint8_t)reduce, .self_rank = HIER_SCHED_NO_RANK};
    if (op == HIER_STEP_NET_SEND)
        st.src = ref;
    else
        st.dst = ref;
    out->steps[out->n++] = st;
}

/* Where element `off` (from a->off) of the vector lives. */
static hier_ref_t hier_sched_net_at(const hier_net_args_t *a, size_t off)
{
    hier_ref_t r = a->base;
    r.off += (a->off + off) * a->esize;
    return r;
}

/* Range i of block b: one range (counts/displs) or several (seg_*). */
static size_t hier_sched_net_nsegs(const hier_net_args_t *a, int b)
{
    return a->seg_first ? a->seg_first[b + 1] - a->seg_first[b] : 1;
}

static void hier_sched_net_seg(const hier_net_args_t *a, int b, size_t i, size_t *off_p, size_t *len_p)
{
    if (a->seg_first) {
        *off_p = a->seg_off[a->seg_first[b] + i];
        *len_p = a->seg_len[a->seg_first[b] + i];
    } else {
        *off_p = a->displs[b];
        *len_p = a->counts[b];
    }
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

/* Recursive doubling over the whole vector, for any number of participants:
 * 1. fold in: with p2 the largest power of two <= N and rem = N - p2, each
 *    even participant below 2 rem hands its vector to the odd one above it,
 *    which reduces it and stands in for both;
 * 2. log2(p2) rounds: exchange vectors with the partner at distance 2^i (in
 *    the p2 stand-ins' numbering) and reduce (the ops are commutative, so both
 *    partners compute the same bits);
 * 3. fold out: each stand-in hands the result back to its even participant. */
static void hier_sched_net_rd_allreduce(const hier_net_args_t *a, hier_sched_out_t *out)
{
    int n = a->nparts, p2 = 1, rounds = 0;
    while (p2 * 2 <= n) p2 *= 2, rounds++;
    int rem = n - p2, me = a->me, vrank;
    size_t bytes = a->count * a->esize;
    hier_ref_t vec = hier_sched_net_at(a, 0);
    unsigned t = a->tag_base;

    if (me < 2 * rem && me % 2 == 0) { /* 1, and 3 for the ones that hand over */
        hier_sched_net(out, HIER_STEP_NET_SEND, me + 1, t, vec, bytes, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, me + 1, t + 1 + (unsigned)rounds, vec, bytes, 0);
        return;
    }
    if (me < 2 * rem) {
        hier_sched_net(out, HIER_STEP_NET_RECV, me - 1, t, vec, a->count, 1);
        vrank = me / 2;
    } else {
        vrank = me - rem;
    }
    for (int i = 0; i < rounds; i++) { /* 2 */
        int pv = vrank ^ (1 << i), peer = pv < rem ? 2 * pv + 1 : pv + rem;
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)i, vec, bytes, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)i, vec, a->count, 1);
    }
    if (me < 2 * rem) hier_sched_net(out, HIER_STEP_NET_SEND, me - 1, t + 1 + (unsigned)rounds, vec, bytes, 0); /* 3 */
}

/* Where the blocks of participants [lo, hi] start and how many elements
 * they span (blocks are consecutive in participant order). */
static void hier_sched_net_span(const hier_net_args_t *a, int lo, int hi, size_t *off_p, size_t *len_p)
{
    *off_p = a->displs[lo];
    *len_p = a->displs[hi] + a->counts[hi] - a->displs[lo];
}

/* The participants a stand-in of the virtual numbering speaks for. */
static int hier_sched_net_real_lo(int v, int rem)
{
    return v < rem ? 2 * v : v + rem;
}

static int hier_sched_net_real_hi(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

/* Recursive doubling allgather for any number of participants, with the
 * numbering of the allreduce above:
 * 1. fold in: each even participant below 2 rem hands its block to the odd
 *    one above it, which then holds both (they are adjacent);
 * 2. round i: exchange everything held (the blocks of 2^i consecutive
 *    stand-ins, one contiguous range) with the partner at distance 2^i;
 * 3. fold out: each stand-in hands the whole vector to its even participant. */
static void hier_sched_net_rd_allgather(const hier_net_args_t *a, hier_sched_out_t *out)
{
    int n = a->nparts, p2 = 1, rounds = 0;
    while (p2 * 2 <= n) p2 *= 2, rounds++;
    int rem = n - p2, me = a->me, vrank;
    size_t all_off, all_len, o, l;
    unsigned t = a->tag_base;

    hier_sched_net_span(a, 0, n - 1, &all_off, &all_len);
    if (me < 2 * rem && me % 2 == 0) { /* 1, and 3 for the ones that hand over */
        hier_sched_net(out, HIER_STEP_NET_SEND, me + 1, t, hier_sched_net_at(a, a->displs[me]),
                       a->counts[me] * a->esize, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, me + 1, t + 1 + (unsigned)rounds, hier_sched_net_at(a, all_off),
                       all_len * a->esize, 0);
        return;
    }
    if (me < 2 * rem) {
        hier_sched_net(out, HIER_STEP_NET_RECV, me - 1, t, hier_sched_net_at(a, a->displs[me - 1]),
                       a->counts[me - 1] * a->esize, 0);
        vrank = me / 2;
    } else {
        vrank = me - rem;
    }
    for (int i = 0; i < rounds; i++) { /* 2 */
        int mask = (1 << i) - 1, pv = vrank ^ (1 << i), peer = pv < rem ? 2 * pv + 1 : pv + rem;
        int mine_lo = vrank & ~mask, theirs_lo = pv & ~mask;
        hier_sched_net_span(a, hier_sched_net_real_lo(mine_lo, rem), hier_sched_net_real_hi(mine_lo + mask, rem),
                            &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l * a->esize, 0);
        hier_sched_net_span(a, hier_sched_net_real_lo(theirs_lo, rem),
                            hier_sched_net_real_hi(theirs_lo + mask, rem), &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l * a->esize, 0);
    }
    if (me < 2 * rem) /* 3 */
        hier_sched_net(out, HIER_STEP_NET_SEND, me - 1, t + 1 + (unsigned)rounds, hier_sched_net_at(a, all_off),
                       all_len * a->esize, 0);
}

/* Elements [*off_p, + *len_p) of blocks [lo, hi) of the p2 equal blocks. */
static void hier_sched_net_blocks_span(const size_t *counts, const size_t *displs, int lo, int hi, size_t *off_p,
                                       size_t *len_p)
{
    *off_p = displs[lo];
    *len_p = displs[hi - 1] + counts[hi - 1] - displs[lo];
}

/* Rabenseifner's allreduce for any number of participants: the bandwidth of
 * the ring in 2 log2(p2) rounds, p2 the largest power of two <= N.
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
    int n = a->nparts, p2 = 1, rounds = 0;
    while (p2 * 2 <= n) p2 *= 2, rounds++;
    int rem = n - p2, me = a->me, vrank, lo = 0, hi = p2;
    size_t bytes = a->count * a->esize, counts[HIER_SCHED_MAX_NODES], displs[HIER_SCHED_MAX_NODES], o, l;
    unsigned t = a->tag_base;

    if (me < 2 * rem && me % 2 == 0) { /* 1, and 4 for the ones that hand over */
        hier_sched_net(out, HIER_STEP_NET_SEND, me + 1, t, hier_sched_net_at(a, 0), bytes, 0);
        hier_sched_net(out, HIER_STEP_NET_RECV, me + 1, t + 1 + 2 * (unsigned)rounds, hier_sched_net_at(a, 0), bytes,
                       0);
        return;
    }
    if (me < 2 * rem) {
        hier_sched_net(out, HIER_STEP_NET_RECV, me - 1, t, hier_sched_net_at(a, 0), a->count, 1);
        vrank = me / 2;
    } else {
        vrank = me - rem;
    }
    hier_sched_net_even_blocks(a->count, p2, a->esize, counts, displs);
    for (int i = 0, d = p2 / 2; d >= 1; i++, d /= 2) { /* 2 */
        int pv = vrank ^ d, peer = pv < rem ? 2 * pv + 1 : pv + rem, mid = lo + (hi - lo) / 2;
        int keep_lo = vrank < pv ? lo : mid, keep_hi = vrank < pv ? mid : hi;
        int give_lo = vrank < pv ? mid : lo, give_hi = vrank < pv ? hi : mid;
        hier_sched_net_blocks_span(counts, displs, give_lo, give_hi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l * a->esize, 0);
        hier_sched_net_blocks_span(counts, displs, keep_lo, keep_hi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)i, hier_sched_net_at(a, o), l, 1);
        lo = keep_lo;
        hi = keep_hi;
    }
    for (int i = 0, d = 1; d < p2; i++, d *= 2) { /* 3 */
        int pv = vrank ^ d, peer = pv < rem ? 2 * pv + 1 : pv + rem;
        int plo = vrank < pv ? hi : lo - (hi - lo), phi = vrank < pv ? hi + (hi - lo) : lo;
        hier_sched_net_blocks_span(counts, displs, lo, hi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_SEND, peer, t + 1 + (unsigned)(rounds + i), hier_sched_net_at(a, o),
                       l * a->esize, 0);
        hier_sched_net_blocks_span(counts, displs, plo, phi, &o, &l);
        hier_sched_net(out, HIER_STEP_NET_RECV, peer, t + 1 + (unsigned)(rounds + i), hier_sched_net_at(a, o),
                       l * a->esize, 0);
        lo = vrank < pv ? lo : plo;
        hi = vrank < pv ? phi : hi;
    }
    if (me < 2 * rem) /* 4 */
        hier_sched_net(out, HIER_STEP_NET_SEND, me - 1, t + 1 + 2 * (unsigned)rounds, hier_sched_net_at(a, 0), bytes,
                       0);
}

void hier_sched_net_even_blocks(size_t count, int nparts, size_t esize, size_t *counts, size_t *displs)
{
    for (int b = 0; b < nparts; b++) hier_part_range(count, nparts, b, hier_part_align(esize), &displs[b], &counts[b]);
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

void hier_sched_net_peers(int nparts, int me, uint8_t *needed)
{
    size_t counts[HIER_SCHED_MAX_NODES], displs[HIER_SCHED_MAX_NODES];
    hier_step_t steps[HIER_SCHED_NET_MAX_STEPS(HIER_SCHED_MAX_NODES, HIER_SCHED_MAX_NODES)];
    memset(needed, 0, (size_t)nparts);
    if (nparts < 2 || nparts > HIER_SCHED_MAX_NODES) return;
    hier_sched_net_even_blocks((size_t)nparts, nparts, 1, counts, displs);
    static const hier_net_kind_t kinds[] = {HIER_NET_RING_ALLREDUCE, HIER_NET_RD_ALLREDUCE, HIER_NET_RH_ALLREDUCE};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        hier_net_kind_t kind = kinds[k];
        hier_net_args_t a = {.kind = kind, .nparts = nparts, .me = me, .esize = 1,
                             .base = hier_ref(HIER_BUF_RECV, 0, 0, 0), .count = (size_t)nparts, .counts = counts,
                             .displs = displs};
        size_t n = hier_sched_net_build(&a, steps);
        for (size_t i = 0; i < n; i++) needed[steps[i].peer] = 1;
    }
}
