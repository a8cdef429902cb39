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
#include "sched/hier_sched_pattern.h"

#define MAXP 12
#define MAXSTEPS 256

/* A message on its way: the simulator's channels keep each sender's
 * messages to a receiver in order, as the real channels do. */
typedef struct msg {
    struct msg *next;
    int from;
    unsigned tag;
    size_t len;
    uint8_t data[];
} msg_t;

/* The first message from `from` queued at `q` (the only one a receive from it may take). */
static msg_t **first_from(msg_t **q, int from)
{
    while (*q && (*q)->from != from) q = &(*q)->next;
    return q;
}

/* Participants' step lists run in random order (any ready participant may
 * move next, seeded); a receive is ready once the sender's next message to
 * it is there, and must then be the one it names. Returns 0, or -1 on deadlock. */
static int net_run(int n, hier_step_t **steps, const size_t *nsteps, uint8_t **rbufs, size_t esize,
                   hier_reduce_kernel_t k, unsigned seed)
{
    size_t *pos = calloc((size_t)n, sizeof(size_t));
    msg_t **inbox = calloc((size_t)n, sizeof(msg_t *)), **tail = calloc((size_t)n, sizeof(msg_t *));
    int *ready = malloc(sizeof(int) * (size_t)n), rc = 0;
    for (;;) {
        int nready = 0, done = 0;
        for (int r = 0; r < n; r++) {
            if (pos[r] == nsteps[r]) {
                done++;
                continue;
            }
            const hier_step_t *s = &steps[r][pos[r]];
            if (s->op != HIER_STEP_NET_RECV || *first_from(&inbox[r], (int)s->peer)) ready[nready++] = r;
        }
        if (done == n) break;
        if (!nready) {
            rc = -1;
            break;
        }
        int r = ready[rand_r(&seed) % (unsigned)nready];
        const hier_step_t *s = &steps[r][pos[r]++];
        if (s->op == HIER_STEP_NET_SEND) {
            msg_t *m = malloc(sizeof(*m) + s->len), **end = &inbox[s->peer];
            *m = (msg_t){.from = r, .tag = s->tag, .len = s->len};
            memcpy(m->data, rbufs[r] + s->src.off, s->len);
            while (*end) end = &(*end)->next;
            *end = m;
        } else if (s->op == HIER_STEP_NET_RECV) {
            msg_t **at = first_from(&inbox[r], (int)s->peer), *m = *at;
            size_t bytes = s->net_reduce ? s->len * esize : s->len;
            cr_assert_eq(m->tag, s->tag, "participant %d expected message %u from %u, got %u", r, s->tag, s->peer,
                         m->tag);
            cr_assert_eq(m->len, bytes, "tag %u: %zu bytes sent, %zu expected", s->tag, m->len, bytes);
            if (s->net_reduce)
                k.acc(rbufs[r] + s->dst.off, m->data, s->len);
            else
                memcpy(rbufs[r] + s->dst.off, m->data, bytes);
            *at = m->next;
            free(m);
        } else {
            cr_assert_fail("unexpected step %d", s->op);
        }
    }
    for (int r = 0; r < n; r++)
        for (msg_t *m = inbox[r], *nx; m; m = nx) {
            nx = m->next;
            cr_assert_fail("participant %d left a message from %d unreceived", r, m->from);
            free(m);
        }
    free(pos);
    free(inbox);
    free(tail);
    free(ready);
    return rc;
}

static int64_t val(int r, size_t i)
{
    return (int64_t)(r + 1) * 1000003 + (int64_t)i;
}

typedef struct {
    hier_net_kind_t kind;
    int n;              /* participants (nodes) */
    size_t count;       /* even blocks: the vector */
    const size_t *rc;   /* else RANKS blocks: rc[x] elements for rank x, n x rpn ranks */
    int rpn;            /* ranks per node (RANKS) */
    int interleave;     /* rank x on node x % n (else x / rpn) */
    size_t off;
    unsigned seed;
    int radix;
} net_case_t;

