/* hier_sched_pattern.h: the rank arithmetic of recursive doubling and
 * halving for any number of participants, written once for every schedule
 * that exchanges at distances 1, 2, 4, ... (recursive doubling allreduce and
 * allgather, Rabenseifner) and for the channel set-up that must know whom
 * they talk to.
 *
 * With p2 the largest power of two <= n and rem = n - p2, the first 2 rem
 * participants pair up: each even one ("extra") hands its data to the odd
 * one above it, which stands in for both; the stand-ins, renumbered
 * 0..p2-1 ("virtual ranks"), run the power-of-two exchange; the extras get
 * the result back at the end. Virtual rank v < rem is participant 2v + 1 and
 * speaks for 2v and 2v + 1; v >= rem is participant v + rem, alone. */
#ifndef HIER_SCHED_PATTERN_H
#define HIER_SCHED_PATTERN_H

typedef struct {
    int n;      /* participants */
    int p2;     /* largest power of two <= n */
    int rounds; /* log2(p2) */
    int rem;    /* n - p2: extras, each folded into its odd neighbour */
} hier_rd_t;

static inline hier_rd_t hier_rd(int n)
{
    hier_rd_t rd = {.n = n, .p2 = 1, .rounds = 0};
    while (rd.p2 * 2 <= n) rd.p2 *= 2, rd.rounds++;
    rd.rem = n - rd.p2;
    return rd;
}

/* An extra hands its data to me + 1 and only gets the result back. */
static inline int hier_rd_is_extra(const hier_rd_t *rd, int me)
{
    return me < 2 * rd->rem && me % 2 == 0;
}

/* The extra that folds into me (me - 1), or -1. */
static inline int hier_rd_folded(const hier_rd_t *rd, int me)
{
    return me < 2 * rd->rem && me % 2 == 1 ? me - 1 : -1;
}

/* A stand-in's virtual rank (me not an extra). */
static inline int hier_rd_vrank(const hier_rd_t *rd, int me)
{
    return me < 2 * rd->rem ? me / 2 : me - rd->rem;
}

/* The participants virtual rank v speaks for: [lo, hi]. */
static inline int hier_rd_real_lo(const hier_rd_t *rd, int v)
{
    return v < rd->rem ? 2 * v : v + rd->rem;
}

static inline int hier_rd_real_hi(const hier_rd_t *rd, int v)
{
    return v < rd->rem ? 2 * v + 1 : v + rd->rem;
}

/* The participant that virtual rank v exchanges with at distance d (a power of two below p2). */
static inline int hier_rd_partner(const hier_rd_t *rd, int v, int d)
{
    return hier_rd_real_hi(rd, v ^ d);
}

#endif
