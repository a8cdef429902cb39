/* hier_sched_pattern.h: the rank arithmetic of recursive doubling and halving for any number of participants,
 * written once for every schedule that exchanges at distances 1, 2, 4, ... (recursive doubling allreduce and
 * allgather, Rabenseifner) and for the channel set-up that must know whom they talk to (docs/design.md,
 * "Between nodes"). With p2 the largest power of two <= n and rem = n - p2, the first 2 rem participants pair
 * up: each even one ("extra") hands its data to the odd one above it, which stands in for both; the stand-ins,
 * renumbered 0..p2-1 ("virtual ranks"), run the power-of-two exchange, and the extras get the result back at
 * the end. Virtual rank v < rem is participant 2v + 1 and speaks for 2v and 2v + 1; v >= rem is participant
 * v + rem, alone. */
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

/* Rabenseifner's pattern in mixed radix (hier_sched_net.c), for any n:
 * p <= n virtual ranks, p the largest count whose prime factors are all at
 * most radix_max (a power of two is one, so p > n / 2), the n - p extras
 * folded in as above (the fold arithmetic of hier_rd_t, with p in place of
 * p2). Virtual rank v has digits d_0 .. d_{levels-1} in the radices
 * radix[0..], the most significant first: v = sum d_i x weight[i], weight[i]
 * being the product of the radices after i. At level i the radix[i]
 * virtual ranks that differ from v in digit i only exchange with v. With
 * radix_max 2 and n a power of two it is Rabenseifner's recursive halving. */
#define HIER_RADIX_MAX_LEVELS 32

typedef struct {
    hier_rd_t fold; /* n, p (as p2), rem = n - p */
    int levels;
    int radix[HIER_RADIX_MAX_LEVELS];
    int weight[HIER_RADIX_MAX_LEVELS];
} hier_radix_t;

/* n as a product of radices of at most radix_max, largest first (factors
 * taken largest first, then packed first fit); 0 when n has a prime factor
 * above radix_max. */
static inline int hier_radix_factor(int n, int radix_max, int *radix)
{
    int factors[HIER_RADIX_MAX_LEVELS], nf = 0, levels = 0;
    for (int q = radix_max; q >= 2; q--)
        while (n % q == 0 && nf < HIER_RADIX_MAX_LEVELS) factors[nf++] = q, n /= q;
    if (n != 1) return 0;
    for (int i = 0; i < nf; i++) {
        int l = 0;
        while (l < levels && radix[l] * factors[i] > radix_max) l++;
        if (l == levels) radix[levels++] = 1;
        radix[l] *= factors[i];
    }
    return levels;
}

static inline hier_radix_t hier_radix(int n, int radix_max)
{
    hier_radix_t x = {.levels = 0};
    int p = n;
    if (radix_max > n) radix_max = n; /* (no radix can exceed n: same result, a shorter search) */
    if (radix_max < 2) radix_max = 2;
    while (p > 1 && !(x.levels = hier_radix_factor(p, radix_max, x.radix))) p--;
    x.fold = (hier_rd_t){.n = n, .p2 = p, .rounds = x.levels, .rem = n - p};
    for (int i = x.levels - 1, w = 1; i >= 0; w *= x.radix[i--]) x.weight[i] = w;
    return x;
}

#endif
