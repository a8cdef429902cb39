/* chan_wait.c: see chan_wait.h. */
#include "chan_wait.h"

#include <time.h>

#define TCHAN_SPIN 64

hier_status_t tchan_send(hier_fabric_t *fab, hier_chan_t *ch, uint32_t mbox, uint32_t tag, const void *data,
                         size_t len, unsigned long *waited_p)
{
    uint64_t still_since = 0;
    for (unsigned i = 0;; i++) {
        int sent;
        hier_status_t st = hier_chan_try_send(ch, mbox, tag, data, len, &sent);
        if (st != HIER_OK || sent) return st;
        if (waited_p && i == 0) (*waited_p)++;
        st = hier_chan_wait_turn(fab, NULL, TCHAN_SPIN, 1, i, &still_since, "test: waiting to send");
        if (st != HIER_OK) return st;
    }
}

hier_status_t tchan_recv(hier_fabric_t *fab, hier_chan_t *ch, uint32_t mbox, hier_link_msg_t *msg)
{
    uint64_t still_since = 0;
    for (unsigned i = 0;; i++) {
        int got;
        hier_status_t st = hier_chan_try_recv(ch, mbox, 0, msg, &got);
        if (st != HIER_OK || got) return st;
        st = hier_chan_wait_turn(fab, NULL, TCHAN_SPIN, 1, i, &still_since, "test: waiting for a message");
        if (st != HIER_OK) return st;
    }
}