static int is_gather(hier_net_kind_t k)
{
    return k == HIER_NET_RING_ALLGATHER || k == HIER_NET_RD_ALLGATHER || k == HIER_NET_RH_ALLGATHER;
}

static int is_rs(hier_net_kind_t k)
{
    return k == HIER_NET_RING_REDUCE_SCATTER || k == HIER_NET_RH_REDUCE_SCATTER;
}

/* Run one case: every participant's steps, executed twice (int64 sums must
 * be exact, doubles equal bit for bit across participants), checked against
 * sums computed here. The node owning each element is worked out from the
 * blocks as the collective defines them, not from the builder. */
static void run_case(const net_case_t *c)
{
    int n = c->n, T = c->rc ? n * c->rpn : n, gather = is_gather(c->kind), rs = is_rs(c->kind);
    size_t count = c->count, off = c->off, total = 0, *rdispls = calloc((size_t)T, sizeof(size_t));
    size_t *nsteps = calloc((size_t)n, sizeof(size_t));
    uint32_t *first = calloc((size_t)n + 1, sizeof(uint32_t)), *ranks = calloc((size_t)T, sizeof(uint32_t));
    hier_step_t **steps = calloc((size_t)n, sizeof(*steps));
    uint8_t **ib = calloc((size_t)n, sizeof(*ib)), **db = calloc((size_t)n, sizeof(*db));
    hier_reduce_kernel_t ki, kd;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_INT64, HIER_OP_SUM, &ki), HIER_OK);
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kd), HIER_OK);
    if (c->rc) {
        for (int x = 0; x < T; x++) rdispls[x] = off + total, total += c->rc[x]; /* (base's element 0 is 0) */
        for (int b = 0, i = 0; b < n; b++) { /* node b's ranks, increasing */
            first[b] = (uint32_t)i;
            for (int x = 0; x < T; x++)
                if ((c->interleave ? x % n : x / c->rpn) == b) ranks[i++] = (uint32_t)x;
        }
        first[n] = (uint32_t)T;
        count = total;
    }
    int *owner = malloc(sizeof(int) * (count + 1)); /* element -> node */
    for (int b = 0; b < n; b++) {
        if (c->rc) {
            for (uint32_t i = first[b]; i < first[b + 1]; i++)
                for (size_t e = 0; e < c->rc[ranks[i]]; e++) owner[rdispls[ranks[i]] - off + e] = b;
        } else {
            size_t o, l;
            hier_part_range(count, n, b, hier_part_align(8), &o, &l);
            for (size_t e = o; e < o + l; e++) owner[e] = b;
        }
    }
    for (int r = 0; r < n; r++) {
        ib[r] = malloc((off + count + 1) * 8);
        db[r] = malloc((off + count + 1) * 8);
        for (size_t i = 0; i < off + count; i++) {
            int mine = !gather || i < off || owner[i - off] == r;
            ((int64_t *)ib[r])[i] = mine ? val(r, i) : -1;
            ((double *)db[r])[i] = mine ? 1.0 / (r + 3) + (double)i * 0.1 : -1.0;
        }
        hier_net_args_t a = {.kind = c->kind, .nparts = n, .me = r, .base = {.kind = HIER_BUF_RECV}, .esize = 8,
                             .off = off, .count = count, .blocks = c->rc ? HIER_NET_BLOCKS_RANKS : HIER_NET_BLOCKS_EVEN,
                             .node_first = first, .node_ranks = ranks, .rcounts = c->rc, .rdispls = rdispls,
                             .tag_base = 3, .radix_max = c->radix};
        size_t cap = hier_sched_net_max_steps(&a);
        steps[r] = malloc(sizeof(hier_step_t) * cap);
        nsteps[r] = hier_sched_net_build(&a, steps[r]);
        cr_assert_leq(nsteps[r], cap, "kind %d n %d: %zu steps, bound %zu", c->kind, n, nsteps[r], cap);
    }
    cr_assert_eq(net_run(n, steps, nsteps, ib, 8, ki, c->seed), 0, "deadlock: kind %d n %d count %zu", c->kind, n,
                 count);
    cr_assert_eq(net_run(n, steps, nsteps, db, 8, kd, c->seed + 1), 0, "deadlock: kind %d n %d", c->kind, n);
    for (int r = 0; r < n; r++) {
        for (size_t i = off; i < off + count; i++) {
            int who = owner[i - off];
            if (rs && who != r) continue; /* only my block is complete */
            int64_t want = 0;
            if (gather)
                want = val(who, i);
            else
                for (int j = 0; j < n; j++) want += val(j, i);
            cr_assert_eq(((int64_t *)ib[r])[i], want, "kind %d radix %d n %d count %zu off %zu rank %d [%zu]",
                         c->kind, c->radix, n, count, off, r, i);
            if (!rs) cr_assert(!memcmp(db[r] + i * 8, db[0] + i * 8, 8), "kind %d rank %d [%zu] differs", c->kind, r, i);
        }
        for (size_t i = 0; i < off; i++) cr_assert_eq(((int64_t *)ib[r])[i], val(r, i), "wrote before the vector");
    }
    for (int r = 0; r < n; r++) {
        free(ib[r]);
        free(db[r]);
        free(steps[r]);
    }
    free(ib), free(db), free(steps), free(owner), free(first), free(ranks), free(rdispls), free(nsteps);
}

