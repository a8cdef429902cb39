/* hier_wait.h: what every wait of hier shares, in shared memory or on the network: Open MPI's progress between
 * polls (the glue passes opal_progress), and one clock and one timeout (coll_hier_timeout) for a wait that stands
 * still. */
#ifndef HIER_WAIT_H
#define HIER_WAIT_H

#include <stdint.h>

typedef void (*hier_progress_fn_t)(void);

/* Where ranks outnumber cores, a wait past its spin calls Open MPI's progress every this many turns, not every
 * turn (docs/design.md, "Inside a node"; docs/performance.md, "Waits on crowded nodes"). */
#define HIER_WAIT_PROGRESS_TURNS 16

/* Milliseconds on the monotonic clock. */
uint64_t hier_wait_now_ms(void);
/* Whether a wait that has stood still since `since_ms` has run past the timeout (never when it is 0). */
int hier_wait_expired(uint64_t since_ms);
/* The timeout in seconds, for messages. */
int hier_wait_timeout_s(void);

#endif
