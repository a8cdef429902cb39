/* test_dev_backend.c: see test_dev_backend.h. */
#define _GNU_SOURCE /* memfd_create, dl_iterate_phdr */
#include "test_dev_backend.h"

#include <dlfcn.h>
#include <link.h>

#include <pthread.h>
#include <rdma/fi_domain.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define TDEV_MAX 256

static struct {
    uint8_t *dev, *alias;
    size_t len;
    uint64_t id;
} tdev_allocs[TDEV_MAX];
static uint64_t tdev_next_id = 1;
unsigned long tdev_copies_in, tdev_copies_out;

static int tdev_find(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < TDEV_MAX; i++)
        if (tdev_allocs[i].dev && a >= (uintptr_t)tdev_allocs[i].dev &&
            a < (uintptr_t)tdev_allocs[i].dev + tdev_allocs[i].len)
            return i;
    return -1;
}

void *tdev_alloc(size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), l = (len + page - 1) / page * page;
    if (!l) l = page;
    int fd = memfd_create("hier-test-device", 0), slot = -1;
    for (int i = 0; i < TDEV_MAX && slot < 0; i++)
        if (!tdev_allocs[i].dev) slot = i;
    if (fd < 0 || slot < 0 || ftruncate(fd, (off_t)l) != 0) {
        perror("tdev_alloc");
        abort();
    }
    uint8_t *alias = mmap(NULL, l, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint8_t *dev = mmap(NULL, l, PROT_NONE, MAP_SHARED, fd, 0);
    close(fd);
    if (alias == MAP_FAILED || dev == MAP_FAILED) {
        perror("tdev_alloc mmap");
        abort();
    }
    tdev_allocs[slot].dev = dev;
    tdev_allocs[slot].alias = alias;
    tdev_allocs[slot].len = l;
    tdev_allocs[slot].id = tdev_next_id++;
    return dev;
}

void tdev_free(void *dev)
{
    int i = tdev_find(dev);
    if (i < 0) return;
    munmap(tdev_allocs[i].dev, tdev_allocs[i].len);
    munmap(tdev_allocs[i].alias, tdev_allocs[i].len);
    tdev_allocs[i].dev = NULL;
}

uint8_t *tdev_alias(const void *dev)
{
    int i = tdev_find(dev);
    if (i < 0) abort(); /* not ours: a test bug */
    return tdev_allocs[i].alias + ((const uint8_t *)dev - tdev_allocs[i].dev);
}

static int tdev_query(const void *p, hier_accel_range_t *range)
{
    int i = tdev_find(p);
    if (i < 0) return 0;
    *range = (hier_accel_range_t){.base = (uintptr_t)tdev_allocs[i].dev, .len = tdev_allocs[i].len, .device = 0,
                                  .id = tdev_allocs[i].id};
    return 1;
}

static hier_status_t tdev_to_host(void *dst, const void *src, size_t len)
{
    tdev_copies_in++;
    memcpy(dst, tdev_alias(src), len);
    return HIER_OK;
}

static hier_status_t tdev_from_host(void *dst, const void *src, size_t len)
{
    tdev_copies_out++;
    memcpy(tdev_alias(dst), src, len);
    return HIER_OK;
}

/* Either side may be device memory: the CPU copies between the aliases. */
static void *tdev_cpu_addr(const void *p)
{
    return tdev_find(p) >= 0 ? tdev_alias(p) : (void *)p;
}

static hier_status_t tdev_copy(void *dst, const void *src, size_t len)
{
    memcpy(tdev_cpu_addr(dst), tdev_cpu_addr(src), len);
    return HIER_OK;
}

/* Asynchronous copies: a worker thread (started in the process that first
 * needs it, so forked children get their own) does them in order, each after
 * HIER_TEST_DEVICE_DELAY_US microseconds: a caller that uses data before
 * waiting for its copy reads stale bytes and fails its checks. */
#define TDEV_QUEUE 64
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pid_t pid;
    struct { void *dst; const void *src; size_t len; } q[TDEV_QUEUE];
    uint64_t submitted, completed;
    unsigned delay_us;
} tdev_async = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *tdev_worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&tdev_async.lock);
    for (;;) {
        while (tdev_async.completed == tdev_async.submitted) pthread_cond_wait(&tdev_async.cond, &tdev_async.lock);
        size_t k = tdev_async.completed % TDEV_QUEUE;
        void *dst = tdev_async.q[k].dst;
        const void *src = tdev_async.q[k].src;
        size_t len = tdev_async.q[k].len;
        pthread_mutex_unlock(&tdev_async.lock);
        if (tdev_async.delay_us) usleep(tdev_async.delay_us);
        memcpy(dst, src, len);
        pthread_mutex_lock(&tdev_async.lock);
        tdev_async.completed++;
        pthread_cond_broadcast(&tdev_async.cond);
    }
    return NULL;
}