static void run(hier_net_kind_t kind, int n, size_t count, const size_t *ucounts, size_t off, unsigned seed)
{
    net_case_t c = {.kind = kind, .n = n, .count = count, .rc = ucounts, .rpn = 1, .off = off, .seed = seed,
                    .radix = 2};
    run_case(&c);
}

static const hier_net_kind_t kinds[] = {HIER_NET_RING_ALLREDUCE, HIER_NET_RING_REDUCE_SCATTER,
                                        HIER_NET_RING_ALLGATHER, HIER_NET_RD_ALLGATHER, HIER_NET_RH_ALLREDUCE,
                                        HIER_NET_RH_REDUCE_SCATTER, HIER_NET_RH_ALLGATHER, HIER_NET_RD_ALLREDUCE};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))
#define NBLOCK_KINDS (NKINDS - 1) /* all but recursive doubling's allreduce take blocks per participant */

Test(sched_net, every_kind_swept_over_participants_and_counts)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 8, 9, 64, 100, 1037};
    for (size_t k = 0; k < NKINDS; k++)
        for (int n = 1; n <= MAXP; n++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (unsigned seed = 0; seed < 3; seed++)
                    run(kinds[k], n, counts[c], NULL, c % 2 ? 5 : 0, seed * 7 + (unsigned)n);
}

/* Rabenseifner in every radix: 2 (recursive halving), 3, 4, 8, and with
 * folds (primes above the radix). */
Test(sched_net, rabenseifner_in_every_radix)
{
    static const size_t counts[] = {0, 1, 5, 64, 1037};
    static const int radices[] = {3, 4, 5, 8};
    for (size_t k = 4; k < 7; k++)
        for (size_t x = 0; x < sizeof(radices) / sizeof(radices[0]); x++)
            for (int n = 1; n <= MAXP; n++)
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                    net_case_t nc = {.kind = kinds[k], .n = n, .count = counts[c], .rpn = 1, .off = c % 2 ? 5 : 0,
                                     .seed = (unsigned)(n + 11 * (int)c), .radix = radices[x]};
                    run_case(&nc);
                }
}

