/* fabric_reap.h: test hygiene for forked processes that die without closing
 * a libfabric endpoint (on purpose, or killed on a timeout). */
#ifndef FABRIC_REAP_H
#define FABRIC_REAP_H

#include <sys/types.h>

/* Remove what libfabric's shm provider left in /dev/shm for process `pid`
 * (regions named "<pid>:..."). With pid_max at 32768 pids come round again
 * soon, and a stale region makes the next owner of the pid fail fi_enable
 * with EBUSY. Call it only after the process is gone. */
void fabric_reap(pid_t pid);

#endif