static hier_status_t tdev_copy_start(int device, void *dst, const void *src, size_t len)
{
    (void)device;
    pthread_mutex_lock(&tdev_async.lock);
    if (tdev_async.pid != getpid()) {
        pthread_t t;
        const char *d = getenv("HIER_TEST_DEVICE_DELAY_US");
        tdev_async.pid = getpid();
        tdev_async.submitted = tdev_async.completed = 0;
        tdev_async.delay_us = d ? (unsigned)atoi(d) : 0;
        if (pthread_create(&t, NULL, tdev_worker, NULL) != 0) abort();
        pthread_detach(t);
    }
    while (tdev_async.submitted - tdev_async.completed == TDEV_QUEUE)
        pthread_cond_wait(&tdev_async.cond, &tdev_async.lock);
    if (tdev_find(src) >= 0) tdev_copies_in++;
    else tdev_copies_out++;
    size_t k = tdev_async.submitted % TDEV_QUEUE;
    tdev_async.q[k].dst = tdev_cpu_addr(dst);
    tdev_async.q[k].src = tdev_cpu_addr(src);
    tdev_async.q[k].len = len;
    tdev_async.submitted++;
    pthread_cond_broadcast(&tdev_async.cond);
    pthread_mutex_unlock(&tdev_async.lock);
    return HIER_OK;
}

static hier_status_t tdev_fence_record(int device, hier_accel_fence_t *fence)
{
    (void)device;
    pthread_mutex_lock(&tdev_async.lock);
    fence->ticket = tdev_async.pid == getpid() ? tdev_async.submitted : 0;
    pthread_mutex_unlock(&tdev_async.lock);
    return HIER_OK;
}

static hier_status_t tdev_fence_wait(hier_accel_fence_t *fence)
{
    pthread_mutex_lock(&tdev_async.lock);
    while (tdev_async.completed < fence->ticket) pthread_cond_wait(&tdev_async.cond, &tdev_async.lock);
    pthread_mutex_unlock(&tdev_async.lock);
    return HIER_OK;
}

/* The NIC reaches this "device memory" through its alias, registered as
 * FI_HMEM_SYSTEM: peer-direct transfers never touch the PROT_NONE view. */
static void *tdev_nic_addr(const void *p)
{
    return tdev_alias(p);
}

static const hier_accel_backend_t tdev = {.name = "test", .fi_iface = FI_HMEM_SYSTEM, .query = tdev_query,
                                          .to_host = tdev_to_host, .from_host = tdev_from_host,
                                          .copy = tdev_copy, .copy_start = tdev_copy_start,
                                          .fence_record = tdev_fence_record, .fence_wait = tdev_fence_wait,
                                          .nic_addr = tdev_nic_addr};

const hier_accel_backend_t *tdev_backend(void)
{
    return &tdev;
}

/* The loaded object named mca_coll_hier.so, if any. */
static int tdev_find_component(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    if (strcmp(slash ? slash + 1 : info->dlpi_name, "mca_coll_hier.so") != 0) return 0;
    *(const char **)data = info->dlpi_name;
    return 1;
}

int tdev_register_with_component(void)
{
    const char *path = NULL;
    hier_status_t (*reg)(const hier_accel_backend_t *) = NULL;
    dl_iterate_phdr(tdev_find_component, &path);
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (lib) *(void **)&reg = dlsym(lib, "hier_accel_register");
    int rc = reg && reg(tdev_backend()) == HIER_OK ? 0 : -1;
    if (rc != 0)
        fprintf(stderr, "test backend: cannot register with coll/hier (%s)\n",
                !path ? "mca_coll_hier.so is not loaded" : !lib ? dlerror() : "no hier_accel_register");
    if (lib) dlclose(lib);
    return rc;
}

tdev_buf_t tdev_buf_alloc(int device, size_t bytes)
{
    tdev_buf_t b;
    if (device) {
        b.p = tdev_alloc(bytes);
        b.h = (char *)tdev_alias(b.p);
    } else {
        b.p = b.h = malloc(bytes);
    }
    return b;
}

void tdev_buf_free(int device, tdev_buf_t b)
{
    if (device) tdev_free(b.p);
    else free(b.p);
}
