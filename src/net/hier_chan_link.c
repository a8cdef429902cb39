/* hier_chan_link.c: libfabric channels as the executor's links
 * (hier_link.h): the table alone, in a file of its own so that tests may
 * wrap the channel calls at link time (tests/unit/test_pipe.c). */
#include "net/hier_chan.h"

const hier_link_ops_t hier_link_chan = {
    .name = "net",
    .segment = hier_chan_segment,
    .try_send = hier_chan_try_send_from,
    .sent_done = hier_chan_sent_done,
    .status = hier_chan_status,
    .try_recv = hier_chan_try_recv,
    .release = hier_chan_release,
    .report = hier_chan_report,
    .poll = hier_chan_progress,
    .wait_turn = hier_chan_wait_turn,
};
