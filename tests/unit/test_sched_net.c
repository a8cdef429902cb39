/* Inter-node schedules run by a message-passing simulator: every participant
 * is a step list; a receive can run only once its message was sent, any
 * ready participant may move next (seeded random), and a state where nobody
 * can move before everyone is done is a deadlock. Sweeps participants x
 * counts; results exact (int64) and identical bit for bit (double). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "exec/hier_exec.h"
#include "exec/hier_reduce.h"
#include "base/hier_part.h"
#include "sched/hier_sched_net.h"

#define MAXP 12

typedef struct {
    int valid;
    size_t len;
    uint8_t *data;
} mailbox_t;

static mailbox_t box[MAXP][MAXP][64]; /* [from][to][tag] */

/* Returns 0, or -1 on deadlock. */
static int net_run(int n, hier_step_t steps[][64], const size_t *nsteps, uint8_t **rbufs, size_t esize,
                   hier_reduce_kernel_t k, unsigned seed)
{
    size_t pos[MAXP] = {0};
    memset(box, 0, sizeof(box));
    for (;;) {
        int ready[MAXP], nready = 0, done = 0;
        for (int r = 0; r < n; r++) {
            if (pos[r] == nsteps[r]) {
                done++;
                continue;
            }
            const hier_step_t *s = &steps[r][pos[r]];
            if (s->op != HIER_STEP_NET_RECV || box[s->peer][r][s->tag].valid) ready[nready++] = r;
        }
        if (done == n) return 0;
        if (!nready) return -1;
        int r = ready[rand_r(&seed) % (unsigned)nready];
        const hier_step_t *s = &steps[r][pos[r]++];
        if (s->op == HIER_STEP_NET_SEND) {
            mailbox_t *m = &box[r][s->peer][s->tag];
            cr_assert(!m->valid, "tag %u from %d to %d sent twice", s->tag, r, s->peer);
            m->data = malloc(s->len);
            memcpy(m->data, rbufs[r] + s->src.off, s->len);
            m->len = s->len;
            m->valid = 1;
        } else if (s->op == HIER_STEP_NET_RECV) {
            mailbox_t *m = &box[s->peer][r][s->tag];
            size_t bytes = s->net_reduce ? s->len * esize : s->len;
            cr_assert_eq(m->len, bytes, "tag %u: %zu bytes sent, %zu expected", s->tag, m->len, bytes);
            if (s->net_reduce)
                k.acc(rbufs[r] + s->dst.off, m->data, s->len);
            else
                memcpy(rbufs[r] + s->dst.off, m->data, bytes);
            free(m->data);
            m->valid = 0;
        } else {
            cr_assert_fail("unexpected step %d", s->op);
        }
    }
}

static int64_t val(int r, size_t i)
{
    return (int64_t)(r + 1) * 1000003 + (int64_t)i;
}

/* Run one kind for n participants: even blocks of count, or (ucounts) blocks
 * of those sizes, as one rank per node's ranges (RANKS blocks). */
