/* hier_link.c: what every transport's waits share (hier_link.h). */
#include "net/hier_link.h"

#include "base/hier_log.h"
#include "base/hier_wait.h"

hier_status_t hier_link_clock_read(uint64_t *still_since, const char *what)
{
    if (!*still_since) {
        *still_since = hier_wait_now_ms();
    } else if (hier_wait_expired(*still_since)) {
        HIER_ERROR("inter-node transfer: no progress for %d s while %s", hier_wait_timeout_s(), what);
        return HIER_ERR_TIMEOUT;
    }
    return HIER_OK;
}
