/* Schedules swept over ranks x counts x chunk sizes x in-place with the
 * in-memory simulator: every rank's result is compared with a reference
 * folded independently here, and all ranks must agree bit for bit. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "exec/hier_exec.h"
#include "base/hier_part.h"
#include "base/hier_topo.h"
#include "exec/hier_reduce.h"
#include "sim_exec.h"

#define MAXR 16

typedef struct {
    uint8_t *s[MAXR], *r[MAXR];
} bufs_t;

static uint32_t order[MAXR];
static hier_topo_groups_t groups;

static hier_sched_groups_t sched_groups(void)
{
    return (hier_sched_groups_t){.ngroups = groups.ngroups, .group_of = groups.group_of, .leader = groups.leader,
                                 .first = groups.first, .members = groups.members};
}

/* Ranks grouped into NUMA domains of `per` consecutive ranks. */
static void make_groups(int n, int per)
{
    hier_locality_t locs[MAXR];
    for (int r = 0; r < n; r++) {
        order[r] = (uint32_t)r;
        locs[r] = (hier_locality_t){.numa = (r / per) % 3 == 1 ? 7 : r / per};
    }
    hier_topo_groups_free(&groups);
    cr_assert_eq(hier_topo_groups_by_numa(locs, n, &groups), HIER_OK);
}

static double input(int rank, size_t i)
{
    /* not exactly representable sums: fold order shows in the bits */
    return 1.0 / (double)(rank + 3) + (double)(i % 13) * 0.1;
}

static void fill(bufs_t *b, int n, size_t in_elems, size_t out_elems, int in_place)
{
    for (int r = 0; r < n; r++) {
        size_t cap = in_elems > out_elems ? in_elems : out_elems;
        b->s[r] = malloc(cap * sizeof(double) + 8);
        b->r[r] = malloc(cap * sizeof(double) + 8);
        double *src = (double *)(in_place ? b->r[r] : b->s[r]);
        memset(b->r[r], 0xEE, cap * sizeof(double));
        for (size_t i = 0; i < in_elems; i++) src[i] = input(r, i);
    }
}

static void release(bufs_t *b, int n)
{
    for (int r = 0; r < n; r++) {
        free(b->s[r]);
        free(b->r[r]);
    }
}

/* Left fold over ranks in `ord` of element i (the fold order the schedules promise). */
static double fold(const int *ord, int k, size_t i)
{
    double acc = input(ord[0], i);
    for (int j = 1; j < k; j++) acc += input(ord[j], i);
    return acc;
}

static double expect_allreduce(hier_sched_kind_t kind, int n, size_t i)
{
    int ord[MAXR];
    if (kind != HIER_SCHED_ALLREDUCE_NUMA) { /* flat, rsag and single copy fold in rank order */
        for (int r = 0; r < n; r++) ord[r] = r;
        return fold(ord, n, i);
    }
    double acc = 0; /* leaders' partials, folded in group order */
    for (int g = 0; g < groups.ngroups; g++) {
        int k = 0;
        for (uint32_t m = groups.first[g]; m < groups.first[g + 1]; m++) ord[k++] = (int)groups.members[m];
        double part = fold(ord, k, i);
        acc = g ? acc + part : part;
    }
    return acc;
}

static void run_allreduce(hier_sched_kind_t kind, int n, size_t count, size_t chunk, int in_place, unsigned seed)
{
    sim_t sim;
    bufs_t b;
    hier_reduce_kernel_t k;
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &k), HIER_OK);
    make_groups(n, 2);
    cr_assert_eq(sim_open(&sim, n, chunk), 0);
    fill(&b, n, count, count, in_place);
    hier_sched_args_t a = {.kind = kind, .nranks = n, .esize = sizeof(double), .count = count,
                           .in_place = in_place, .chunk_bytes = chunk, .order = order,
                           .groups = sched_groups()};
    /* twice: the second call starts on the other buffer */
    for (int call = 0; call < 2; call++) {
        cr_assert_eq(sim_run(&sim, &a, b.s, b.r, k, seed + (unsigned)call), 0);
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++) {
                double got = ((double *)b.r[r])[i], want = expect_allreduce(kind, n, i);
                cr_assert(!memcmp(&got, &want, sizeof(got)),
                          "kind %d n %d count %zu chunk %zu inplace %d call %d rank %d [%zu]: %.17g != %.17g",
                          kind, n, count, chunk, in_place, call, r, i, got, want);
            }
        if (in_place) /* restore the inputs the call overwrote */
            for (int r = 0; r < n; r++)
                for (size_t i = 0; i < count; i++) ((double *)b.r[r])[i] = input(r, i);
    }
    release(&b, n);
    sim_close(&sim);
}

