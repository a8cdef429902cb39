/* test_dev_backend.c: see test_dev_backend.h. */
#define _GNU_SOURCE /* memfd_create */
#include "test_dev_backend.h"

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
} tdev_allocs[TDEV_MAX];
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
    *range = (hier_accel_range_t){.base = (uintptr_t)tdev_allocs[i].dev, .len = tdev_allocs[i].len, .device = 0};
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

static const hier_accel_backend_t tdev = {.name = "test", .fi_iface = FI_HMEM_SYSTEM, .query = tdev_query,
                                          .to_host = tdev_to_host, .from_host = tdev_from_host};

const hier_accel_backend_t *tdev_backend(void)
{
    return &tdev;
}
