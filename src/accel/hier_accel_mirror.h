/* hier_accel_mirror.h: a device buffer's span copied whole into host memory
 * and back, for the calls whose layout only the MPI library can walk (a
 * non-contiguous datatype): the glue gives the span, the datatype engine
 * then works on the host copy, and no CPU instruction touches the device. */
#ifndef HIER_ACCEL_MIRROR_H
#define HIER_ACCEL_MIRROR_H

#include <stddef.h>

#include "accel/hier_accel.h"

typedef struct {
    const hier_accel_backend_t *backend; /* NULL: host memory, nothing mirrored */
    void *dev;                           /* the span's first byte on the device */
    void *host;                          /* and its copy */
    size_t span;
} hier_accel_mirror_t;

/* [first, first + span): device memory is copied into a fresh host buffer
 * (m->backend set); host memory is left alone (m->backend NULL). */
hier_status_t hier_accel_mirror_in(void *first, size_t span, hier_accel_mirror_t *m);
/* The same without the copy: the host buffer made, filled later (a
 * buffer whose bytes are only a result, or a persistent call's, filled at
 * each start). */
hier_status_t hier_accel_mirror_make(void *first, size_t span, hier_accel_mirror_t *m);
/* Bytes [off, off + len) of the span copied in again from the device. */
hier_status_t hier_accel_mirror_fill(const hier_accel_mirror_t *m, size_t off, size_t len);
/* The host copy back to the device (a receive buffer, after the call): all
 * of it, or its first len bytes. */
hier_status_t hier_accel_mirror_out(const hier_accel_mirror_t *m);
hier_status_t hier_accel_mirror_out_first(const hier_accel_mirror_t *m, size_t len);
/* Where a byte of the span lies in the host copy (or itself, unmirrored). */
void *hier_accel_mirror_at(const hier_accel_mirror_t *m, void *dev_addr);
void hier_accel_mirror_free(hier_accel_mirror_t *m);

#endif
