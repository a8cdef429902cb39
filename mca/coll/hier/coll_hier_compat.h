/* coll_hier_compat.h: the differences between the Open MPI lines hier builds against (4.1, 5.0, 6.0), in one
 * place (docs/design.md, "The tree"). The same sources compile against each line's headers; configure finds
 * which one (OMPI_MAJOR_VERSION, from ompi_config.h), and only what differs by name is mapped here: the coll
 * API's component type and version, the communicator id, the component's DECLSPEC, whether Open MPI's
 * accelerator framework is there, whether the module installs its own functions (6.0), and opal_progress's type.
 *
 * Counts: mca_coll_hier_count_t is the line's count type (int, size_t); products of counts are computed in
 * size_t, and a count handed back to Open MPI must fit MCA_COLL_HIER_COUNT_MAX. */
#ifndef MCA_COLL_HIER_COMPAT_H
#define MCA_COLL_HIER_COMPAT_H

#include "ompi_config.h"

#include "ompi/communicator/communicator.h"
#include "opal/runtime/opal_progress.h"

#include <limits.h>
#include <stdint.h>

/* (ompi_process_info: 4.1's is ORTE's, 5.0's and 6.0's OPAL's; num_local_peers in each) */
#if OMPI_MAJOR_VERSION == 4
#include "ompi/mca/rte/rte.h"
#else
#include "ompi/runtime/ompi_rte.h"
#endif

#if OMPI_MAJOR_VERSION == 4 && OMPI_MINOR_VERSION >= 1
#define MCA_COLL_HIER_COMPONENT_T mca_coll_base_component_2_0_0_t
#define MCA_COLL_HIER_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0
#define MCA_COLL_HIER_HAVE_ACCELERATOR 0
#define MCA_COLL_HIER_DECLSPEC OMPI_MODULE_DECLSPEC
static inline unsigned mca_coll_hier_comm_cid(ompi_communicator_t *comm)
{
    return (unsigned)ompi_comm_get_cid(comm);
}
#elif OMPI_MAJOR_VERSION == 5
#define MCA_COLL_HIER_COMPONENT_T mca_coll_base_component_2_4_0_t
#define MCA_COLL_HIER_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0
#define MCA_COLL_HIER_HAVE_ACCELERATOR 1
#define MCA_COLL_HIER_DECLSPEC OMPI_DECLSPEC /* (OMPI_MODULE_DECLSPEC is gone) */
static inline unsigned mca_coll_hier_comm_cid(ompi_communicator_t *comm)
{
    return (unsigned)ompi_comm_get_local_cid(comm);
}
#elif OMPI_MAJOR_VERSION == 6
#include "ompi/util/count_disp_array.h"
#define MCA_COLL_HIER_COMPONENT_T mca_coll_base_component_3_0_0_t
#define MCA_COLL_HIER_BASE_VERSION MCA_COLL_BASE_VERSION_3_0_0
#define MCA_COLL_HIER_HAVE_ACCELERATOR 1
#define MCA_COLL_HIER_DECLSPEC OMPI_DECLSPEC
#define MCA_COLL_HIER_INSTALLS_API 1
typedef size_t mca_coll_hier_count_t;
typedef ompi_count_array_t mca_coll_hier_counts_t;
#define MCA_COLL_HIER_COUNT_MAX SIZE_MAX
static inline size_t mca_coll_hier_counts_get(mca_coll_hier_counts_t counts, int i)
{
    return ompi_count_array_get(counts, (size_t)i);
}
static inline unsigned mca_coll_hier_comm_cid(ompi_communicator_t *comm)
{
    return (unsigned)ompi_comm_get_local_cid(comm);
}
#else
#error "coll/hier builds against Open MPI 4.1, 5.0 and 6.0; this is another line"
#endif

/* Open MPI's progress as the core's waits call it (hier_progress_fn_t, no result): 4.1's opal_progress is one;
 * 5.0's and 6.0's return a count. */
#if OMPI_MAJOR_VERSION == 4
#define MCA_COLL_HIER_PROGRESS opal_progress
#else
static inline void mca_coll_hier_progress(void)
{
    (void)opal_progress();
}
#define MCA_COLL_HIER_PROGRESS mca_coll_hier_progress
#endif

#if OMPI_MAJOR_VERSION < 6
#define MCA_COLL_HIER_INSTALLS_API 0 /* (the framework copies the module's functions) */
typedef int mca_coll_hier_count_t;
typedef const int *mca_coll_hier_counts_t;
#define MCA_COLL_HIER_COUNT_MAX ((size_t)INT_MAX)
static inline size_t mca_coll_hier_counts_get(mca_coll_hier_counts_t counts, int i)
{
    return (size_t)counts[i];
}
#endif

#endif
