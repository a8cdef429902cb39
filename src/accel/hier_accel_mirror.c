/* hier_accel_mirror.c: see hier_accel_mirror.h. */
#include "accel/hier_accel_mirror.h"

#include <stdlib.h>

#include "base/hier_log.h"

hier_status_t hier_accel_mirror_make(void *first, size_t span, hier_accel_mirror_t *m)
{
    hier_accel_buf_t b;
    *m = (hier_accel_mirror_t){0};
    if (!first || hier_accel_classify(first, 1, &b) != HIER_OK || !hier_accel_is_device(&b)) return HIER_OK;
    void *host = malloc(span ? span : 1);
    if (!host) {
        HIER_ERROR("no memory to mirror %zu bytes of device memory", span);
        return HIER_ERR_NO_MEMORY;
    }
    *m = (hier_accel_mirror_t){.backend = b.backend, .dev = first, .host = host, .span = span};
    return HIER_OK;
}

hier_status_t hier_accel_mirror_fill(const hier_accel_mirror_t *m, size_t off, size_t len)
{
    if (!m->backend || !len) return HIER_OK;
    hier_status_t st = m->backend->to_host((char *)m->host + off, (const char *)m->dev + off, len);
    if (st != HIER_OK)
        HIER_ERROR("cannot copy %zu bytes of %s device memory to the host: %s", len, m->backend->name,
                   hier_status_str(st));
    return st;
}

hier_status_t hier_accel_mirror_in(void *first, size_t span, hier_accel_mirror_t *m)
{
    hier_status_t st = hier_accel_mirror_make(first, span, m);
    if (st == HIER_OK && (st = hier_accel_mirror_fill(m, 0, span)) != HIER_OK) hier_accel_mirror_free(m);
    return st;
}

hier_status_t hier_accel_mirror_out_first(const hier_accel_mirror_t *m, size_t len)
{
    if (!m->backend || !len) return HIER_OK;
    hier_status_t st = m->backend->from_host(m->dev, m->host, len);
    if (st != HIER_OK)
        HIER_ERROR("cannot copy %zu bytes back to %s device memory: %s", len, m->backend->name, hier_status_str(st));
    return st;
}

hier_status_t hier_accel_mirror_out(const hier_accel_mirror_t *m)
{
    return hier_accel_mirror_out_first(m, m->span);
}

void *hier_accel_mirror_at(const hier_accel_mirror_t *m, void *dev_addr)
{
    return m->backend ? (char *)m->host + ((char *)dev_addr - (char *)m->dev) : dev_addr;
}

void hier_accel_mirror_free(hier_accel_mirror_t *m)
{
    if (m->backend) free(m->host);
    *m = (hier_accel_mirror_t){0};
}
