/* test_churn: communicators that come and go, as ScaLAPACK's BLACS makes
 * them: rounds of MPI_Comm_split into the rows (rank / 2) or, every other
 * round, the columns (rank % 2) of a grid two wide, two checked 8-byte
 * allreduces on it (a sum, a max), MPI_Comm_free. After the rounds nothing
 * may be left behind: no more open descriptors, shared-memory files of
 * coll/hier or resident memory (beyond a small allowance for the MPI
 * library's own tables) than after the first rounds; every call must have
 * been served by hier. And hier's set-up of a communicator creates none of
 * its own (nor makes the previous component create any: han's first call
 * on a communicator splits it twice): the communicator made right after a
 * first call comes next in Open MPI's handle table, as one made right after
 * a dup does. And hier's own collective exchanges (MPI_T coll_hier_exchanges,
 * each a round trip between nodes) are one per communicator of several
 * ranks: its set-up's allgather, no agreement (these processes had such
 * communicators before: the segments are recycled, the addresses known),
 * none in the calls. The first allreduce on each communicator of several
 * ranks (8 bytes, 2 ranks) is piggybacked on that exchange: counted under path
 * "setup", the second one not.
 *
 *   test_churn [--rounds N]   (default 10000)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

/* Resident memory may grow this much over the rounds (kB): malloc's arenas
 * settle, Open MPI keeps per-CID tables. */
#define TEST_CHURN_RSS_SLACK_KB 4096

static long count_dir(const char *path, const char *prefix)
{
    long n = 0;
    DIR *d = opendir(path);
    struct dirent *e;
    if (!d) return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && !strncmp(e->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

static long rss_kb(void)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6)) v = strtol(line + 6, NULL, 10);
    fclose(f);
    return v;
}

/* The rounds; how many of their communicators had more than one rank. */
static unsigned long rounds(int first, int n_rounds, int rank)
{
    unsigned long shared = 0;
    for (int i = first; i < first + n_rounds; i++) {
        MPI_Comm c;
        int n, r;
        MPI_Comm_split(MPI_COMM_WORLD, i % 2 ? rank / 2 : rank % 2, rank, &c);
        MPI_Comm_size(c, &n);
        MPI_Comm_rank(c, &r);
        shared += n > 1;
        double x[2] = {r + 1, r + (i % 7)}, y[2] = {-1, -1};
        MPI_Allreduce(&x[0], &y[0], 1, MPI_DOUBLE, MPI_SUM, c);
        MPI_Allreduce(&x[1], &y[1], 1, MPI_DOUBLE, MPI_MAX, c);
        CHECK(y[0] == (double)n * (n + 1) / 2 && y[1] == (double)(n - 1 + i % 7), "round %d: wrong results", i);
        MPI_Comm_free(&c);
    }
    return shared;
}

/* Handle-table slots (MPI_Comm_c2f) between two duplicates of world, with
 * one allreduce (hier's set-up) on the first before the second is made;
 * the table fills its lowest free slot first. */
static int handle_gap(int first_call)
{
    MPI_Comm a, b;
    int one = 1, all;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    if (first_call) MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    int gap = (int)(MPI_Comm_c2f(b) - MPI_Comm_c2f(a));
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    return gap;
}

int main(int argc, char **argv)
{
    int rank, n_rounds = 10000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 2 && !strcmp(argv[1], "--rounds")) n_rounds = atoi(argv[2]);
    if (check_pvars_open() != 0) {
        fprintf(stderr, "test_churn: coll/hier's MPI_T counters are missing: the component was not loaded\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rounds(0, 100, rank); /* what lasts is made: endpoint, channels, pools */
    int gap_dup = handle_gap(0), gap_call = handle_gap(1);
    CHECK(gap_call == gap_dup, "a first call made %d communicator(s) (handles %d apart, %d without the call)",
          gap_call - gap_dup, gap_call, gap_dup);
    MPI_Barrier(MPI_COMM_WORLD);
    long fds0 = count_dir("/proc/self/fd", ""), shm0 = count_dir("/dev/shm", "coll-hier-"), rss0 = rss_kb();
    check_counters_t a, b;
    check_pvars_read(&a);
    double t = MPI_Wtime();
    unsigned long shared = rounds(100, n_rounds, rank);
    t = MPI_Wtime() - t;
    check_pvars_read(&b);
    MPI_Barrier(MPI_COMM_WORLD);
    long fds1 = count_dir("/proc/self/fd", ""), shm1 = count_dir("/dev/shm", "coll-hier-"), rss1 = rss_kb();

    CHECK(b.served[0] - a.served[0] == 2ul * (unsigned long)n_rounds && b.fallback[0] == a.fallback[0],
          "%lu of %d allreduces served, %lu fell back", b.served[0] - a.served[0], 2 * n_rounds,
          b.fallback[0] - a.fallback[0]);
    CHECK(fds1 <= fds0, "open descriptors grew from %ld to %ld over %d rounds", fds0, fds1, n_rounds);
    CHECK(shm1 <= shm0, "coll-hier files in /dev/shm grew from %ld to %ld", shm0, shm1);
    /* (a pool that lacks a recycled segment on one rank makes a set-up agree, and go again: allow a few) */
    unsigned long exchanges = b.exchanges - a.exchanges, most_exchanges = shared + 16;
    CHECK(exchanges >= shared && exchanges <= most_exchanges,
          "hier made %lu exchanges of its own over %lu communicators of several ranks: 1 each expected "
          "(the set-up's allgather), at most %lu", exchanges, shared, most_exchanges);
    int setup = check_path_index("setup");
    unsigned long piggybacked = b.path_calls[0][setup] - a.path_calls[0][setup];
    CHECK(piggybacked == shared,
          "%lu first calls were piggybacked on their communicator's set-up, of %lu communicators of several ranks",
          piggybacked, shared);
    CHECK(rss1 - rss0 <= TEST_CHURN_RSS_SLACK_KB, "resident memory grew by %ld kB over %d rounds", rss1 - rss0,
          n_rounds);
    long grew = rss1 - rss0, most;
    MPI_Reduce(&grew, &most, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_churn: %d rounds of split + 2 allreduces + free, %.1f us each; hier's exchanges %lu, first calls "
               "served by them %lu; descriptors %ld -> %ld, coll-hier files %ld -> %ld, resident memory +%ld kB at "
               "most\n", n_rounds, t / n_rounds * 1e6, exchanges, piggybacked, fds0, fds1, shm0, shm1, most);
    check_pvars_close();
    return check_finish("test_churn");
}
