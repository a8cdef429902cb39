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

/* In a freshly forked process, before it opens an endpoint: whatever lies
 * in /dev/shm under its own pid is stale by definition (left by a process
 * of an earlier test, or another program, that died with the pid). */
void fabric_reap_self(void);

#endif
