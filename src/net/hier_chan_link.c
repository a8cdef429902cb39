/* hier_chan_link.c: libfabric channels as the executor's links
 * (hier_link.h). A file of its own so that tests may wrap the channel
 * calls at link time (tests/unit/test_pipe.c). */
#include "net/hier_chan.h"

static size_t hier_chan_link_segment(const void *link, size_t len)
{
    return hier_chan_segment(link, len);
}

static hier_status_t hier_chan_link_try_send(void *link, uint32_t mbox, uint32_t tag, const void *data, size_t len,
                                             hier_fabric_mr_t *mr, hier_sig_t sig, int *sent_p, uint64_t *msg_p)
{
    return hier_chan_try_send_from(link, mbox, tag, data, len, mr, sig, sent_p, msg_p);
}

static int hier_chan_link_sent_done(const void *link, uint64_t msg)
{
    return hier_chan_sent_done(link, msg);
}

static hier_status_t hier_chan_link_status(const void *link)
{
    return hier_chan_status(link);
}

/* (a channel's slots bound every message: `expect` is checked by the executor) */
static hier_status_t hier_chan_link_try_recv(void *link, uint32_t mbox, size_t expect, hier_link_msg_t *msg,
                                             int *got_p)
{
    (void)expect;
    return hier_chan_try_recv(link, mbox, msg, got_p);
}

static hier_status_t hier_chan_link_release(void *link, hier_link_msg_t *msg)
{
    return hier_chan_release(link, msg);
}

static void hier_chan_link_report(const void *link, const char *why)
{
    hier_chan_report(link, why);
}

static hier_status_t hier_chan_link_poll(void *ctx)
{
    return hier_chan_progress(ctx);
}

static hier_status_t hier_chan_link_wait_turn(void *ctx, void (*progress)(void), int spin, unsigned every,
                                              unsigned turn, uint64_t *still_since, const char *what)
{
    return hier_chan_wait_turn(ctx, progress, spin, every, turn, still_since, what);
}

const hier_link_ops_t hier_link_chan = {
    .name = "net",
    .segment = hier_chan_link_segment,
    .try_send = hier_chan_link_try_send,
    .sent_done = hier_chan_link_sent_done,
    .status = hier_chan_link_status,
    .try_recv = hier_chan_link_try_recv,
    .release = hier_chan_link_release,
    .report = hier_chan_link_report,
    .poll = hier_chan_link_poll,
    .wait_turn = hier_chan_link_wait_turn,
};
