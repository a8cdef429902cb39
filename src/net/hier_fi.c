/* hier_fi.c: see hier_fi.h. */
#include "net/hier_fi.h"

#include <dlfcn.h>
#include <rdma/fi_errno.h>
#include <pthread.h>
#include <string.h>

#include "base/hier_log.h"

hier_fi_t hier_fi;
static hier_status_t hier_fi_status = HIER_ERR_NOT_SUPPORTED;
static pthread_once_t hier_fi_once = PTHREAD_ONCE_INIT;
static int hier_fi_was_loaded; /* (hier_fi_shared) */
static int hier_fi_loaded_once; /* hier_fi_open ran: hier_fi_was_loaded says */

#define HIER_FI_SYM(lib, field, name) ((*(void **)&hier_fi.field = dlsym(lib, name)) != NULL)

static void hier_fi_open_once(void);

static void hier_fi_open(void)
{
    hier_fi_open_once();
    __atomic_store_n(&hier_fi_loaded_once, 1, __ATOMIC_RELEASE);
}

static void hier_fi_open_once(void)
{
    void *before = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    hier_fi_was_loaded = before != NULL;
    if (before) dlclose(before);
    /* (loaded for the life of the process: endpoints outlive communicators) */
    void *lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        HIER_LOG(HIER_LOG_COMM, "libfabric.so.1 cannot be loaded (%s): calls between nodes go over "
                 "Open MPI's point-to-point", dlerror());
        return;
    }
    if (!(HIER_FI_SYM(lib, version, "fi_version") && HIER_FI_SYM(lib, getinfo, "fi_getinfo") &&
          HIER_FI_SYM(lib, freeinfo, "fi_freeinfo") && HIER_FI_SYM(lib, dupinfo, "fi_dupinfo") &&
          HIER_FI_SYM(lib, fabric, "fi_fabric") && HIER_FI_SYM(lib, strerror, "fi_strerror") &&
          HIER_FI_SYM(lib, tostr, "fi_tostr"))) {
        HIER_ERROR("libfabric.so.1 lacks a function coll/hier needs (%s): calls between nodes go over "
                   "Open MPI's point-to-point", dlerror());
        memset(&hier_fi, 0, sizeof(hier_fi));
        dlclose(lib);
        return;
    }
    uint32_t version = hier_fi.version();
    if (FI_VERSION_LT(version, HIER_FI_API_VERSION)) {
        HIER_ERROR("libfabric %u.%u is older than coll/hier needs (%u.%u): calls between nodes go over "
                   "Open MPI's point-to-point", FI_MAJOR(version), FI_MINOR(version), FI_MAJOR(HIER_FI_API_VERSION),
                   FI_MINOR(HIER_FI_API_VERSION));
        memset(&hier_fi, 0, sizeof(hier_fi));
        dlclose(lib);
        return;
    }
    void *verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (verbs && !HIER_FI_SYM(verbs, fork_initialized, "ibv_is_fork_initialized")) {
        hier_fi.fork_initialized = NULL;
        dlclose(verbs);
    }
    hier_fi_status = HIER_OK;
}

int hier_fi_shared(void)
{
    if (__atomic_load_n(&hier_fi_loaded_once, __ATOMIC_ACQUIRE)) return hier_fi_status == HIER_OK && hier_fi_was_loaded;
    void *present = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (present) dlclose(present);
    return present != NULL;
}

uint32_t hier_fi_runtime_version(void)
{
    return hier_fi_load() == HIER_OK ? hier_fi.version() : 0;
}

hier_status_t hier_fi_load(void)
{
    pthread_once(&hier_fi_once, hier_fi_open);
    return hier_fi_status;
}

const char *hier_fi_strerror(int errnum)
{
    return hier_fi.strerror ? hier_fi.strerror(errnum) : strerror(errnum);
}

hier_status_t hier_fi_fail(const char *prov, const char *call, int ret)
{
    HIER_ERROR("%s on provider %s failed: %s (%d)", call, prov ? prov : "?", hier_fi_strerror(-ret), ret);
    switch (-ret) {
    case FI_ENOMEM: return HIER_ERR_NO_MEMORY;
    case FI_ENODATA: case FI_ENOSYS: case FI_EOPNOTSUPP: return HIER_ERR_NOT_SUPPORTED;
    case FI_ETIMEDOUT: return HIER_ERR_TIMEOUT;
    case FI_ECONNREFUSED: case FI_ECONNRESET: case FI_ENOTCONN: case FI_EHOSTUNREACH: return HIER_ERR_PEER_DEAD;
    default: return HIER_ERR_INTERNAL;
    }
}

