/* test_accel.c: device-memory classification with the test backend (memory
 * the CPU faults on), its range checks and cache, and what classifying costs
 * a host buffer (printed, never asserted: timings are for benchmarks). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "accel/hier_accel.h"
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
    cr_assert_eq(hier_accel_classify(dev + 4000, 1u << 20, &b), HIER_ERR_BUFFER,
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

/* Asynchronous copies: started in order, a fence passes when they are all
 * done (the test backend's worker delays each, so reading before the fence
 * would see the old bytes); device to device through the backend. */
Test(accel, async_copies_pass_their_fence)
{
    enum { N = 1 << 16 };
    uint8_t *dev = tdev_alloc(N), *dev2 = tdev_alloc(N), *host = malloc(N), *back = malloc(N);
    const hier_accel_backend_t *b = tdev_backend();
    hier_accel_fence_t f;
    setenv("HIER_TEST_DEVICE_DELAY_US", "2000", 1);
    for (int i = 0; i < N; i++) host[i] = (uint8_t)(i * 13 + 1);
    memset(back, 0, N);
    cr_assert_eq(hier_accel_copy_start(b, 0, dev, host, N, 0), HIER_OK);
    cr_assert_eq(hier_accel_copy_start(b, 0, back, dev, N, 1), HIER_OK);
    cr_assert_eq(hier_accel_fence(b, 0, &f), HIER_OK);
    cr_assert(f.ticket != 0 || f.event != NULL, "a fence behind copies in flight is not passed yet");
    cr_assert_eq(hier_accel_fence_wait(b, &f), HIER_OK);
    cr_assert_arr_eq(back, host, N, "both copies done, in order, at the fence");
    cr_assert_eq(hier_accel_copy_d2d(b, dev2, dev, N), HIER_OK);
    memset(back, 0, N);
    cr_assert_eq(b->to_host(back, dev2, N), HIER_OK);
    cr_assert_arr_eq(back, host, N);
    unsetenv("HIER_TEST_DEVICE_DELAY_US");
    tdev_free(dev), tdev_free(dev2), free(host), free(back);
}

/* A backend with only the required operations: copies are synchronous, the
 * fence passed at once, device to device goes through host memory. */
Test(accel, backends_without_optional_operations)
{
    hier_accel_backend_t plain = *tdev_backend();
    plain.copy = NULL, plain.copy_start = NULL, plain.fence_record = NULL, plain.fence_wait = NULL;
    plain.nic_addr = NULL;
    uint8_t *dev = tdev_alloc(4096), *dev2 = tdev_alloc(4096), host[4096], back[4096];
    hier_accel_fence_t f;
    for (int i = 0; i < 4096; i++) host[i] = (uint8_t)(i * 3);
    cr_assert_eq(hier_accel_copy_start(&plain, 0, dev, host, sizeof(host), 0), HIER_OK);
    cr_assert_eq(hier_accel_fence(&plain, 0, &f), HIER_OK);
    cr_assert(f.ticket == 0 && f.event == NULL);
    cr_assert_eq(hier_accel_fence_wait(&plain, &f), HIER_OK);
    cr_assert_eq(hier_accel_copy_d2d(&plain, dev2, dev, sizeof(host)), HIER_OK);
    cr_assert_eq(plain.to_host(back, dev2, sizeof(back)), HIER_OK);
    cr_assert_arr_eq(back, host, sizeof(host));
    cr_assert_eq(hier_accel_nic_addr(&plain, dev), dev, "without nic_addr the NIC gets the device address");
    cr_assert_eq(hier_accel_nic_addr(tdev_backend(), dev), tdev_alias(dev));
    tdev_free(dev), tdev_free(dev2);
}

/* With a runtime loaded whose device addresses no backend can query
 * (SynapseAI, Neuron), a buffer nobody claims must be mapped host memory;
 * anything else is refused (the glue falls back), not touched. */