Test(sched_net, uneven_blocks_with_empty_ones)
{
    size_t uc[MAXP];
    for (size_t k = 0; k < NBLOCK_KINDS; k++)
        for (int n = 2; n <= MAXP; n++) {
            for (int b = 0; b < n; b++) uc[b] = (size_t)(b * 7 % 5) * 13;
            run(kinds[k], n, 0, uc, 3, (unsigned)n);
        }
}

/* Several ranks per node, their blocks uneven, some empty, and a node's
 * ranks consecutive or spread over the vector (one message per range). */
Test(sched_net, ranks_blocks_consecutive_and_interleaved)
{
    size_t uc[MAXP * 3];
    for (size_t k = 0; k < NBLOCK_KINDS; k++)
        for (int n = 2; n <= MAXP; n++)
            if (kinds[k] != HIER_NET_RD_ALLGATHER) /* (takes one range per node: NODES blocks) */
            for (int il = 0; il < 2; il++)
                for (int radix = 2; radix <= 8; radix += 3) {
                    for (int x = 0; x < 3 * n; x++) uc[x] = (size_t)(x * 5 % 7) * 3;
                    net_case_t c = {.kind = kinds[k], .n = n, .rc = uc, .rpn = 3, .interleave = il, .off = 2,
                                    .seed = (unsigned)n, .radix = radix};
                    run_case(&c);
                }
}

/* Up to 1,024 nodes at small payloads: every kind, powers of two, primes,
 * smooth and unsmooth counts, radix 2 and 8. */