static const size_t counts[] = {0, 1, 3, 7, 8, 13, 64, 257, 1031};
static const size_t chunks[] = {64, 192, 1024, 8192};

Test(sched, allreduce_flat_rsag_numa_sweep)
{
    hier_sched_kind_t kinds[] = {HIER_SCHED_ALLREDUCE_FLAT, HIER_SCHED_ALLREDUCE_RSAG, HIER_SCHED_ALLREDUCE_NUMA};
    for (int ki = 0; ki < 3; ki++)
        for (int n = 1; n <= 9; n++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                for (size_t hi = 0; hi < sizeof(chunks) / sizeof(chunks[0]); hi++)
                    for (int ip = 0; ip < 2; ip++)
                        run_allreduce(kinds[ki], n, counts[ci], chunks[hi], ip, (unsigned)(n * 31 + ci));
}

Test(sched, allreduce_sixteen_ranks)
{
    run_allreduce(HIER_SCHED_ALLREDUCE_RSAG, 16, 5000, 1024, 0, 7);
    run_allreduce(HIER_SCHED_ALLREDUCE_NUMA, 16, 700, 512, 1, 8);
}

static void run_allgather_kind(hier_sched_kind_t kind, int n, size_t block, size_t chunk, int in_place, int break_buf,
                               int *bad_p)
{
    sim_t sim;
    bufs_t b;
    cr_assert_eq(sim_open(&sim, n, chunk), 0);
    sim.break_buf = break_buf;
    for (int r = 0; r < n; r++) {
        b.s[r] = malloc(block + 1);
        b.r[r] = malloc((size_t)n * block + 1);
        memset(b.r[r], 0xEE, (size_t)n * block);
        uint8_t *src = in_place ? b.r[r] + (size_t)r * block : b.s[r];
        for (size_t i = 0; i < block; i++) src[i] = (uint8_t)(r * 37 + i * 11 + 1);
    }
    hier_sched_args_t a = {.kind = kind, .nranks = n, .esize = 1, .count = block,
                           .in_place = in_place, .chunk_bytes = chunk, .order = order};
    cr_assert_eq(sim_run(&sim, &a, b.s, b.r, (hier_reduce_kernel_t){0}, (unsigned)(n + block)), 0);
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < block; i++) {
                uint8_t want = (uint8_t)(j * 37 + i * 11 + 1), got = b.r[r][(size_t)j * block + i];
                if (got != want) {
                    if (bad_p) {
                        *bad_p = 1;
                        goto out;
                    }
                    cr_assert_fail("allgather n %d block %zu chunk %zu inplace %d: rank %d block %d [%zu] %u != %u",
                                   n, block, chunk, in_place, r, j, i, got, want);
                }
            }
out:
    for (int r = 0; r < n; r++) {
        free(b.s[r]);
        free(b.r[r]);
    }
    sim_close(&sim);
}

static void run_allgather(int n, size_t block, size_t chunk, int in_place, int break_buf, int *bad_p)
{
    run_allgather_kind(HIER_SCHED_ALLGATHER, n, block, chunk, in_place, break_buf, bad_p);
    if (!break_buf) run_allgather_kind(HIER_SCHED_CMA_ALLGATHER, n, block, chunk, in_place, 0, bad_p);
}

Test(sched, allgather_sweep)
{
    static const size_t blocks[] = {0, 1, 5, 64, 100, 1000, 4097};
    for (int n = 1; n <= 9; n++)
        for (size_t bi = 0; bi < sizeof(blocks) / sizeof(blocks[0]); bi++)
            for (size_t hi = 0; hi < sizeof(chunks) / sizeof(chunks[0]); hi++)
                for (int ip = 0; ip < 2; ip++) run_allgather(n, blocks[bi], chunks[hi], ip, 0, NULL);
}

/* The simulator must be able to see a pipeline race: with the pipeline
 * buffers' alternation switched off, some interleaving corrupts a multi-chunk call. */
