/* coll_hier_stats.c: the core's counters as MPI_T performance variables, and
 * the coll:hier:stats report at MPI_Finalize. */
#include "coll_hier.h"

#include <assert.h>
#include <stdio.h>

#include "opal/mca/base/mca_base_pvar.h"

#include "base/hier_params.h"

int mca_coll_hier_world_rank = -1;

static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "pvars read the counters as unsigned long long");

/* Four counters per (collective, path): coll_hier_<coll>_<path>_calls,
 * _bytes, _net_bytes (what this process put on the fabric) and _staged
 * (calls on device buffers, staged through host memory). The default getter
 * reads one value straight from the context pointer. */
int mca_coll_hier_register_pvars(void)
{
    for (int c = 0; c < HIER_COLL_COUNT; c++) {
        for (int p = 0; p < HIER_PATH_COUNT; p++) {
            char name[128], desc[192];
            static const char *const what[] = {"calls", "bytes", "net_bytes", "staged"};
            uint64_t *cell[] = {&hier_stats[c][p].calls, &hier_stats[c][p].bytes, &hier_stats[c][p].net_bytes,
                                &hier_stats[c][p].staged};
            for (int which = 0; which < 4; which++) {
                snprintf(name, sizeof(name), "%s_%s_%s", hier_coll_name(c), hier_path_ident(p), what[which]);
                snprintf(desc, sizeof(desc), "%s served by coll/hier path %s: %s of this process",
                         hier_coll_name(c), hier_path_name(p), what[which]);
                int rc = mca_base_pvar_register("ompi", "coll", "hier", name, desc, OPAL_INFO_LVL_4,
                                                MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
                                                MCA_BASE_VAR_BIND_NO_OBJECT,
                                                MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, NULL,
                                                NULL, NULL, cell[which]);
                if (rc < 0) return rc;
            }
        }
    }
    for (int j = 0; j < HIER_STATS_RAILS; j++) { /* coll_hier_rail<j>_bytes */
        char name[64], desc[160];
        snprintf(name, sizeof(name), "rail%d_bytes", j);
        snprintf(desc, sizeof(desc), "bytes this process wrote through its NIC number %d (rail %d; its name: "
                 "coll_hier_stats)", j, j);
        int rc = mca_base_pvar_register("ompi", "coll", "hier", name, desc, OPAL_INFO_LVL_4,
                                        MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
                                        MCA_BASE_VAR_BIND_NO_OBJECT,
                                        MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, NULL, NULL,
                                        NULL, &hier_stats_rails[j].bytes);
        if (rc < 0) return rc;
    }
    int rc = mca_base_pvar_register("ompi", "coll", "hier", "exchanges",
                                    "collective exchanges coll/hier made for itself over point-to-point in this "
                                    "process (communicators' set-up, agreements inside calls)",
                                    OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG,
                                    NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
                                    MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, NULL, NULL, NULL,
                                    &hier_stats_exchanges);
    if (rc < 0) return rc;
    rc = mca_base_pvar_register("ompi", "coll", "hier", "pml_waiting",
                                "communicators of this process served between nodes over Open MPI's point-to-point "
                                "while they wait for every rank's libfabric endpoint to open (0: every one moved, "
                                "or stays there for good)",
                                OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_LEVEL, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
                                MCA_BASE_VAR_BIND_NO_OBJECT,
                                MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, NULL, NULL, NULL,
                                &hier_stats_pml_waiting);
    return rc < 0 ? rc : OMPI_SUCCESS;
}

/* Rank 0's table and NICs; with coll_hier_stats 2, every rank's NICs. */
void mca_coll_hier_stats_report(void)
{
    if (!hier_params.stats || (mca_coll_hier_world_rank != 0 && hier_params.stats < 2)) return;
    if (mca_coll_hier_world_rank == 0) hier_stats_print(stdout, hier_stats);
    hier_stats_print_rails(stdout, mca_coll_hier_world_rank, hier_stats_rails);
}
