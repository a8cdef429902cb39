/* hier_bench: bandwidth/latency sweep for MPI_Allreduce, MPI_Allgather,
 * MPI_Reduce_scatter and MPI_Reduce_scatter_block, in the spirit of
 * nccl-tests and the OSU micro-benchmarks.
 *
 * Size convention (nccl-tests):
 *   allreduce             size = bytes of each rank's send (= receive) buffer
 *   allgather             size = bytes of the whole receive buffer (block = size/np)
 *   reduce_scatter[_block] size = bytes of each rank's send buffer; the result is
 *                         scattered in np blocks (uneven for reduce_scatter: the
 *                         remainder goes one element each to the first ranks)
 * Sizes are rounded down to what the collective can move; the row shows the
 * bytes actually moved and `count` = elements in that size.
 *
 * time   = mean over iterations of (max over ranks of the time of one call);
 *          every call is preceded by a barrier
 * algbw  = size / time (GB/s, 1e9); busbw = algbw * factor:
 *          allreduce 2(n-1)/n, allgather (n-1)/n, reduce_scatter (n-1)/n
 *
 * Rows:  <label> <coll> <size_bytes> <count> <time_us> <algbw> <busbw> <ok|FAIL|->
 * ('-' = not checked); every other line starts with '#'.
 * Exit status: 0, 1 if a check failed, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hier_cli.h"
#include "hier_settle.h"
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h> /* (4.1's persistent collectives: MPIX_*_init) */
#endif
#if (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5) || MPI_VERSION >= 4
#define BENCH_PINIT(name) MPI_##name##_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define BENCH_PINIT(name) MPIX_##name##_init
#endif
#include "cuda_loader.h"
#include "test_dev_backend.h"

enum { C_ALLREDUCE, C_ALLGATHER, C_RS, C_RSB, C_NCOLL };
static const char *coll_names[C_NCOLL] = {
    "allreduce", "allgather", "reduce_scatter", "reduce_scatter_block"};
enum { DT_FLOAT, DT_DOUBLE, DT_INT32 };

#define TARGET_SECONDS 0.2
#define MIN_ITERS 5
#define MAX_ITERS 1000

static struct {
    int colls[C_NCOLL];
    size_t min_bytes, max_bytes;
    size_t factor;
    int warmup; /* -1: default (5 up to 8 MiB, 2 above) */
    int iters;  /* -1: adaptive */
    int dt;
    int check;
    int memcpy_bench;
    const char *label;
    int nonblocking; /* -N: MPI_I* + MPI_Wait */
    int overlap;     /* --overlap T: with -N or -P, also the overlap with computation, T MPI_Test calls during it */
    int persistent;  /* -P: MPI_*_init once per size, then MPI_Start + MPI_Wait */
    int interleave;  /* --interleave R: blocking, nonblocking and persistent calls in R alternating rounds */
} opt = {{1, 1, 1, 1}, 8, 64u << 20, 2, -1, -1, DT_FLOAT, 1, 0, "hier_bench", 0, -1, 0, 0};

static int rank, np;
static MPI_Datatype mpi_dt;
static size_t esz;
static const char *dt_name;
static void *sbuf, *rbuf; /* what MPI gets */
static void *sview, *rview; /* what this program reads and writes: the same, or the device alias */
static int *counts, *displs;
static enum { DEV_NONE, DEV_TEST, DEV_CUDA } device; /* --device: buffers handed to MPI are device memory */

