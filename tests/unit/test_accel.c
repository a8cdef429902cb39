/* test_accel.c: device-memory classification with the test backend (memory
 * the CPU faults on), its range checks and cache, and what classifying costs
 * a host buffer (printed, never asserted: timings are for benchmarks). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hier_accel.h"
#include "test_dev_backend.h"

static void reset(void)
{
    hier_accel_reset();
}

TestSuite(accel, .init = reset, .fini = reset);

Test(accel, host_memory_without_backends)
{
    char buf[64];
    hier_accel_buf_t b = {.backend = tdev_backend()};
    cr_assert_eq(hier_accel_classify(buf, sizeof(buf), &b), HIER_OK);
    cr_assert(!hier_accel_is_device(&b));
}

Test(accel, device_memory_and_its_range)
{
    char host[64];
    hier_accel_buf_t b;
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK);
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK, "registering twice is harmless");
    uint8_t *dev = tdev_alloc(10000);
    cr_assert_eq(hier_accel_classify(dev + 100, 500, &b), HIER_OK);
    cr_assert_eq(b.backend, tdev_backend());
    cr_assert_eq(b.range.base, (uintptr_t)dev);
    cr_assert_geq(b.range.len, 10000);
    cr_assert_eq(hier_accel_classify(dev + 200, 10, &b), HIER_OK, "asked again");
    cr_assert_eq(b.backend, tdev_backend());
    cr_assert_eq(hier_accel_classify(host, sizeof(host), &b), HIER_OK);
    cr_assert(!hier_accel_is_device(&b), "host memory stays host memory with a backend registered");
    cr_assert_eq(hier_accel_classify(dev + 4000, 1u << 20, &b), HIER_ERR_INVALID_ARG,
                 "a buffer running past its allocation is refused");
    uint8_t *other = tdev_alloc(100);
    cr_assert_eq(hier_accel_classify(other, 100, &b), HIER_OK);
    cr_assert_eq(b.range.base, (uintptr_t)other, "a second allocation is not mistaken for the cached one");
    tdev_free(other);
    tdev_free(dev);
}

Test(accel, copies_go_through_the_backend)
{
    uint8_t *dev = tdev_alloc(4096), host[4096], back[4096];
    for (int i = 0; i < 4096; i++) host[i] = (uint8_t)(i * 7);
    cr_assert_eq(tdev_backend()->from_host(dev, host, sizeof(host)), HIER_OK);
    cr_assert_eq(tdev_backend()->to_host(back, dev, sizeof(back)), HIER_OK);
    cr_assert_arr_eq(back, host, sizeof(host));
    tdev_free(dev);
}

/* A backend whose ranges never turn into host memory is remembered: the
 * second lookup does not ask it. */
static int stable_queries;
static int stable_query(const void *p, hier_accel_range_t *range)
{
    stable_queries++;
    return tdev_backend()->query(p, range);
}

Test(accel, stable_ranges_are_remembered)
{
    hier_accel_backend_t stable = *tdev_backend();
    hier_accel_buf_t b;
    stable.stable_ranges = 1;
    stable.query = stable_query;
    cr_assert_eq(hier_accel_register(&stable), HIER_OK);
    uint8_t *dev = tdev_alloc(8192);
    cr_assert_eq(hier_accel_classify(dev, 100, &b), HIER_OK);
    cr_assert_eq(hier_accel_classify(dev + 4096, 100, &b), HIER_OK);
    cr_assert_eq(b.backend, &stable);
    cr_assert_eq(stable_queries, 1, "the remembered range answered the second lookup");
    hier_accel_reset();
    tdev_free(dev);
}

static double ns_per_classify(const void *p)
{
    struct timespec a, b;
    hier_accel_buf_t buf;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 1000000; i++) hier_accel_classify(p, 4096, &buf);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e6;
}

Test(accel, what_classifying_costs)
{
    static char host[4096];
    double none = ns_per_classify(host);
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK);
    uint8_t *dev = tdev_alloc(4096);
    double with = ns_per_classify(host), device = ns_per_classify(dev);
    hier_accel_backend_t stable = *tdev_backend();
    stable.stable_ranges = 1;
    hier_accel_reset();
    cr_assert_eq(hier_accel_register(&stable), HIER_OK);
    double cached = ns_per_classify(dev);
    printf("classify: host buffer, no backend %.1f ns; host buffer, test backend %.1f ns; device buffer %.1f ns, "
           "remembered %.1f ns\n", none, with, device, cached);
    hier_accel_reset();
    tdev_free(dev);
}
