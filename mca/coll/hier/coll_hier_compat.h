/* coll_hier_compat.h: the differences between the Open MPI lines hier builds
 * against, in one place. The same sources compile against each line's
 * headers; configure finds which one (OMPI_MAJOR_VERSION, from
 * ompi_config.h), and only what differs by name is mapped here.
 *
 *   4.1: coll framework API 2.0.0, module 2.3.0; communicator ids by
 *        ompi_comm_get_cid(); device memory only through hier's own backends.
 *   5.0: coll API 2.4.0 (component and module; 5.0's selection takes no
 *        other); ompi_comm_get_local_cid(); a component's symbol is
 *        OMPI_DECLSPEC (no OMPI_MODULE_DECLSPEC); the accelerator framework
 *        (opal_accelerator.check_addr) can tell device memory of runtimes
 *        hier has no backend for.
 *   6.0 (main): coll API 3.0.0, size_t counts, MCA_COLL_SAVE_API /
 *        MCA_COLL_INSTALL_API instead of reading comm->c_coll in enable:
 *        its branch goes here when it is released; until then configure
 *        refuses it with this header's message. */
#ifndef MCA_COLL_HIER_COMPAT_H
#define MCA_COLL_HIER_COMPAT_H

#include "ompi_config.h"

#include "ompi/communicator/communicator.h"

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
#else
#error "coll/hier builds against Open MPI 4.1 and 5.0; this is another line (6.0's coll API 3.0.0 is not supported yet)"
#endif

#endif
