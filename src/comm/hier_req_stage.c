/* hier_req_stage.c: a nonblocking or persistent call's device buffers go
 * through host mirrors, whole: the input is copied in when the call starts
 * (a local copy: it waits for no peer), the host collective runs on the
 * mirrors as a request, and the result is copied out when it ends, before
 * the caller is told. Each rank stages its own buffers or not: the host
 * collective is the same call on every rank whatever its memory, so ranks
 * need not agree. (The blocking calls pipeline through one buffer per
 * communicator, exec/hier_stage.c; a request cannot wait for the call ahead
 * of it to free that buffer, so it has mirrors of its own, as large as its
 * buffers.) */
#include "comm/hier_req_stage.h"

hier_status_t hier_req_stage_make(const hier_req_bufs_t *b, hier_req_stage_t *stage_p)
{
    hier_accel_buf_t sb, rb;
    hier_req_stage_t s = {.in_off = b->in_off, .in_len = b->in_len, .out_len = b->out_len};
    hier_status_t st = hier_accel_classify(b->sbuf, b->sbuf ? b->sbytes : 0, &sb);
    if (st == HIER_OK) st = hier_accel_classify(b->rbuf, b->rbytes, &rb);
    if (st == HIER_OK && hier_accel_is_device(&sb)) st = hier_accel_mirror_make((void *)b->sbuf, b->sbytes, &s.s);
    if (st == HIER_OK && hier_accel_is_device(&rb)) st = hier_accel_mirror_make(b->rbuf, b->rbytes, &s.r);
    if (st != HIER_OK) {
        hier_req_stage_free(&s);
        return st;
    }
    *stage_p = s;
    return HIER_OK;
}

hier_status_t hier_req_stage_in(const hier_req_stage_t *s)
{
    hier_status_t st = hier_accel_mirror_fill(&s->s, 0, s->s.span);
    return st == HIER_OK ? hier_accel_mirror_fill(&s->r, s->in_off, s->in_len) : st;
}

hier_status_t hier_req_stage_out(const hier_req_stage_t *s)
{
    return hier_accel_mirror_out_first(&s->r, s->out_len);
}

void hier_req_stage_free(hier_req_stage_t *s)
{
    hier_accel_mirror_free(&s->s);
    hier_accel_mirror_free(&s->r);
}
