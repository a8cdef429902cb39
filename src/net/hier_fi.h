/* hier_fi.h: libfabric (and rdma-core's fork check), loaded when a communicator first needs the network, not when
 * the component loads, so a missing libfabric is a clean fallback of the communicators that span nodes
 * (docs/design.md, "Between nodes": Endpoint). The rest of libfabric's API is inline functions through the objects
 * it returns. */
#ifndef HIER_FI_H
#define HIER_FI_H

#include <rdma/fabric.h>

#include "base/hier_status.h"

/* The libfabric API version hier asks fi_getinfo for: the oldest with what it needs (FI_HMEM, 1.10), never the
 * headers' (an older library answers a newer request with FI_ENOSYS). Anything newer is used only where
 * hier_fi_runtime_version() says the library has it. */
#define HIER_FI_API_VERSION FI_VERSION(1, 10)

typedef struct {
    uint32_t (*version)(void);
    int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
                   const struct fi_info *hints, struct fi_info **info);
    void (*freeinfo)(struct fi_info *info);
    struct fi_info *(*dupinfo)(const struct fi_info *info);
    int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
    const char *(*strerror)(int errnum);
    char *(*tostr)(const void *data, enum fi_type datatype);
    int (*fork_initialized)(void); /* rdma-core's ibv_is_fork_initialized; NULL without it */
} hier_fi_t;

extern hier_fi_t hier_fi;

/* Load libfabric.so.1 (and libibverbs.so.1 when present), once; HIER_ERR_NOT_SUPPORTED without it, said once. */
hier_status_t hier_fi_load(void);
/* Whether libfabric was in the process before hier loaded it (or, before hier_fi_load, is in it now): the MPI
 * library's own or the application's. Loads nothing (loading runs its providers' constructors, which a thread of
 * hier's, not MPI's, should pay). */
int hier_fi_shared(void);
/* The loaded libfabric's version (fi_version()); 0 before it is loaded. */
uint32_t hier_fi_runtime_version(void);
/* fi_strerror, or a plain text before libfabric is loaded. */
const char *hier_fi_strerror(int errnum);
/* A libfabric return code where it enters hier: logged once with the call and the provider (NULL: not known
 * yet); its status. */
hier_status_t hier_fi_fail(const char *prov, const char *call, int ret);

#endif