Test(sched, simulator_detects_buffer_race)
{
    int bad = 0;
    for (unsigned seed = 0; seed < 40 && !bad; seed++) run_allgather(4, 4096, 64, 0, 1, &bad);
    cr_assert(bad, "a broken pipeline went unnoticed: the simulator proves nothing");
}

static void run_reduce_scatter_kind(hier_sched_kind_t kind, int n, const size_t *rcounts, size_t chunk,
                                    int in_place)
{
    sim_t sim;
    bufs_t b;
    hier_reduce_kernel_t k;
    size_t displs[MAXR], total = 0;
    int ord[MAXR];
    for (int r = 0; r < n; r++) {
        displs[r] = total;
        total += rcounts[r];
        order[r] = (uint32_t)r;
        ord[r] = r;
    }
    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_DOUBLE, HIER_OP_SUM, &k), HIER_OK);
    cr_assert_eq(sim_open(&sim, n, chunk), 0);
    fill(&b, n, total, total, in_place);
    hier_sched_args_t a = {.kind = kind, .nranks = n, .esize = sizeof(double),
                           .count = total, .rcounts = rcounts, .rdispls = displs, .in_place = in_place,
                           .chunk_bytes = chunk, .order = order};
    cr_assert_eq(sim_run(&sim, &a, b.s, b.r, k, (unsigned)(total + n)), 0);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < rcounts[r]; i++) {
            double got = ((double *)b.r[r])[i], want = fold(ord, n, displs[r] + i);
            cr_assert(!memcmp(&got, &want, sizeof(got)), "rs n %d chunk %zu inplace %d rank %d [%zu]: %.17g != %.17g",
                      n, chunk, in_place, r, i, got, want);
        }
    release(&b, n);
    sim_close(&sim);
}

static void run_reduce_scatter(int n, const size_t *rcounts, size_t chunk, int in_place)
{
    run_reduce_scatter_kind(HIER_SCHED_REDUCE_SCATTER, n, rcounts, chunk, in_place);
}

Test(sched, reduce_scatter_uneven_and_zero_counts)
{
    size_t rc[MAXR];
    for (int n = 1; n <= 9; n++)
        for (int pattern = 0; pattern < 5; pattern++) {
            for (int r = 0; r < n; r++) {
                switch (pattern) {
                case 0: rc[r] = 0; break;                          /* nothing at all */
                case 1: rc[r] = 1; break;
                case 2: rc[r] = (size_t)(r * 7 % 5); break;       /* uneven with zeros */
                case 3: rc[r] = r == n - 1 ? 300 : 0; break;       /* one rank takes all */
                default: rc[r] = 37 + (size_t)r * 13; break;      /* several chunks */
                }
            }
            for (size_t hi = 0; hi < sizeof(chunks) / sizeof(chunks[0]); hi++)
                for (int ip = 0; ip < 2; ip++) /* a chunk holds one piece per rank */
                    run_reduce_scatter(n, rc, chunks[hi] < (size_t)n * 8 ? (size_t)n * 8 : chunks[hi], ip);
        }
}


/* ---- calls back to back: a fast rank's next call overlaps a slow rank's
 * previous one (shared-memory schedules end without a barrier) ---------- */

typedef struct {
    hier_sched_kind_t kind;
    int in_place;
    size_t count;
} seq_call_t;

static int64_t seq_input(int call, int rank, size_t i)
{
    return (int64_t)(rank + 1) * 1000003 + call * 7919 + (int64_t)i;
}

