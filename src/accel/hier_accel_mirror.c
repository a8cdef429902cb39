/* hier_accel_mirror.c: see hier_accel_mirror.h. */
#include "accel/hier_accel_mirror.h"

#include <stdlib.h>

#include "base/hier_log.h"

hier_status_t hier_accel_mirror_in(void *first, size_t span, hier_accel_mirror_t *m)
{
    hier_accel_buf_t b;
    *m = (hier_accel_mirror_t){0};
    if (!first || hier_accel_classify(first, 1, &b) != HIER_OK || !hier_accel_is_device(&b)) return HIER_OK;
    void *host = malloc(span ? span : 1);
    if (!host) {
        HIER_ERROR("no memory to mirror %zu bytes of device memory", span);
        return HIER_ERR_NO_MEMORY;
    }
    hier_status_t st = b.backend->to_host(host, first, span);
    if (st != HIER_OK) {
        HIER_ERROR("cannot copy %zu bytes of %s device memory to the host: %s", span, b.backend->name,
                   hier_status_str(st));
        free(host);
        return st;
    }
    *m = (hier_accel_mirror_t){.backend = b.backend, .dev = first, .host = host, .span = span};
    return HIER_OK;
}

hier_status_t hier_accel_mirror_out(const hier_accel_mirror_t *m)
{
    if (!m->backend) return HIER_OK;
    hier_status_t st = m->backend->from_host(m->dev, m->host, m->span);
    if (st != HIER_OK)
        HIER_ERROR("cannot copy %zu bytes back to %s device memory: %s", m->span, m->backend->name,
                   hier_status_str(st));
    return st;
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
