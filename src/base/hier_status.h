/* hier_status.h: the one status type of the core library. */
#ifndef HIER_STATUS_H
#define HIER_STATUS_H

#define HIER_EXPORT __attribute__((visibility("default")))

/* 0 is success, negatives are errors; the positives say why nothing ran
 * yet, one meaning each. */
typedef enum {
    HIER_IN_PROGRESS = 1,        /* a run or a request that has not ended: look again */
    HIER_NOT_READY = 2,          /* what the call needs is not made yet (a segment, the peers' endpoints) */
    HIER_ALONE = 3,              /* a communicator of one rank: nothing to run, its result is its input */
    HIER_OK = 0,
    HIER_ERR_NOT_SUPPORTED = -1, /* caller should use its fallback */
    HIER_ERR_NO_MEMORY = -2,
    HIER_ERR_INVALID_ARG = -3,
    HIER_ERR_SHM = -4,           /* shared-memory segment could not be made or mapped */
    HIER_ERR_PEER_DEAD = -5,     /* a peer process exited mid-collective */
    HIER_ERR_TIMEOUT = -6,
    HIER_ERR_TOPOLOGY = -7,
    HIER_ERR_INTERNAL = -8,
    HIER_ERR_BUFFER = -9,        /* a buffer the call cannot use: NULL for data, past its device allocation */
    HIER_ERR_MISMATCH = -10,     /* the ranks called different collectives (signatures differ) */
} hier_status_t;

const char *hier_status_str(hier_status_t status);
/* Whether a call that failed so is abandoned at once (its peers cannot be
 * waited for: dead, stuck, or running another call), rather than kept to
 * its barriers so every rank returns the error together. */
static inline int hier_status_abandons(hier_status_t status)
{
    return status == HIER_ERR_PEER_DEAD || status == HIER_ERR_TIMEOUT || status == HIER_ERR_MISMATCH;
}

/* CHECK_GOTO: run call; on error keep its status in st and jump to label. */
#define HIER_CHECK_GOTO(call, label, st) \
    do {                                 \
        (st) = (call);                   \
        if ((st) < 0) goto label;        \
    } while (0)

#endif
