/* hier_pml.h: links over Open MPI's own point-to-point (the PML), hier's transport between nodes until a
 * communicator's libfabric endpoints are open on every rank, or for good where they cannot be (docs/design.md,
 * "Between nodes": Two transports). One link per communicator and peer rank (hier_link_pml); a mailbox is a tag,
 * so its messages arrive in order. A message is one MPI message (a 32-byte header, then the segment copied into a
 * buffer of the link's); a receive awaits its bytes, and a longer message is a mismatch, never taken for it. */
#ifndef HIER_PML_H
#define HIER_PML_H

#include <stddef.h>
#include <stdint.h>

#include "base/hier_status.h"
#include "net/hier_link.h"

#define HIER_PML_MBOXES 4 /* mailboxes of a link: one per run in flight (exec/hier_run.h: HIER_RUN_DEPTH_MAX) */
#define HIER_PML_SENDS 8 /* sends in flight per link; the next waits for the oldest */

/* test's answer for a receive that met a longer message (the request is freed). */
#define HIER_PML_TRUNCATED (-2)

/* What the glue lends: nonblocking point-to-point on the communicator, with no progress of its own. */
typedef struct {
    /* 0 posted (*req_p), negative failed */
    int (*isend)(const void *buf, size_t len, int to, uint32_t mbox, void *arg, void **req_p);
    int (*irecv)(void *buf, size_t len, int from, uint32_t mbox, void *arg, void **req_p);
    /* 1 over (freed; a receive's bytes in *len_p), 0 not yet, HIER_PML_TRUNCATED, or another negative: failed
     * (freed). Needs the request alone: it may be asked after the communicator is gone. */
    int (*test)(void *req, size_t *len_p);
    /* a posted receive no longer wanted: cancelled, and freed */
    void (*cancel)(void *req);
    void *arg;
} hier_pml_ops_t;

typedef struct hier_pml hier_pml_t;

/* The bytes of a link: its owner allocates them (the set-up makes its memory before anything can fail). */
size_t hier_pml_size(void);
/* A link to communicator rank `peer`, segments of `seg` bytes at most (a multiple of 64); ops stay the caller's.
 * Its buffers are made when first used. */
void hier_pml_init(hier_pml_t *link, const hier_pml_ops_t *ops, int peer, size_t seg);
/* Receives still posted are cancelled; sends in flight keep their buffers until the PML is done with them (freed
 * by a later init or fini, or at hier_pml_finalize). */
void hier_pml_fini(hier_pml_t *link);
/* The process ends: what closed links left in flight is let go. */
void hier_pml_finalize(void);
/* Bytes of buffers the link holds. */
size_t hier_pml_bytes(const hier_pml_t *link);

extern const hier_link_ops_t hier_link_pml;

#endif
