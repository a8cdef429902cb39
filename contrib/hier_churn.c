/* hier_churn: what communicators cost — creating them, their first call,
 * freeing them, and keeping many alive — as frameworks use them (PyTorch
 * process groups, DeepSpeed's data/tensor/pipeline groups, libraries that
 * duplicate a communicator per object).
 *
 * Cases (rows in hier_bench's format, so the same tools read them):
 *   dup          MPI_Comm_dup(world) + one MPI_Allreduce (8 bytes; --bytes) + MPI_Comm_free
 *   dup_count0   the same with a count-0 allreduce
 *   dup_only     MPI_Comm_dup + MPI_Comm_free, no collective: the MPI library's own cost
 *   split        a storm: per round, MPI_Comm_split by rank / 2 and by rank % 2
 *                (tensor- and data-parallel groups of pairs), one allreduce
 *                on each; all freed after the storm; per communicator
 *   split_use    what ScaLAPACK's BLACS does: MPI_Comm_split into the rows
 *                (rank / 2) or, every other round, the columns (rank % 2)
 *                of a grid two wide, two 8-byte allreduces on it (sum, max),
 *                MPI_Comm_free; per round
 *   live         --comms N duplicates of world kept alive, one allreduce each:
 *                resident memory (VmRSS), mapped memory (VmSize) and open
 *                file descriptors per rank, before and with them (max over ranks)
 * --bytes B makes every first allreduce B bytes (doubles) instead of 8: large
 * ones make each communicator map its pipeline buffers.
 *
 * Rows: <label> <case> <bytes> <count> <value> - - <ok|FAIL>
 *   time cases: value = µs per communicator (mean over `count`, max over ranks)
 *   live:       cases live_rss_kib, live_vm_kib, live_fds: value = the increase
 *               per rank with N live communicators (count = N); bytes = 0
 * Every allreduce result is checked. Exit status: 0, 1 on a wrong result, 2 on
 * a usage error.
 */
#include <mpi.h>
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hier_settle.h"

static int rank, np;
static const char *label = "hier_churn";
static int iters = 0; /* 0: adaptive */
static int comms = 200;
static size_t count = 1; /* doubles per first allreduce (--bytes / 8) */
static double *in, *out;
static int failed;

enum { CASE_DUP, CASE_DUP0, CASE_DUP_ONLY, CASE_SPLIT, CASE_SPLIT_USE, CASE_LIVE, CASE_COUNT };
static const char *const case_names[CASE_COUNT] = {"dup", "dup_count0", "dup_only", "split", "split_use", "live"};
static int want[CASE_COUNT] = {1, 1, 1, 1, 1, 1};

static void usage(const char *msg, const char *arg)
{
    if (rank == 0 && msg) fprintf(stderr, "hier_churn: %s%s%s (see --help)\n", msg, arg ? ": " : "", arg ? arg : "");
    if (rank == 0 && !msg)
        printf("usage: hier_churn [--cases dup,dup_count0,dup_only,split,split_use,live] [--iters N] [--comms N] "
               "[--bytes B] [--label NAME]\n"
               "  --iters N   iterations per time case (default: about 1 s, 20..2000)\n"
               "  --comms N   live communicators for the memory case (default 200)\n"
               "  --bytes B   size of each first allreduce (default 8; K, M and G suffixes)\n");
    MPI_Finalize();
    exit(msg ? 2 : 0);
}

static void parse_args(int argc, char **argv)
{
    static const struct option lo[] = {{"cases", required_argument, 0, 'c'}, {"iters", required_argument, 0, 'n'},
                                       {"comms", required_argument, 0, 'm'}, {"label", required_argument, 0, 'l'},
                                       {"bytes", required_argument, 0, 'b'}, {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "c:n:m:l:b:h", lo, NULL)) != -1) {
        switch (o) {
        case 'c': {
            char *s = strdup(optarg), *save = NULL;
            memset(want, 0, sizeof(want));
            for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int found = 0;
                for (int c = 0; c < CASE_COUNT; c++)
                    if (!strcmp(t, case_names[c])) want[c] = found = 1;
                if (!found) usage("unknown case", t);
            }
            free(s);
            break;
        }
        case 'n': iters = atoi(optarg); if (iters < 1) usage("bad --iters", optarg); break;
        case 'm': comms = atoi(optarg); if (comms < 1) usage("bad --comms", optarg); break;
        case 'l': label = optarg; break;
        case 'b': {
            char *end;
            unsigned long long b = strtoull(optarg, &end, 10);
            if (end == optarg || optarg[0] == '-') usage("bad --bytes", optarg);
            if (*end == 'K' || *end == 'M' || *end == 'G') b <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 30, end++;
            if (*end || b < 8 || b > 1ull << 30 || b % sizeof(double)) usage("bad --bytes (8 B to 1G, doubles)", optarg);
            count = (size_t)b / sizeof(double);
            break;
        }
        case 'h': usage(NULL, NULL); break;
        default: usage("unknown or incomplete option", argv[optind - 1]);
        }
    }
    if (optind < argc) usage("unexpected argument", argv[optind]);
}

/* One checked allreduce of `count` doubles, or of none. */
static void first_call(MPI_Comm comm, int any)
{
    int n, r;
    size_t k = any ? count : 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    for (size_t i = 0; i < k; i++) in[i] = r + 1 + (double)(i % 1000), out[i] = -1;
    MPI_Allreduce(in, out, (int)k, MPI_DOUBLE, MPI_SUM, comm);
    for (size_t i = 0; i < k; i++)
        if (out[i] != (double)n * (n + 1) / 2 + (double)n * (double)(i % 1000)) failed = 1;
}