static void run(hier_net_kind_t kind, int n, size_t count, const size_t *ucounts, size_t off, unsigned seed)
{
    static hier_step_t steps[MAXP][64];
    size_t nsteps[MAXP], counts[MAXP], displs[MAXP], rdispls[MAXP], total = 0;
    uint32_t first[MAXP + 1], ranks[MAXP];
    uint8_t *ib[MAXP], *db[MAXP];
    hier_reduce_kernel_t ki, kd;
    int gather = kind == HIER_NET_RING_ALLGATHER || kind == HIER_NET_RD_ALLGATHER, rs = kind == HIER_NET_RING_REDUCE_SCATTER;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_INT64, HIER_OP_SUM, &ki), HIER_OK);
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kd), HIER_OK);
    if (ucounts) {
        for (int b = 0; b < n; b++) {
            counts[b] = ucounts[b];
            displs[b] = total;
            rdispls[b] = off + total; /* (RANKS coordinates: base's element 0 is 0) */
            first[b] = ranks[b] = (uint32_t)b;
            total += counts[b];
        }
        first[n] = (uint32_t)n;
        count = total;
    } else { /* the builder's even blocks, as the reference sees them */
        for (int b = 0; b < n; b++) hier_part_range(count, n, b, hier_part_align(8), &displs[b], &counts[b]);
    }
    for (int r = 0; r < n; r++) {
        ib[r] = malloc((off + count + 1) * 8);
        db[r] = malloc((off + count + 1) * 8);
        for (size_t i = 0; i < off + count; i++) {
            int mine = !gather || i < off || (i - off >= displs[r] && i - off < displs[r] + counts[r]);
            ((int64_t *)ib[r])[i] = mine ? val(r, i) : -1;
            ((double *)db[r])[i] = mine ? 1.0 / (r + 3) + (double)i * 0.1 : -1.0;
        }
        hier_net_args_t a = {.kind = kind, .nparts = n, .me = r, .base = {.kind = HIER_BUF_RECV}, .esize = 8,
                             .off = off, .count = count, .blocks = ucounts ? HIER_NET_BLOCKS_RANKS : HIER_NET_BLOCKS_EVEN,
                             .node_first = first, .node_ranks = ranks, .rcounts = counts, .rdispls = rdispls,
                             .tag_base = 3};
        nsteps[r] = hier_sched_net_build(&a, steps[r]);
        cr_assert_leq(nsteps[r], hier_sched_net_max_steps(&a));
        cr_assert_leq(nsteps[r], 64);
    }
    cr_assert_eq(net_run(n, steps, nsteps, ib, 8, ki, seed), 0, "deadlock: kind %d n %d count %zu", kind, n, count);
    cr_assert_eq(net_run(n, steps, nsteps, db, 8, kd, seed + 1), 0, "deadlock: kind %d n %d", kind, n);
    for (int r = 0; r < n; r++) {
        for (size_t i = off; i < off + count; i++) {
            size_t e = i - off;
            int owner = 0;
            while (owner < n - 1 && !(e >= displs[owner] && e < displs[owner] + counts[owner])) owner++;
            if (rs && owner != r) continue; /* only my block is complete */
            int64_t want = 0;
            if (gather)
                want = val(owner, i);
            else
                for (int j = 0; j < n; j++) want += val(j, i);
            cr_assert_eq(((int64_t *)ib[r])[i], want, "kind %d n %d count %zu off %zu rank %d [%zu]", kind, n,
                         count, off, r, i);
            if (!rs) cr_assert(!memcmp(db[r] + i * 8, db[0] + i * 8, 8), "kind %d rank %d [%zu] differs", kind, r, i);
        }
        for (size_t i = 0; i < off; i++) cr_assert_eq(((int64_t *)ib[r])[i], val(r, i), "wrote before the vector");
    }
    for (int r = 0; r < n; r++) {
        free(ib[r]);
        free(db[r]);
    }
}

static const hier_net_kind_t kinds[] = {HIER_NET_RING_ALLREDUCE, HIER_NET_RING_REDUCE_SCATTER,
                                        HIER_NET_RING_ALLGATHER, HIER_NET_RD_ALLGATHER, HIER_NET_RD_ALLREDUCE,
                                        HIER_NET_RH_ALLREDUCE};

Test(sched_net, every_kind_swept_over_participants_and_counts)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 8, 9, 64, 100, 1037};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (int n = 1; n <= MAXP; n++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (unsigned seed = 0; seed < 3; seed++)
                    run(kinds[k], n, counts[c], NULL, c % 2 ? 5 : 0, seed * 7 + (unsigned)n);
}

Test(sched_net, uneven_blocks_with_empty_ones)
{
    size_t uc[MAXP];
    for (size_t k = 0; k < 4; k++) /* the kinds that take blocks per participant */
        for (int n = 2; n <= MAXP; n++) {
            for (int b = 0; b < n; b++) uc[b] = (size_t)(b * 7 % 5) * 13;
            run(kinds[k], n, 0, uc, 3, (unsigned)n);
        }
}

Test(sched_net, ring_moves_two_vectors_minus_two_blocks)
{
    static hier_step_t steps[64];
    hier_net_args_t a = {.kind = HIER_NET_RING_ALLREDUCE, .nparts = 4, .me = 1, .base = {.kind = HIER_BUF_RECV},
                         .esize = 8, .count = 4096, .blocks = HIER_NET_BLOCKS_EVEN};
    size_t n = hier_sched_net_build(&a, steps), sent = 0;
    for (size_t i = 0; i < n; i++)
        if (steps[i].op == HIER_STEP_NET_SEND) sent += steps[i].len;
    cr_assert_eq(sent, 2 * 3 * 4096 * 8 / 4, "a ring participant sends 2 (N-1)/N of the vector");
}

