#include "base/hier_stats.h"

#include <inttypes.h>

hier_stats_cell_t hier_stats[HIER_COLL_COUNT][HIER_PATH_COUNT];

hier_stats_rail_t hier_stats_rails[HIER_STATS_RAILS];
uint64_t hier_stats_exchanges;
uint64_t hier_stats_pml_waiting;

void hier_stats_print_rails(FILE *out, int rank, const hier_stats_rail_t rails[HIER_STATS_RAILS])
{
    for (int j = 0; j < HIER_STATS_RAILS; j++)
        if (rails[j].nic[0])
            fprintf(out, "coll:hier:nic rank=%d rail=%d nic=%s bytes=%" PRIu64 "\n", rank, j, rails[j].nic,
                    __atomic_load_n(&rails[j].bytes, __ATOMIC_RELAXED));
    fflush(out);
}

void hier_stats_print(FILE *out, const hier_stats_cell_t cells[HIER_COLL_COUNT][HIER_PATH_COUNT])
{
    for (int c = 0; c < HIER_COLL_COUNT; c++) {
        for (int p = 0; p < HIER_PATH_COUNT; p++) {
            if (!cells[c][p].calls) continue;
            fprintf(out,
                    "coll:hier:stats coll=%s path=%s calls=%" PRIu64 " bytes=%" PRIu64 " net_bytes=%" PRIu64
                    " staged=%" PRIu64 "\n",
                    hier_coll_name(c), hier_path_name(p), cells[c][p].calls, cells[c][p].bytes,
                    cells[c][p].net_bytes, cells[c][p].staged);
        }
    }
    fflush(out);
}
