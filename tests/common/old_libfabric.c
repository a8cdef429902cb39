/* old_libfabric.c: the installed libfabric, made to answer as an older one
 * does, for the tests: a compute node's libfabric older than the headers
 * coll/hier was built with. Put on LD_LIBRARY_PATH as libfabric.so.1, it
 * forwards every call hier makes to the real library (HIER_OLD_FI_REAL: its
 * path) but says its version is HIER_OLD_FI_VERSION ("1.12" by default)
 * and, as libfabric does, answers fi_getinfo for a newer API version with
 * -FI_ENOSYS. A hier that asks for its headers' version finds no provider
 * here; one that asks for the oldest version it needs runs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>

#define OLD_EXPORT __attribute__((visibility("default")))

static struct {
    void *lib;
    uint32_t version;
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    char *(*tostr)(const void *, enum fi_type);
} real;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void old_load(void)
{
    const char *path = getenv("HIER_OLD_FI_REAL"), *v = getenv("HIER_OLD_FI_VERSION");
    unsigned major = 1, minor = 12;
    if (v && sscanf(v, "%u.%u", &major, &minor) != 2) major = 1, minor = 12;
    real.version = FI_VERSION(major, minor);
    if (!path || !(real.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        fprintf(stderr, "old_libfabric: HIER_OLD_FI_REAL (%s) cannot be loaded\n", path ? path : "unset");
        abort();
    }
    *(void **)&real.getinfo = dlsym(real.lib, "fi_getinfo");
    *(void **)&real.freeinfo = dlsym(real.lib, "fi_freeinfo");
    *(void **)&real.dupinfo = dlsym(real.lib, "fi_dupinfo");
    *(void **)&real.fabric = dlsym(real.lib, "fi_fabric");
    *(void **)&real.strerror = dlsym(real.lib, "fi_strerror");
    *(void **)&real.tostr = dlsym(real.lib, "fi_tostr");
}

#define OLD_REAL() pthread_once(&once, old_load)

OLD_EXPORT uint32_t fi_version(void)
{
    OLD_REAL();
    return real.version;
}

OLD_EXPORT int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                          const struct fi_info *hints, struct fi_info **info)
{
    OLD_REAL();
    if (FI_VERSION_LT(real.version, version)) return -FI_ENOSYS; /* (what an older libfabric answers) */
    return real.getinfo(version, node, service, flags, hints, info);
}

OLD_EXPORT void fi_freeinfo(struct fi_info *info)
{
    OLD_REAL();
    real.freeinfo(info);
}

OLD_EXPORT struct fi_info *fi_dupinfo(const struct fi_info *info)
{
    OLD_REAL();
    return real.dupinfo(info);
}

OLD_EXPORT int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    OLD_REAL();
    return real.fabric(attr, fabric, context);
}

OLD_EXPORT const char *fi_strerror(int errnum)
{
    OLD_REAL();
    return real.strerror(errnum);
}

OLD_EXPORT char *fi_tostr(const void *data, enum fi_type datatype)
{
    OLD_REAL();
    return real.tostr(data, datatype);
}