static void die_usage(const char *msg, const char *arg)
{
    if (rank == 0 && msg) {
        fprintf(stderr, "hier_bench: %s%s%s (see --help)\n", msg, arg ? ": " : "", arg ? arg : "");
    } else if (rank == 0) {
        printf(
            "usage: hier_bench [options]\n"
            "  -c, --coll LIST        allreduce,allgather,reduce_scatter,reduce_scatter_block (default all)\n"
            "  -b, --min-bytes SIZE   smallest size (default 8; K/M/G suffixes = 2^10/2^20/2^30)\n"
            "  -e, --max-bytes SIZE   largest size (default 64M)\n"
            "  -f, --factor N         size multiplication factor (default 2)\n"
            "  -w, --warmup N         warm-up calls per size (default 5, 2 above 8M)\n"
            "  -n, --iters N          timed calls per size (default adaptive: ~%.1f s, %d..%d)\n"
            "  -d, --datatype T       float|double|int32 (default float)\n"
            "      --check/--no-check verify results after timing (default check)\n"
            "      --label NAME       first column of every row (default hier_bench)\n"
            "      --memcpy           measure memcpy bandwidth first (and, across nodes, the link)\n"
            "  -N, --nonblocking      the nonblocking calls (MPI_Iallreduce, ...) then MPI_Wait: time_us is\n"
            "                         their pure communication time (HIER_BENCH_NONBLOCKING=1 in the\n"
            "                         environment too: hier-bench-compare --define sets it per configuration)\n"
            "  -P, --persistent       the persistent calls (MPI_Allreduce_init, ...; Open MPI 4.1: MPIX_) made\n"
            "                         once per size, then MPI_Start + MPI_Wait per call (HIER_BENCH_PERSISTENT=1)\n"
            "      --overlap T        with -N or -P, per size also the overlap with computation as OSU measures it:\n"
            "                         compute as long as the pure call took, MPI_Test T times spread through it,\n"
            "                         then wait; a '# overlap' line (pure, compute, overall us, overlap %%)\n"
            "      --interleave R     per size, the blocking call, the nonblocking one and (an MPI with them) the\n"
            "                         persistent one in one process: R rounds, each kind's calls a block of\n"
            "                         iters/R in every round, in turn; a kind's time is the median over the rounds\n"
            "                         of its blocks' means; rows LABEL:b, LABEL:nb, LABEL:pc. Kinds launched apart\n"
            "                         may meet different machine states (a VM's launch can run 3x slower than the\n"
            "                         next): in one process they meet the same\n"
            "      --device test|cuda send and receive buffers are device memory: hier's test backend (the CPU\n"
            "                         faults on it) or CUDA (cuMemAlloc, one GPU per rank modulo the GPUs);\n"
            "                         hier stages it, or registers it with an FI_HMEM provider\n"
            "  -h, --help\n", TARGET_SECONDS, MIN_ITERS, MAX_ITERS);
    }
    MPI_Finalize();
    exit(msg ? 2 : 0);
}

static size_t parse_size(const char *s)
{
    size_t v;
    if (hier_cli_parse_size(s, &v)) die_usage("bad size", s);
    return v;
}

static long parse_long(const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) die_usage("bad number", s);
    return v;
}

static void parse_colls(const char *arg)
{
    char *s = strdup(arg), *save = NULL;
    memset(opt.colls, 0, sizeof opt.colls);
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int c = 0; c < C_NCOLL; c++)
            if (!strcmp(t, coll_names[c])) opt.colls[c] = found = 1;
        if (!strcmp(t, "all")) {
            for (int c = 0; c < C_NCOLL; c++) opt.colls[c] = 1;
            found = 1;
        }
        if (!found) die_usage("unknown collective", t);
    }
    free(s);
}