/* Two checked 8-byte allreduces, a sum and a max, as BLACS's combines. */
static void two_calls(MPI_Comm comm, int round)
{
    int n, r;
    double x[2], y[2] = {-1, -1};
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    x[0] = r + 1, x[1] = r + round;
    MPI_Allreduce(&x[0], &y[0], 1, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Allreduce(&x[1], &y[1], 1, MPI_DOUBLE, MPI_MAX, comm);
    if (y[0] != (double)n * (n + 1) / 2 || y[1] != (double)(n - 1 + round)) failed = 1;
}

/* One iteration of a time case; returns the communicators it made. */
static int one(int c)
{
    static int round;
    MPI_Comm a, b;
    switch (c) {
    case CASE_SPLIT_USE:
        round++;
        MPI_Comm_split(MPI_COMM_WORLD, round % 2 ? rank / 2 : rank % 2, rank, &a);
        two_calls(a, round);
        MPI_Comm_free(&a);
        return 1;
    case CASE_SPLIT:
        MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &a);
        first_call(a, 1);
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &b);
        first_call(b, 1);
        MPI_Comm_free(&a);
        MPI_Comm_free(&b);
        return 2;
    default:
        MPI_Comm_dup(MPI_COMM_WORLD, &a);
        if (c != CASE_DUP_ONLY) first_call(a, c == CASE_DUP ? 1 : 0);
        MPI_Comm_free(&a);
        return 1;
    }
}

/* A storm of splits keeps every communicator until its end, as a framework
 * setting its groups up does; the others free each one at once. */
static double time_case(int c, int n)
{
    int made = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (c == CASE_SPLIT) {
        MPI_Comm *keep = malloc(sizeof(*keep) * 2 * (size_t)n);
        for (int i = 0; i < n; i++) {
            MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &keep[made]);
            first_call(keep[made++], 1);
            MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &keep[made]);
            first_call(keep[made++], 1);
        }
        for (int i = 0; i < made; i++) MPI_Comm_free(&keep[i]);
        free(keep);
    } else {
        for (int i = 0; i < n; i++) made += one(c);
    }
    double t = (MPI_Wtime() - t0) / made, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax * 1e6;
}

static void row(const char *name, size_t bytes, int count, double value)
{
    int bad = 0;
    MPI_Allreduce(&failed, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%-10s %-14s %6zu %6d %12.2f - - %s\n", label, name, bytes, count, value, bad ? "FAIL" : "ok");
    fflush(stdout);
}

static void run_time(int c)
{
    int n = iters;
    for (int i = 0; i < 10; i++) one(c); /* warm-up: the first ones open what lasts (endpoint, pools) */
    if (!n) { /* about a second, decided on rank 0's estimate */
        double est = time_case(c, 10) * (c == CASE_SPLIT ? 2 : 1);
        n = est > 0 ? (int)(1e6 / est) : 2000;
        n = n < 20 ? 20 : n > 2000 ? 2000 : n;
        MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    size_t bytes = c == CASE_DUP0 || c == CASE_DUP_ONLY ? 0 : c == CASE_SPLIT_USE ? 8 : count * sizeof(double);
    row(case_names[c], bytes, n, time_case(c, n));
}

/* kB of a /proc/self/status field. */
static long status_kib(const char *field)
{
    char line[256];
    long v = -1;
    size_t len = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, len) && line[len] == ':') v = strtol(line + len + 1, NULL, 10);
    fclose(f);
    return v;
}

static long open_fds(void)
{
    long n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own */
}

/* The increase per rank (max over ranks) of each measure with `comms` live
 * communicators; every one has made its first call. */
static void run_live(void)
{
    MPI_Comm *keep = malloc(sizeof(*keep) * (size_t)comms);
    long before[3], after[3], delta[3], maxd[3];
    first_call(MPI_COMM_WORLD, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    before[0] = status_kib("VmRSS"), before[1] = status_kib("VmSize"), before[2] = open_fds();
    for (int i = 0; i < comms; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &keep[i]);
        first_call(keep[i], 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    after[0] = status_kib("VmRSS"), after[1] = status_kib("VmSize"), after[2] = open_fds();
    for (int i = 0; i < 3; i++) delta[i] = after[i] - before[i];
    MPI_Allreduce(delta, maxd, 3, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    long rss_max;
    MPI_Allreduce(&after[0], &rss_max, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("# live: %d communicators, largest VmRSS %ld kB per rank with them\n", comms, rss_max);
    row("live_rss_kib", 0, comms, (double)maxd[0]);
    row("live_vm_kib", 0, comms, (double)maxd[1]);
    row("live_fds", 0, comms, (double)maxd[2]);
    row("live_total_rss", 0, comms, (double)rss_max);
    for (int i = 0; i < comms; i++) MPI_Comm_free(&keep[i]);
    free(keep);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    parse_args(argc, argv);
    in = malloc(count * sizeof(double));
    out = malloc(count * sizeof(double));
    if (!in || !out) usage("cannot allocate the buffers of --bytes", NULL);
    if (rank == 0) {
        printf("# hier_churn: np=%d; time cases: µs per communicator (create + first call + free), max over ranks\n",
               np);
        fflush(stdout);
    }
    first_call(MPI_COMM_WORLD, 1);
    long fell = hier_settle(MPI_COMM_WORLD, 30);
    if (rank == 0 && fell)
        printf("# %ld calls of 1 MiB before libfabric was open on every rank (over Open MPI's point-to-point; not timed)\n", fell);
    for (int c = 0; c < CASE_COUNT; c++) {
        if (!want[c]) continue;
        if (c == CASE_LIVE) run_live();
        else run_time(c);
    }
    int bad = 0;
    MPI_Allreduce(&failed, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && bad) printf("# FAIL: some results were wrong\n");
    free(in);
    free(out);
    MPI_Finalize();
    return bad ? 1 : 0;
}