Test(sched_net, many_nodes_small_payloads, .timeout = 120)
{
    static const int sizes[] = {13, 31, 100, 255, 256, 1000, 1021, 1024};
    for (size_t k = 0; k < NKINDS; k++)
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
            for (int radix = 2; radix <= 8; radix += 6) {
                int n = sizes[si];
                if (kinds[k] <= HIER_NET_RING_ALLGATHER && n > 256) continue; /* (2 n steps each: slow, not different) */
                net_case_t c = {.kind = kinds[k], .n = n, .count = (size_t)n + 3, .rpn = 1, .seed = (unsigned)n,
                                .radix = radix};
                run_case(&c);
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

/* Where no node is folded, Rabenseifner sends what the ring sends, 2 (n-1)/n
 * of the vector, in 2 x levels rounds of radix - 1 messages: log2 n with
 * radix 2, 4 levels (8 x 5 x 5 x 5) at 1,000 nodes with radix 8. */
Test(sched_net, rabenseifner_moves_as_little_as_the_ring_in_log_rounds)
{
    static const int sizes[] = {2, 3, 4, 6, 8, 12, 16, 100, 1000, 1024};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
        for (int radix = 2; radix <= 8; radix *= 2) {
            int n = sizes[si];
            hier_radix_t x = hier_radix(n, radix);
            if (x.fold.rem) continue;
            size_t expect_msgs = 0;
            for (int i = 0; i < x.levels; i++) expect_msgs += 2 * (size_t)(x.radix[i] - 1);
            hier_net_args_t a = {.kind = HIER_NET_RH_ALLREDUCE, .nparts = n, .me = n / 3,
                                 .base = {.kind = HIER_BUF_RECV}, .esize = 8, .count = (size_t)n * 64,
                                 .radix_max = radix};
            hier_step_t *steps = malloc(sizeof(hier_step_t) * hier_sched_net_max_steps(&a));
            size_t m = hier_sched_net_build(&a, steps), sent = 0, sends = 0;
            uint32_t tags = 0;
            for (size_t i = 0; i < m; i++)
                if (steps[i].op == HIER_STEP_NET_SEND) {
                    sent += steps[i].len, sends++;
                    tags |= 1u << (steps[i].tag - a.tag_base);
                }
            cr_assert_eq(sent, 2 * (size_t)(n - 1) * 64 * 8, "n %d radix %d: %zu bytes", n, radix, sent);
            cr_assert_eq(sends, expect_msgs, "n %d radix %d: %zu messages", n, radix, sends);
            cr_assert_eq(__builtin_popcount(tags), 2 * x.levels, "n %d radix %d: rounds", n, radix);
            free(steps);
        }
    cr_assert_eq(hier_radix(1000, 8).levels, 4);
    cr_assert_eq(hier_radix(1024, 2).levels, 10);
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
 * schedules talk to, both ways, and few (3 + log2 n, and each level's radix
 * - 1 for Rabenseifner), at any size. */
static void peers_of(int n, int p, int radix, uint8_t *need)
{
    int list[128];
    size_t k = hier_sched_net_peers(n, p, radix, list);
    cr_assert_leq(k, (size_t)hier_sched_net_max_peers(n, radix));
    cr_assert_leq(k, 128);
    memset(need, 0, (size_t)n);
    for (size_t i = 0; i < k; i++) {
        cr_assert(list[i] >= 0 && list[i] < n && !need[list[i]], "n %d: peer %d of %d bad or twice", n, list[i], p);
        need[list[i]] = 1;
    }
}

Test(sched_net, channels_needed_are_symmetric_few_and_all_used, .timeout = 120)
{
    static const int sizes[] = {2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 33, 64, 100, 255, 1000, 1024};
    uint8_t *need = malloc(1024 * 1024);
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
        for (int radix = 2; radix <= 8; radix *= 2) {
            int n = sizes[si], lg = 0, most = 4;
            while ((1 << (lg + 1)) <= n) lg++;
            hier_radix_t x = hier_radix(n, radix);
            for (int i = 0; i < x.levels; i++) most += x.radix[i] - 1;
            for (int p = 0; p < n; p++) peers_of(n, p, radix, need + (size_t)p * (size_t)n);
            for (int p = 0; p < n; p++) {
                uint8_t *mine = need + (size_t)p * (size_t)n;
                int count = 0;
                cr_assert(!mine[p], "n %d: participant %d talks to itself", n, p);
                cr_assert(mine[(p + 1) % n] && mine[(p + n - 1) % n], "n %d: ring neighbours of %d", n, p);
                for (int q = 0; q < n; q++) {
                    cr_assert_eq(mine[q], need[(size_t)q * (size_t)n + (size_t)p],
                                 "n %d: %d needs %d but not the reverse", n, p, q);
                    count += mine[q];
                }
                cr_assert_leq(count, most + lg, "n %d radix %d: participant %d has %d channels", n, radix, p, count);
                for (size_t k = 0; k < NKINDS; k++) { /* every peer a schedule uses is there */
                    if (kinds[k] <= HIER_NET_RING_ALLGATHER && p > 2) continue; /* (the ring's are checked above) */
                    hier_net_args_t a = {.kind = kinds[k], .nparts = n, .me = p, .base = {.kind = HIER_BUF_RECV},
                                         .esize = 8, .count = (size_t)n * 64, .blocks = HIER_NET_BLOCKS_EVEN,
                                         .radix_max = radix};
                    hier_step_t *steps = malloc(sizeof(hier_step_t) * hier_sched_net_max_steps(&a));
                    size_t m = hier_sched_net_build(&a, steps);
                    for (size_t i = 0; i < m; i++)
                        cr_assert(mine[steps[i].peer], "n %d kind %d: %d talks to %u without a channel", n,
                                  (int)kinds[k], p, steps[i].peer);
                    free(steps);
                }
            }
        }
    free(need);
}

/* The memory a set-up reserves for the list of peers before it knows how many
 * nodes there are: enough for any node count up to the ranks, any radix. */
Test(sched_net, peer_list_room_covers_every_node_count)
{
    for (int most = 1; most <= 3000; most++)
        for (int radix = 2; radix <= 16; radix++)
            cr_assert_leq(hier_sched_net_max_peers(most, radix), hier_sched_net_max_peers_upto(most),
                          "%d parts, radix %d", most, radix);
}