/* Runs the sequence; returns how many result elements were wrong. */
static long run_sequence(int n, size_t chunk, int break_buf, unsigned seed)
{
    static const seq_call_t seq[] = {
        {HIER_SCHED_ALLREDUCE_RSAG, 0, 300}, {HIER_SCHED_ALLGATHER, 0, 40},     {HIER_SCHED_ALLREDUCE_FLAT, 0, 50},
        {HIER_SCHED_REDUCE_SCATTER, 0, 90},  {HIER_SCHED_ALLREDUCE_NUMA, 1, 70}, {HIER_SCHED_ALLREDUCE_RSAG, 1, 200},
        {HIER_SCHED_REDUCE_SCATTER, 1, 60},  {HIER_SCHED_ALLREDUCE_RSAG, 1, 0},  {HIER_SCHED_ALLREDUCE_RSAG, 1, 257},
        {HIER_SCHED_CMA_ALLGATHER, 1, 33},   {HIER_SCHED_REDUCE_SCATTER, 0, 45}, {HIER_SCHED_ALLREDUCE_FLAT, 1, 90},
        {HIER_SCHED_ALLGATHER, 1, 64},       {HIER_SCHED_ALLREDUCE_RSAG, 0, 129},
    };
    enum { NC = sizeof(seq) / sizeof(seq[0]) };
    static size_t rcounts[NC][MAXR], displs[NC][MAXR];
    static hier_sched_args_t args[NC];
    static uint8_t *sb[NC][MAXR], *rb[NC][MAXR];
    sim_call_t calls[NC];
    sim_t sim;
    hier_reduce_kernel_t k;
    long bad = 0;

    cr_assert_eq(hier_reduce_kernel_get(HIER_DT_INT64, HIER_OP_SUM, &k), HIER_OK);
    make_groups(n, 2);
    cr_assert_eq(sim_open(&sim, n, chunk), 0);
    sim.break_buf = break_buf;
    for (int c = 0; c < NC; c++) {
        const seq_call_t *q = &seq[c];
        int gather = q->kind == HIER_SCHED_ALLGATHER || q->kind == HIER_SCHED_CMA_ALLGATHER;
        int rs = q->kind == HIER_SCHED_REDUCE_SCATTER;
        size_t total = 0;
        for (int r = 0; r < n; r++) {
            rcounts[c][r] = q->count / (size_t)n + (size_t)(r % 3);
            displs[c][r] = total;
            total += rcounts[c][r];
        }
        size_t in = rs ? total : q->count, out = gather ? q->count * (size_t)n : rs ? total : q->count;
        args[c] = (hier_sched_args_t){.kind = q->kind, .nranks = n, .esize = sizeof(int64_t),
                                      .count = rs ? total : q->count, .rcounts = rcounts[c], .rdispls = displs[c],
                                      .in_place = q->in_place, .chunk_bytes = chunk, .order = order,
                                      .groups = sched_groups()};
        for (int r = 0; r < n; r++) {
            sb[c][r] = calloc(in + 1, sizeof(int64_t));
            rb[c][r] = calloc(out + 1, sizeof(int64_t));
            int64_t *src = q->in_place ? (int64_t *)rb[c][r] + (gather ? (size_t)r * q->count : 0) : (int64_t *)sb[c][r];
            for (size_t i = 0; i < in; i++) src[i] = seq_input(c, r, i);
        }
        calls[c] = (sim_call_t){.args = &args[c], .sbufs = sb[c], .rbufs = rb[c], .kernel = k};
    }
    cr_assert_eq(sim_run_calls(&sim, calls, NC, seed), 0);
    for (int c = 0; c < NC; c++) {
        const seq_call_t *q = &seq[c];
        int gather = q->kind == HIER_SCHED_ALLGATHER || q->kind == HIER_SCHED_CMA_ALLGATHER;
        int rs = q->kind == HIER_SCHED_REDUCE_SCATTER;
        for (int r = 0; r < n; r++) {
            const int64_t *got = (const int64_t *)rb[c][r];
            size_t m = gather ? q->count * (size_t)n : rs ? rcounts[c][r] : q->count;
            for (size_t i = 0; i < m; i++) {
                int64_t want = 0;
                if (gather)
                    want = seq_input(c, (int)(i / q->count), i % q->count);
                else
                    for (int j = 0; j < n; j++) want += seq_input(c, j, (rs ? displs[c][r] : 0) + i);
                bad += got[i] != want;
            }
            free(sb[c][r]);
            free(rb[c][r]);
        }
    }
    sim_close(&sim);
    return bad;
}

Test(sched, mixed_calls_back_to_back)
{
    for (int n = 2; n <= 5; n++)
        for (unsigned seed = 0; seed < 6; seed++) {
            long bad = run_sequence(n, n * 64 > 256 ? (size_t)n * 64 : 256, 0, seed * 13 + (unsigned)n);
            cr_assert_eq(bad, 0, "n %d seed %u: %ld wrong elements", n, seed, bad);
        }
}

Test(sched, mixed_calls_detect_a_broken_pipeline)
{
    long bad = 0;
    for (unsigned seed = 0; seed < 30 && !bad; seed++) bad = run_sequence(3, 256, 1, seed);
    cr_assert_gt(bad, 0, "reusing one buffer for every chunk went unnoticed");
}
