/* Inter-node schedules run by a message-passing simulator: every participant
 * is a step list; a receive can run only once its message was sent, any
 * ready participant may move next (seeded random), and a state where nobody
 * can move before everyone is done is a deadlock. Sweeps participants x
 * counts; results exact (int64) and identical bit for bit (double). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "hier_exec.h"
#include "hier_reduce.h"
#include "hier_sched.h"

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

static void ring(int n, size_t count, size_t off, unsigned seed)
{
    static hier_step_t steps[MAXP][64];
    size_t nsteps[MAXP];
    uint8_t *ib[MAXP], *db[MAXP];
    hier_reduce_kernel_t ki, kd;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_INT64, HIER_OP_SUM, &ki), HIER_OK);
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &kd), HIER_OK);
    for (int r = 0; r < n; r++) {
        ib[r] = calloc(off + count + 1, 8);
        db[r] = calloc(off + count + 1, 8);
        for (size_t i = 0; i < off + count; i++) {
            ((int64_t *)ib[r])[i] = (int64_t)(r + 1) * 1000003 + (int64_t)i;
            ((double *)db[r])[i] = 1.0 / (r + 3) + (double)i * 0.1;
        }
        hier_net_args_t a = {.nparts = n, .me = r, .esize = 8, .count = count, .off = off, .tag_base = 3};
        nsteps[r] = hier_sched_net_ring_allreduce(&a, steps[r]);
        cr_assert_leq(nsteps[r], HIER_SCHED_NET_MAX_STEPS(n));
    }
    cr_assert_eq(net_run(n, steps, nsteps, ib, 8, ki, seed), 0, "deadlock: n %d count %zu", n, count);
    cr_assert_eq(net_run(n, steps, nsteps, db, 8, kd, seed + 1), 0, "deadlock: n %d count %zu", n, count);
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < off + count; i++) {
            int64_t want = (int64_t)(i < off ? (r + 1) * 1000003 + (int64_t)i : 0);
            if (i >= off)
                for (int j = 0; j < n; j++) want += (int64_t)(j + 1) * 1000003 + (int64_t)i;
            cr_assert_eq(((int64_t *)ib[r])[i], want, "n %d count %zu off %zu rank %d [%zu]", n, count, off, r, i);
            cr_assert(!memcmp(db[r] + i * 8, db[0] + i * 8, 8) || i < off, "rank %d [%zu] differs from rank 0", r, i);
        }
    }
    for (int r = 0; r < n; r++) {
        free(ib[r]);
        free(db[r]);
    }
}

Test(sched_net, ring_allreduce_sweep)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 8, 9, 64, 100, 1037};
    for (int n = 1; n <= MAXP; n++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (unsigned seed = 0; seed < 3; seed++) ring(n, counts[c], c % 2 ? 5 : 0, seed * 7 + (unsigned)n);
}

Test(sched_net, ring_moves_two_vectors_minus_two_blocks)
{
    static hier_step_t steps[64];
    hier_net_args_t a = {.nparts = 4, .me = 1, .esize = 8, .count = 4096, .off = 0, .tag_base = 0};
    size_t n = hier_sched_net_ring_allreduce(&a, steps), sent = 0;
    for (size_t i = 0; i < n; i++)
        if (steps[i].op == HIER_STEP_NET_SEND) sent += steps[i].len;
    cr_assert_eq(sent, 2 * 3 * 4096 * 8 / 4, "a ring participant sends 2 (N-1)/N of the vector");
}