static void parse_args(int argc, char **argv)
{
    enum { O_CHECK = 256, O_NOCHECK, O_LABEL, O_MEMCPY, O_DEVICE, O_OVERLAP, O_INTERLEAVE };
    static const struct option lo[] = {
        {"coll", required_argument, 0, 'c'}, {"min-bytes", required_argument, 0, 'b'},
        {"max-bytes", required_argument, 0, 'e'}, {"factor", required_argument, 0, 'f'},
        {"warmup", required_argument, 0, 'w'}, {"iters", required_argument, 0, 'n'},
        {"datatype", required_argument, 0, 'd'}, {"check", no_argument, 0, O_CHECK},
        {"no-check", no_argument, 0, O_NOCHECK}, {"label", required_argument, 0, O_LABEL},
        {"memcpy", no_argument, 0, O_MEMCPY}, {"device", required_argument, 0, O_DEVICE},
        {"nonblocking", no_argument, 0, 'N'}, {"overlap", required_argument, 0, O_OVERLAP},
        {"persistent", no_argument, 0, 'P'}, {"interleave", required_argument, 0, O_INTERLEAVE},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int o;
    const char *nb = getenv("HIER_BENCH_NONBLOCKING");
    const char *pc = getenv("HIER_BENCH_PERSISTENT");
    if (nb && !strcmp(nb, "1")) opt.nonblocking = 1;
    if (pc && !strcmp(pc, "1")) opt.persistent = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "c:b:e:f:w:n:d:hNP", lo, NULL)) != -1) {
        switch (o) {
        case 'c': parse_colls(optarg); break;
        case 'b': opt.min_bytes = parse_size(optarg); break;
        case 'e': opt.max_bytes = parse_size(optarg); break;
        case 'f': opt.factor = (size_t)parse_long(optarg, 2, 1 << 20); break;
        case 'w': opt.warmup = (int)parse_long(optarg, 0, 1000000); break;
        case 'n': opt.iters = (int)parse_long(optarg, 1, 1000000); break;
        case 'd':
            if (!strcmp(optarg, "float")) opt.dt = DT_FLOAT;
            else if (!strcmp(optarg, "double")) opt.dt = DT_DOUBLE;
            else if (!strcmp(optarg, "int32") || !strcmp(optarg, "int")) opt.dt = DT_INT32;
            else die_usage("unknown datatype", optarg);
            break;
        case O_CHECK: opt.check = 1; break;
        case O_NOCHECK: opt.check = 0; break;
        case O_LABEL: opt.label = optarg; break;
        case O_MEMCPY: opt.memcpy_bench = 1; break;
        case O_DEVICE:
            if (strcmp(optarg, "test") && strcmp(optarg, "cuda"))
                die_usage("unknown device backend (this build knows: test, cuda)", optarg);
            break; /* seen before MPI_Init */
        case 'h': die_usage(NULL, NULL); break;
        case 'N': opt.nonblocking = 1; break;
        case 'P': opt.persistent = 1; break;
        case O_OVERLAP: opt.overlap = (int)parse_long(optarg, 0, 1000000); break;
        case O_INTERLEAVE: opt.interleave = (int)parse_long(optarg, 1, 1000); break;
        default: die_usage("unknown or incomplete option", argv[optind - 1]);
        }
    }
    if (optind < argc) die_usage("unexpected argument", argv[optind]);
    if (opt.persistent && opt.nonblocking) die_usage("-N and -P: one or the other", NULL);
    if (opt.interleave && (opt.persistent || opt.nonblocking || opt.overlap >= 0))
        die_usage("--interleave runs every kind of call itself: not with -N, -P or --overlap", NULL);
#ifndef BENCH_PINIT
    if (opt.persistent) die_usage("this MPI has no persistent collectives (MPI 4.0, or Open MPI's MPIX_*_init)", NULL);
#endif
    if (!*opt.label || strpbrk(opt.label, " \t\n")) die_usage("label must be one word", opt.label);
    if (opt.min_bytes < 1) opt.min_bytes = 1;
    if (opt.max_bytes < opt.min_bytes) die_usage("--max-bytes is below --min-bytes", NULL);
}

