/* coll_hier_component.c: the component: identity, parameters, life cycle. */
#include "coll_hier.h"

#include "opal/util/output.h"

#include "comm/hier_comm.h"
#include "base/hier_log.h"
#include "base/hier_params.h"

static int mca_coll_hier_open(void);
static int mca_coll_hier_close(void);
static int mca_coll_hier_register(void);

const MCA_COLL_HIER_COMPONENT_T mca_coll_hier_component = {
    .collm_version = {
        MCA_COLL_HIER_BASE_VERSION,
        .mca_component_name = "hier",
        MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
        .mca_open_component = mca_coll_hier_open,
        .mca_close_component = mca_coll_hier_close,
        .mca_register_component_params = mca_coll_hier_register,
    },
    .collm_data = {MCA_BASE_METADATA_PARAM_NONE},
    .collm_init_query = mca_coll_hier_init_query,
    .collm_comm_query = mca_coll_hier_comm_query,
};

static void mca_coll_hier_log_sink(const char *line)
{
    opal_output(0, "%s", line);
}

static int mca_coll_hier_register(void)
{
    int rc = mca_coll_hier_register_params();
    if (OMPI_SUCCESS != rc) return rc;
    return mca_coll_hier_register_pvars();
}

static int mca_coll_hier_open(void)
{
    hier_log_set_sink(mca_coll_hier_log_sink);
    hier_log_level = hier_params.verbose;
    return mca_coll_hier_params_take_strings();
}

static int mca_coll_hier_close(void)
{
    mca_coll_hier_stats_report();
    mca_coll_hier_nb_close();
    hier_proc_finalize();
    mca_coll_hier_params_drop_strings();
    return OMPI_SUCCESS;
}
