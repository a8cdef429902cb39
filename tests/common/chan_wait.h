/* chan_wait.h: blocking sends and receives on a channel, for tests: the
 * core only ever tries (hier_chan_try_send, hier_chan_try_recv) and drives
 * progress between attempts itself. */
#ifndef CHAN_WAIT_H
#define CHAN_WAIT_H

#include "net/hier_chan.h"

/* Send, polling the endpoint while the channel has no room (a minute at
 * most). *waited_p (may be NULL) counts the sends that could not go at once. */
hier_status_t tchan_send(hier_fabric_t *fab, hier_chan_t *ch, uint32_t mbox, uint32_t tag, const void *data,
                         size_t len, unsigned long *waited_p);
/* The next message of `mailbox`, polling until it is there (a minute at most). */
hier_status_t tchan_recv(hier_fabric_t *fab, hier_chan_t *ch, uint32_t mbox, hier_link_msg_t *msg);

#endif