static void *alloc_touched(size_t bytes)
{
    void *p = NULL;
    long pg = sysconf(_SC_PAGESIZE);
    bytes = (bytes + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    if (posix_memalign(&p, (size_t)pg, bytes ? bytes : (size_t)pg)) {
        fprintf(stderr, "hier_bench: rank %d: cannot allocate %zu bytes\n", rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    memset(p, 0, bytes);
    return p;
}

/* ------------------------------------------------------------------ memcpy */
/* Ranks not taking part wait here without spinning, so that on an
 * oversubscribed node they do not steal the core of the rank being timed. */
static void lazy_barrier(void)
{
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* Best over `reps` of (bytes copied by the ranks taking part / max time). */
static double memcpy_bw(char *dst, const char *src, size_t bytes, int inner, int reps, int solo)
{
    double best = 0, tmax = 0;
    for (int r = 0; r < reps + 1; r++) { /* first rep is a warm-up */
        double t = 0;
        if (solo) lazy_barrier();
        else MPI_Barrier(MPI_COMM_WORLD); /* tight start: all copy at once */
        if (!solo || rank == 0) {
            double t0 = MPI_Wtime();
            for (int i = 0; i < inner; i++) {
                memcpy(dst, src, bytes);
                __asm__ __volatile__("" ::"r"(dst) : "memory");
            }
            t = MPI_Wtime() - t0;
        }
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank != 0) continue;
        double bw = (double)bytes * inner * (solo ? 1 : np) / tmax / 1e9;
        if (r > 0 && bw > best) best = bw;
    }
    return best;
}

/* The link between nodes as MPI sees it: ping-pong bandwidth between rank 0
 * and the first rank on another node (hosts by MPI_Get_processor_name); also
 * how many nodes and ranks on rank 0's node, for node-level figures. */
static void run_link(void)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "", *all = calloc((size_t)np, MPI_MAX_PROCESSOR_NAME);
    int len, peer = -1, nodes = 0, local = 0;
    MPI_Get_processor_name(name, &len);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < np; r++) {
        const char *n = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
        int first = 1;
        for (int q = 0; q < r && first; q++) first = strcmp(n, all + (size_t)q * MPI_MAX_PROCESSOR_NAME) != 0;
        nodes += first;
        if (!strcmp(n, all)) local++;
        else if (peer < 0) peer = r;
    }
    if (rank == 0) printf("# nodes %d ranks_per_node %d\n", nodes, local);
    if (peer > 0 && (rank == 0 || rank == peer)) {
        const size_t bytes = 16u << 20;
        char *buf = alloc_touched(bytes);
        double best = 0;
        for (int r = 0; r < 6; r++) { /* first is a warm-up */
            double t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(buf, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
            }
            double bw = 2.0 * (double)bytes / (MPI_Wtime() - t0) / 1e9;
            if (r > 0 && bw > best) best = bw;
        }
        if (rank == 0)
            printf("# link %zu GB/s=%.2f (ping-pong rank 0 <-> rank %d on another node, MPI point-to-point, "
                   "best of 5)\n", bytes, best, peer);
        free(buf);
    }
    fflush(stdout);
    free(all);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void run_memcpy(void)
{
    static const size_t sizes[2] = {64u << 20, 1u << 20};
    char *src = alloc_touched(sizes[0]), *dst = alloc_touched(sizes[0]);
    for (int i = 0; i < 2; i++) {
        int inner = (int)((256u << 20) / sizes[i]);
        if (inner > 64) inner = 64;
        if (inner < 1) inner = 1;
        double all = memcpy_bw(dst, src, sizes[i], inner, 5, 0);
        double one = memcpy_bw(dst, src, sizes[i], inner, 5, 1);
        if (rank == 0)
            printf("# memcpy %zu 1proc=%.2f allprocs_aggregate=%.2f\n", sizes[i], one, all);
    }
    if (rank == 0)
        printf("# memcpy: GB/s (1e9) of bytes copied (memory traffic is twice that), "
               "best of 5; aggregate over %d ranks at once\n", np);
    fflush(stdout);
    free(src);
    free(dst);
}

/* ------------------------------------------------------------- collectives */
/* Input value of element i (global index) on rank r: small integers, so every
 * sum below 2^24 is exact in float. */
static long in_val(int r, size_t i) { return (long)(r + 1) * (long)(i % 7 + 1); }

static void set_elem(void *b, size_t i, long v)
{
    switch (opt.dt) {
    case DT_FLOAT: ((float *)b)[i] = (float)v; break;
    case DT_DOUBLE: ((double *)b)[i] = (double)v; break;
    default: ((int32_t *)b)[i] = (int32_t)v; break;
    }
}

static double get_elem(const void *b, size_t i)
{
    switch (opt.dt) {
    case DT_FLOAT: return ((const float *)b)[i];
    case DT_DOUBLE: return ((const double *)b)[i];
    default: return ((const int32_t *)b)[i];
    }
}

/* Sets up counts for coll at `size` bytes; returns the element count of the
 * nccl-tests size (0: skip this size). */
static size_t plan(int coll, size_t size)
{
    size_t n = size / esz, blk;
    switch (coll) {
    case C_ALLREDUCE: return n;
    case C_ALLGATHER:
        blk = n / (size_t)np;
        return blk * (size_t)np;
    case C_RSB:
        blk = n / (size_t)np;
        for (int r = 0; r < np; r++) counts[r] = (int)blk;
        return blk * (size_t)np;
    default: /* C_RS: uneven, remainder one each to the first ranks */
        if (n < (size_t)np) return 0;
        for (int r = 0, d = 0; r < np; r++) {
            counts[r] = (int)(n / (size_t)np + ((size_t)r < n % (size_t)np));
            displs[r] = d;
            d += counts[r];
        }
        return n;
    }
}

#ifdef BENCH_PINIT
/* -P: the persistent request of the size being measured, made at its first call. */
static MPI_Request preq = MPI_REQUEST_NULL;
static int preq_coll = -1;
static size_t preq_n;

static void persistent_make(int coll, size_t n)
{
    int blk = (int)(n / (size_t)np);
    if (preq != MPI_REQUEST_NULL) MPI_Request_free(&preq);
    switch (coll) {
    case C_ALLREDUCE:
        BENCH_PINIT(Allreduce)(sbuf, rbuf, (int)n, mpi_dt, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &preq);
        break;
    case C_ALLGATHER:
        BENCH_PINIT(Allgather)(sbuf, blk, mpi_dt, rbuf, blk, mpi_dt, MPI_COMM_WORLD, MPI_INFO_NULL, &preq);
        break;
    case C_RSB:
        BENCH_PINIT(Reduce_scatter_block)(sbuf, rbuf, blk, mpi_dt, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &preq);
        break;
    default:
        BENCH_PINIT(Reduce_scatter)(sbuf, rbuf, counts, mpi_dt, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &preq);
        break;
    }
    preq_coll = coll;
    preq_n = n;
}
#endif

/* The nonblocking call, started (-P: the persistent one). */
static void call_start(int coll, size_t n, MPI_Request *req)
{
    int blk = (int)(n / (size_t)np);
#ifdef BENCH_PINIT
    if (opt.persistent) {
        if (preq_coll != coll || preq_n != n) persistent_make(coll, n);
        MPI_Start(&preq);
        *req = preq;
        return;
    }
#endif
    switch (coll) {
    case C_ALLREDUCE: MPI_Iallreduce(sbuf, rbuf, (int)n, mpi_dt, MPI_SUM, MPI_COMM_WORLD, req); break;
    case C_ALLGATHER: MPI_Iallgather(sbuf, blk, mpi_dt, rbuf, blk, mpi_dt, MPI_COMM_WORLD, req); break;
    case C_RSB: MPI_Ireduce_scatter_block(sbuf, rbuf, blk, mpi_dt, MPI_SUM, MPI_COMM_WORLD, req); break;
    default: MPI_Ireduce_scatter(sbuf, rbuf, counts, mpi_dt, MPI_SUM, MPI_COMM_WORLD, req); break;
    }
}

static void call(int coll, size_t n)
{
    int blk = (int)(n / (size_t)np);
    if (opt.nonblocking || opt.persistent) {
        MPI_Request req;
        call_start(coll, n, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    switch (coll) {
    case C_ALLREDUCE: MPI_Allreduce(sbuf, rbuf, (int)n, mpi_dt, MPI_SUM, MPI_COMM_WORLD); break;
    case C_ALLGATHER: MPI_Allgather(sbuf, blk, mpi_dt, rbuf, blk, mpi_dt, MPI_COMM_WORLD); break;
    case C_RSB: MPI_Reduce_scatter_block(sbuf, rbuf, blk, mpi_dt, MPI_SUM, MPI_COMM_WORLD); break;
    default: MPI_Reduce_scatter(sbuf, rbuf, counts, mpi_dt, MPI_SUM, MPI_COMM_WORLD); break;
    }
}

/* Fresh call on known inputs; returns the number of wrong elements here. */
static long check(int coll, size_t n)
{
    size_t sn = coll == C_ALLGATHER ? n / (size_t)np : n, rn, off = 0;
    size_t sum_r = (size_t)np * (size_t)(np + 1) / 2;
    if (coll == C_ALLGATHER) off = (size_t)rank * sn;
    for (size_t i = 0; i < sn; i++) set_elem(sview, i, in_val(rank, off + i));
    rn = coll == C_ALLREDUCE || coll == C_ALLGATHER ? n : (size_t)counts[rank];
    off = coll == C_RS ? (size_t)displs[rank] : coll == C_RSB ? (size_t)rank * rn : 0;
    for (size_t i = 0; i < rn; i++) set_elem(rview, i, -12345);
    if (device == DEV_CUDA && (cul_htod((cul_ptr_t)sbuf, sview, sn * esz) || cul_htod((cul_ptr_t)rbuf, rview, rn * esz)))
        return 1;
    call(coll, n);
    if (device == DEV_CUDA && (cul_dtoh(rview, (cul_ptr_t)rbuf, rn * esz) || cul_dtoh(sview, (cul_ptr_t)sbuf, sn * esz)))
        return 1;
    long bad = 0;
    for (size_t i = 0; i < rn; i++) {
        size_t g = off + i;
        double want = coll == C_ALLGATHER ? (double)in_val((int)(g / sn), g)
                                          : (double)((g % 7 + 1) * sum_r);
        double got = get_elem(rview, i);
        if (got != want && bad++ < 5)
            fprintf(stderr, "hier_bench: FAIL %s n=%zu rank %d: recv[%zu] = %g, expected %g\n",
                    coll_names[coll], n, rank, i, got, want);
    }
    /* the send buffer is input only */
    for (size_t i = 0; i < sn; i++) {
        size_t g = coll == C_ALLGATHER ? (size_t)rank * sn + i : i;
        if (get_elem(sview, i) != (double)in_val(rank, g) && bad++ < 5)
            fprintf(stderr, "hier_bench: FAIL %s n=%zu rank %d: send buffer modified at %zu\n",
                    coll_names[coll], n, rank, i);
    }
    return bad;
}

/* (rank 0's: the max over ranks per call, summed) */
static double sum_pure(const double *tm, int iters)
{
    double sum = 0;
    for (int i = 0; rank == 0 && i < iters; i++) sum += tm[i];
    return sum / iters;
}

/* Busy work for `secs`, with `tests` MPI_Test calls spread through it. */
static void compute(double secs, int tests, MPI_Request *req)
{
    double t0 = MPI_Wtime(), slice = secs / (tests + 1);
    for (int k = 0; k <= tests; k++) {
        while (MPI_Wtime() - t0 < slice * (k + 1)) {
        }
        int flag;
        if (k < tests && *req != MPI_REQUEST_NULL) MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    }
}

/* OSU's overlap: calls started, computation as long as the pure call took
 * (rank 0's figure, told to all), then waited; overlap = 1 - (overall -
 * compute) / pure, of the max over ranks. */
static void overlap(int coll, size_t n, int iters, double pure)
{
    MPI_Bcast(&pure, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double total = 0, comp = 0;
    for (int i = 0; i < iters; i++) {
        MPI_Request req;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        call_start(coll, n, &req);
        double c0 = MPI_Wtime();
        compute(pure, opt.overlap, &req);
        comp += MPI_Wtime() - c0;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        total += MPI_Wtime() - t0;
    }
    double mine[2] = {total / iters, comp / iters}, most[2];
    MPI_Reduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double ov = 100.0 * (1.0 - (most[0] - most[1]) / pure);
        printf("# overlap %-*s %-20s %12zu pure_us %.2f compute_us %.2f overall_us %.2f overlap_pct %.1f\n", 1,
               opt.label, coll_names[coll], n * esz, pure * 1e6, most[1] * 1e6, most[0] * 1e6,
               ov < 0 ? 0 : ov > 100 ? 100 : ov);
        fflush(stdout);
    }
}

static double busbw_factor(int coll)
{
    if (np <= 1) return 0;
    return coll == C_ALLREDUCE ? 2.0 * (np - 1) / np : (double)(np - 1) / np;
}

/* `count` calls, a barrier before each, timed alone: tm[i] the slowest
 * rank's time of call i (rank 0; MPI_Reduce is not overridden by the
 * component under test). */
static void time_calls(int coll, size_t n, int count, double *ti, double *tm)
{
    for (int i = 0; i < count; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        call(coll, n);
        ti[i] = MPI_Wtime() - t0;
    }
    MPI_Reduce(ti, tm, count, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
}

/* One row: the mean time of a size's calls (rank 0). */
static void print_row(int lw, const char *label, int coll, size_t n, double tavg, long anybad)
{
    double algbw = (double)(n * esz) / tavg / 1e9;
    printf("%-*s %-20s %12zu %11zu %12.2f %10.3f %10.3f %5s\n", lw, label, coll_names[coll], n * esz, n, tavg * 1e6,
           algbw, algbw * busbw_factor(coll), !opt.check ? "-" : anybad ? "FAIL" : "ok");
    fflush(stdout);
}

/* --interleave: the kinds of call a size is measured as, in one process. */
enum { K_BLOCKING, K_NONBLOCKING, K_PERSISTENT, K_N };
static const char *const kind_tags[K_N] = {"b", "nb", "pc"};

static void kind_set(int k)
{
    opt.nonblocking = k == K_NONBLOCKING;
    opt.persistent = k == K_PERSISTENT;
}

static int kinds(void)
{
#ifdef BENCH_PINIT
    return K_N;
#else
    return K_PERSISTENT; /* (this MPI has no persistent collectives) */
#endif
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --interleave R: R rounds, each with a block of ceil(iters / R) calls of
 * every kind, the kinds in turn (round r begins with kind r mod kinds); a
 * block's time is the mean over its calls of the slowest rank's, a kind's
 * the median over the rounds of its blocks'. One call of each kind first,
 * untimed (the persistent request is made there). Then each kind's result
 * checked, and its row printed. Returns 1 if a check failed. */
static int bench_interleaved(int coll, size_t n, int iters, int lw)
{
    int nk = kinds(), rounds = opt.interleave, per = (iters + rounds - 1) / rounds, failed = 0;
    double *ti = malloc(sizeof(double) * (size_t)per), *tm = malloc(sizeof(double) * (size_t)per);
    double *blk = malloc(sizeof(double) * (size_t)(rounds * nk));
    for (int k = 0; k < nk; k++) {
        kind_set(k);
        call(coll, n);
    }
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < nk; j++) {
            int k = (r + j) % nk;
            kind_set(k);
            time_calls(coll, n, per, ti, tm);
            double sum = 0;
            for (int i = 0; i < per; i++) sum += tm[i];
            blk[k * rounds + r] = sum / per;
        }
    for (int k = 0; k < nk; k++) {
        kind_set(k);
        long bad = opt.check ? check(coll, n) : 0, anybad = 0;
        MPI_Reduce(&bad, &anybad, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank != 0) continue;
        char label[256];
        snprintf(label, sizeof label, "%s:%s", opt.label, kind_tags[k]);
        qsort(blk + k * rounds, (size_t)rounds, sizeof(double), cmp_double);
        print_row(lw, label, coll, n, blk[k * rounds + rounds / 2], anybad);
        failed |= anybad != 0;
    }
    kind_set(K_BLOCKING);
    free(ti);
    free(tm);
    free(blk);
    return failed;
}

/* Returns 1 if a check failed (on any rank). */
static int bench_coll(int coll, int lw)
{
    int failed = 0;
    if (rank == 0) {
        printf("#\n# %s: np=%d datatype=%s%s warmup=%s iters=%s check=%s%s\n", coll_names[coll],
               np, dt_name, coll == C_ALLGATHER ? "" : " op=sum", opt.warmup < 0 ? "auto" : "fixed",
               opt.iters < 0 ? "adaptive" : "fixed", opt.check ? "on" : "off",
               opt.nonblocking  ? " nonblocking (MPI_I* + MPI_Wait)"
               : opt.persistent ? " persistent (MPI_*_init once, MPI_Start + MPI_Wait)"
               : opt.interleave ? " interleaved (b: blocking, nb: MPI_I* + MPI_Wait, pc: MPI_Start + MPI_Wait)"
                                : "");
        printf("# %-*s %-20s %12s %11s %12s %10s %10s %5s\n", lw - 2, "label", "coll",
               "size_bytes", "count", "time_us", "algbw_GB/s", "busbw_GB/s", "check");
        fflush(stdout);
    }
    /* One-time costs (a component setting up its shared memory at the first
     * call) belong to no size: pay them before the first size plans its
     * iteration count from its warm-up. */
    for (size_t size = opt.min_bytes; size <= opt.max_bytes; size *= opt.factor) {
        size_t n = plan(coll, size);
        if (n == 0) continue;
        for (int i = 0; i < 20; i++) call(coll, n);
        break;
    }
    for (size_t size = opt.min_bytes; size <= opt.max_bytes; size *= opt.factor) {
        size_t n = plan(coll, size);
        if (n == 0) goto next; /* less than one element per block */
        int warm = opt.warmup >= 0 ? opt.warmup : size <= (8u << 20) ? 5 : 2;
        double est = 0;
        for (int i = 0; i < (warm > 0 ? warm : 1); i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            call(coll, n);
            est += MPI_Wtime() - t0;
        }
        est /= warm > 0 ? warm : 1;
        int iters = opt.iters;
        if (iters < 0) { /* agreed plan: the most any rank asks for */
            double want = est > 0 ? TARGET_SECONDS / est : MAX_ITERS;
            int mine = want > MAX_ITERS ? MAX_ITERS : want < MIN_ITERS ? MIN_ITERS : (int)want;
            MPI_Allreduce(&mine, &iters, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        }
        if (opt.interleave) {
            failed |= bench_interleaved(coll, n, iters, lw);
            goto next;
        }
        double *ti = malloc(sizeof(double) * (size_t)iters);
        double *tm = malloc(sizeof(double) * (size_t)iters);
        time_calls(coll, n, iters, ti, tm);
        long bad = 0, anybad = 0;
        if (opt.check) bad = check(coll, n);
        MPI_Reduce(&bad, &anybad, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double sum = 0;
            for (int i = 0; i < iters; i++) sum += tm[i];
            print_row(lw, opt.label, coll, n, sum / iters, anybad);
            failed |= anybad != 0;
        }
        if ((opt.nonblocking || opt.persistent) && opt.overlap >= 0) overlap(coll, n, iters, sum_pure(tm, iters));
        free(ti);
        free(tm);
    next:
        if (size > opt.max_bytes / opt.factor) break;
    }
    return failed;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "test"))
            device = DEV_TEST;
        else if (!strcmp(argv[i], "--device") && !strcmp(argv[i + 1], "cuda"))
            device = DEV_CUDA;
    MPI_Init(&argc, &argv);
    /* our "device memory", staged by hier through host memory (with tuned
     * or han, the CPU faults on it: compare those with --device cuda) */
    if (device == DEV_TEST && tdev_register_with_component() != 0) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    parse_args(argc, argv);
    switch (opt.dt) {
    case DT_FLOAT: mpi_dt = MPI_FLOAT; esz = 4; dt_name = "float"; break;
    case DT_DOUBLE: mpi_dt = MPI_DOUBLE; esz = 8; dt_name = "double"; break;
    default: mpi_dt = MPI_INT32_T; esz = 4; dt_name = "int32"; break;
    }
    if (opt.max_bytes / esz > INT_MAX) die_usage("--max-bytes: element count exceeds INT_MAX", NULL);
    if (opt.check && (double)np * (np + 1) / 2 * 7 >= 16777216.0)
        die_usage("too many ranks for exact float sums; use --no-check or -d double", NULL);

    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING], host[256] = "?";
        int len;
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, ",\n")] = 0;
        gethostname(host, sizeof host - 1);
        printf("# hier_bench: np=%d host=%s mpi=\"%s\"\n", np, host, ver);
        printf("# sizes %zu..%zu x%zu, datatype=%s, time = mean over iterations of max over ranks"
               " (barrier before each call), GB/s = 1e9 B/s\n",
               opt.min_bytes, opt.max_bytes, opt.factor, dt_name);
        fflush(stdout);
    }
    long fell = hier_settle(MPI_COMM_WORLD, 30); /* (libfabric opening: the job's once-only cost, untimed) */
    if (rank == 0 && fell)
        printf("# %ld calls of 1 MiB before libfabric was open on every rank (over Open MPI's point-to-point; not timed)\n", fell);
    if (opt.memcpy_bench) {
        run_memcpy();
        run_link();
    }

    if (device == DEV_TEST) {
        sbuf = tdev_alloc(opt.max_bytes);
        rbuf = tdev_alloc(opt.max_bytes);
        sview = tdev_alias(sbuf);
        rview = tdev_alias(rbuf);
        if (rank == 0) printf("# device buffers: hier's test backend\n");
    } else if (device == DEV_CUDA) {
        const char *why = cul_open(rank);
        if (!why && (!(sbuf = (void *)cul_alloc(opt.max_bytes)) || !(rbuf = (void *)cul_alloc(opt.max_bytes))))
            why = "cuMemAlloc failed";
        if (why) {
            fprintf(stderr, "hier_bench: --device cuda on rank %d: %s\n", rank, why);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        sview = alloc_touched(opt.max_bytes); /* host copies of the inputs and results, for the checks */
        rview = alloc_touched(opt.max_bytes);
        if (rank == 0) printf("# device buffers: CUDA (cuMemAlloc)\n");
    } else {
        sbuf = sview = alloc_touched(opt.max_bytes);
        rbuf = rview = alloc_touched(opt.max_bytes);
    }
    counts = calloc((size_t)np, sizeof(int));
    displs = calloc((size_t)np, sizeof(int));
    int lw = (int)strlen(opt.label) + (opt.interleave ? 3 : 0);
    if (lw < 7) lw = 7;
    int failed = 0;
    for (int c = 0; c < C_NCOLL; c++)
        if (opt.colls[c]) failed |= bench_coll(c, lw);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0 && failed) printf("# FAIL: some results were wrong\n");
#ifdef BENCH_PINIT
    if (preq != MPI_REQUEST_NULL) MPI_Request_free(&preq);
#endif
    if (device == DEV_TEST) {
        tdev_free(sbuf);
        tdev_free(rbuf);
    } else if (device == DEV_CUDA) {
        cul_free((cul_ptr_t)sbuf);
        cul_free((cul_ptr_t)rbuf);
        free(sview);
        free(rview);
    } else {
        free(sbuf);
        free(rbuf);
    }
    free(counts);
    free(displs);
    MPI_Finalize();
    return failed ? 1 : 0;
}