Test(accel, unknown_device_memory_is_refused_when_guarded)
{
    long page = sysconf(_SC_PAGESIZE);
    char host[64];
    hier_accel_buf_t b;
    uint8_t *gone = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(gone, MAP_FAILED);
    munmap(gone, (size_t)page * 2); /* an address with no host mapping, like a device address */
    cr_assert_eq(hier_accel_classify(gone, 100, &b), HIER_OK, "unguarded: taken for host memory");
    hier_accel_guard_set(1);
    cr_assert_eq(hier_accel_classify(gone, 100, &b), HIER_ERR_NOT_SUPPORTED);
    cr_assert_eq(hier_accel_classify(host, sizeof(host), &b), HIER_OK);
    cr_assert(!hier_accel_is_device(&b), "mapped host memory passes the check");
    uint8_t *half = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(half, MAP_FAILED);
    munmap(half + page, (size_t)page);
    cr_assert_eq(hier_accel_classify(half + page - 8, 16, &b), HIER_ERR_NOT_SUPPORTED,
                 "a range whose end is not mapped is refused");
    munmap(half, (size_t)page);
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK);
    uint8_t *dev = tdev_alloc(4096);
    cr_assert_eq(hier_accel_classify(dev, 4096, &b), HIER_OK, "a backend's memory is still its own");
    cr_assert(hier_accel_is_device(&b));
    hier_accel_guard_set(0);
    tdev_free(dev);
}

/* Open MPI 5's accelerator framework as the foreign query: what it calls
 * device memory and no backend claims is refused; a backend's own memory
 * stays the backend's; everything else is host memory. */
static const void *foreign_device;
static int foreign_is_device(const void *p)
{
    return p == foreign_device;
}

Test(accel, foreign_device_memory_is_refused)
{
    char host[64], other[64];
    hier_accel_buf_t b;
    foreign_device = other;
    hier_accel_set_foreign(foreign_is_device);
    cr_assert_eq(hier_accel_classify(other, sizeof(other), &b), HIER_ERR_NOT_SUPPORTED);
    cr_assert_eq(hier_accel_classify(host, sizeof(host), &b), HIER_OK);
    cr_assert(!hier_accel_is_device(&b));
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK);
    uint8_t *dev = tdev_alloc(4096);
    foreign_device = dev; /* the framework knows it too; the backend comes first */
    cr_assert_eq(hier_accel_classify(dev, 4096, &b), HIER_OK);
    cr_assert(hier_accel_is_device(&b));
    hier_accel_set_foreign(NULL);
    foreign_device = other;
    cr_assert_eq(hier_accel_classify(other, sizeof(other), &b), HIER_OK, "without the query: host memory");
    tdev_free(dev);
}

/* Where the device in use sits: the first backend that knows says; none
 * that knows, none registered: not supported (NICs go by the binding). */
static hier_status_t gpu_at_42(char *busid, size_t len)
{
    snprintf(busid, len, "0000:42:00.0");
    return HIER_OK;
}

static hier_status_t no_current_device(char *busid, size_t len)
{
    (void)busid, (void)len;
    return HIER_ERR_NOT_SUPPORTED;
}

Test(accel, the_device_in_use_is_located_by_its_backend)
{
    char busid[32] = "untouched";
    hier_accel_backend_t idle = *tdev_backend(), busy = *tdev_backend();
    idle.name = "idle";
    idle.device_busid = no_current_device;
    busy.name = "busy";
    busy.device_busid = gpu_at_42;
    cr_assert_eq(hier_accel_device_busid(busid, sizeof(busid)), HIER_ERR_NOT_SUPPORTED);
    cr_assert_eq(hier_accel_register(tdev_backend()), HIER_OK); /* (no device_busid) */
    cr_assert_eq(hier_accel_register(&idle), HIER_OK);
    cr_assert_eq(hier_accel_device_busid(busid, sizeof(busid)), HIER_ERR_NOT_SUPPORTED);
    cr_assert_eq(hier_accel_register(&busy), HIER_OK);
    cr_assert_eq(hier_accel_device_busid(busid, sizeof(busid)), HIER_OK);
    cr_assert_str_eq(busid, "0000:42:00.0");
    hier_accel_reset();
}