Test(sched_net, rabenseifner_moves_as_little_as_the_ring_in_log_rounds)
{
    static hier_step_t steps[64];
    for (int n = 2; n <= 8; n *= 2) {
        hier_net_args_t a = {.kind = HIER_NET_RH_ALLREDUCE, .nparts = n, .me = 1, .base = {.kind = HIER_BUF_RECV},
                             .esize = 8, .count = 4096};
        size_t m = hier_sched_net_build(&a, steps), sent = 0, sends = 0, lg = 0;
        while ((1 << (lg + 1)) <= n) lg++;
        for (size_t i = 0; i < m; i++)
            if (steps[i].op == HIER_STEP_NET_SEND) sent += steps[i].len, sends++;
        cr_assert_eq(sent, 2 * (size_t)(n - 1) * 4096 * 8 / (size_t)n, "n %d: %zu bytes", n, sent);
        cr_assert_eq(sends, 2 * lg, "n %d: %zu messages", n, sends);
    }
}

Test(sched_net, recursive_doubling_takes_log_rounds)
{
    static hier_step_t steps[64];
    for (int n = 2; n <= MAXP; n++) {
        int p2 = 1, rounds = 0;
        while (p2 * 2 <= n) p2 *= 2, rounds++;
        hier_net_args_t a = {.kind = HIER_NET_RD_ALLREDUCE, .nparts = n, .me = n - 1, .base = {.kind = HIER_BUF_RECV}, .esize = 8, .count = 10};
        size_t sends = 0, m = hier_sched_net_build(&a, steps);
        for (size_t i = 0; i < m; i++) sends += steps[i].op == HIER_STEP_NET_SEND;
        cr_assert_leq(sends, (size_t)rounds + 1, "n %d: %zu sends", n, sends);
    }
}

/* The peers a participant sets channels up for are exactly the ones its
 * schedules talk to, both ways, and few (3 + log2 n), at any size. */
static void peers_of(int n, int p, uint8_t *need)
{
    int list[64];
    size_t k = hier_sched_net_peers(n, p, list);
    cr_assert_leq(k, (size_t)hier_sched_net_max_peers(n));
    memset(need, 0, (size_t)n);
    for (size_t i = 0; i < k; i++) {
        cr_assert(list[i] >= 0 && list[i] < n && !need[list[i]], "n %d: peer %d of %d bad or twice", n, list[i], p);
        need[list[i]] = 1;
    }
}

Test(sched_net, channels_needed_are_symmetric_few_and_all_used)
{
    static const int sizes[] = {2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 33, 64, 100, 255, 1000, 1024};
    static hier_step_t steps[9000];
    uint8_t *need = malloc(1024 * 1024);
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int n = sizes[si], lg = 0;
        while ((1 << (lg + 1)) <= n) lg++;
        for (int p = 0; p < n; p++) peers_of(n, p, need + (size_t)p * (size_t)n);
        for (int p = 0; p < n; p++) {
            uint8_t *mine = need + (size_t)p * (size_t)n;
            int count = 0;
            cr_assert(!mine[p], "n %d: participant %d talks to itself", n, p);
            cr_assert(mine[(p + 1) % n] && mine[(p + n - 1) % n], "n %d: ring neighbours of %d", n, p);
            for (int q = 0; q < n; q++) {
                cr_assert_eq(mine[q], need[(size_t)q * (size_t)n + (size_t)p], "n %d: %d needs %d but not the reverse",
                             n, p, q);
                count += mine[q];
            }
            cr_assert_leq(count, 3 + lg, "n %d: participant %d has %d channels", n, p, count);
            for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) { /* every peer a schedule uses is there */
                hier_net_args_t a = {.kind = kinds[k], .nparts = n, .me = p, .base = {.kind = HIER_BUF_RECV},
                                     .esize = 8, .count = (size_t)n * 64, .blocks = HIER_NET_BLOCKS_EVEN};
                cr_assert_leq(hier_sched_net_max_steps(&a), sizeof(steps) / sizeof(steps[0]));
                size_t m = hier_sched_net_build(&a, steps);
                for (size_t i = 0; i < m; i++)
                    cr_assert(mine[steps[i].peer], "n %d kind %d: %d talks to %u without a channel", n,
                              (int)kinds[k], p, steps[i].peer);
            }
        }
    }
    free(need);
}
