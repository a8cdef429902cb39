/* hier_cma.h: single copy between processes of one node through the kernel
 * (cross-memory attach: process_vm_readv). Needs ptrace-level permission on
 * the peer (same user; Yama ptrace_scope 0 or a parent-child relation), so it
 * is probed once per communicator and used only when every rank can. */
#ifndef HIER_CMA_H
#define HIER_CMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/hier_status.h"

/* This process's probe word: where it is, and the random cookie it holds. */
uint64_t hier_cma_probe_addr(void);
uint64_t hier_cma_cookie(void);
/* Can this process read `pid`'s probe word at `addr`, and does it hold
 * `cookie` (so `pid` is the process that published it, not a namesake in
 * another PID namespace)? */
hier_status_t hier_cma_probe(pid_t pid, uint64_t addr, uint64_t cookie);
/* Read len bytes at remote address `addr` of process `pid` into `dst`. */
hier_status_t hier_cma_read(pid_t pid, uint64_t addr, void *dst, size_t len);

#endif
