/* test_dev_backend.h: "device memory" without a device, for tests.
 *
 * An allocation is a memfd mapped twice: PROT_NONE at the address handed to
 * the code under test, so any CPU access there kills the test with SIGSEGV,
 * and read-write at a private alias that only this backend's copy functions
 * (and the test's own checks) use. Registered with hier as backend "test".
 * It has every optional operation: asynchronous copies by a worker thread
 * (each delayed by HIER_TEST_DEVICE_DELAY_US, so a missing wait shows), the
 * alias as the NIC's address (peer direct with FI_HMEM_SYSTEM), allocation
 * ids. */
#ifndef TEST_DEV_BACKEND_H
#define TEST_DEV_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "accel/hier_accel.h"

void *tdev_alloc(size_t len);
void tdev_free(void *dev);
/* The CPU-visible alias of a device address. */
uint8_t *tdev_alias(const void *dev);
const hier_accel_backend_t *tdev_backend(void);
/* Under MPI: hand the backend to the mca_coll_hier.so Open MPI loaded (its
 * hier_accel_register), after MPI_Init; 0, or -1 with a message on stderr. */
int tdev_register_with_component(void);
/* A buffer a test hands to MPI (p: this backend's device memory when
 * `device`, else host memory) and reads and writes itself (h: p's alias,
 * or p). */
typedef struct {
    char *p, *h;
} tdev_buf_t;
tdev_buf_t tdev_buf_alloc(int device, size_t bytes);
void tdev_buf_free(int device, tdev_buf_t b);
/* How many device copies the backend made (to host, from host). */
extern unsigned long tdev_copies_in, tdev_copies_out;

#endif
