/* hier_req_stage.h: a request's device buffers, staged whole through host
 * mirrors (hier_req_stage.c). */
#ifndef HIER_REQ_STAGE_H
#define HIER_REQ_STAGE_H

#include <stddef.h>

#include "accel/hier_accel_mirror.h"

/* One call's buffers, as its entry point knows them. */
typedef struct {
    const void *sbuf;           /* NULL: in place */
    void *rbuf;
    size_t sbytes, rbytes;      /* the whole buffers */
    size_t in_off, in_len;      /* in place: the input's bytes within rbuf */
    size_t out_len;             /* the result's bytes, from rbuf's start */
} hier_req_bufs_t;

/* Where a request's data goes through host memory: its input copied in when
 * it starts, its result copied out when it ends, the host collective running
 * on the mirrors between. Nothing mirrored (s.backend and r.backend NULL)
 * when both buffers are host memory. */
typedef struct {
    hier_accel_mirror_t s, r;
    size_t in_off, in_len, out_len;
} hier_req_stage_t;

/* Classify b's buffers and make mirrors of the device ones (not filled):
 * HIER_OK (*stage_p empty when both are host memory); device memory no
 * backend reaches, HIER_ERR_NOT_SUPPORTED; HIER_ERR_NO_MEMORY. */
hier_status_t hier_req_stage_make(const hier_req_bufs_t *b, hier_req_stage_t *stage_p);
static inline int hier_req_staged(const hier_req_stage_t *s)
{
    return s->s.backend || s->r.backend;
}
/* Copy the input in (a start), the result out (an end): nothing when empty. */
hier_status_t hier_req_stage_in(const hier_req_stage_t *s);
hier_status_t hier_req_stage_out(const hier_req_stage_t *s);
void hier_req_stage_free(hier_req_stage_t *s);

#endif
