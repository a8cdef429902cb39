/* hier_proc.h: the process context: what the process has once, whatever its communicators (hier_proc.c). */
#ifndef HIER_PROC_H
#define HIER_PROC_H

#include "comm/hier_comm_state.h"
#include "net/hier_fabric.h"

/* Progress for every wait: Open MPI's, and the endpoint's when it is open (hier_chan_poll, which polls it alone
 * between Open MPI's: HIER_WAIT_PROGRESS_TURNS). */
void hier_proc_progress(void);
void hier_proc_set_progress(hier_progress_fn_t progress);
/* The process's endpoint, opened at the first call that needs it (NULL when none works). */
hier_fabric_t *hier_proc_fabric(void);
/* The endpoint if it is open (never opens it). */
hier_fabric_t *hier_proc_fabric_open(void);
/* Whether opening it was tried and failed (no usable provider). */
int hier_proc_fabric_failed(void);
/* fabric_warmup: start opening the endpoint in a thread of hier's (once; at fabric_open_min). Ready: it is open, or
 * hier_proc_fabric opens it in the foreground (fabric_warmup 0, hier_fi_shared, or no thread to be had). */
void hier_proc_fabric_warm(void);
int hier_proc_fabric_ready(void);
/* Whether libfabric was in the process before hier (net/hier_fi.h) and the MPI library drives it (an ofi MTL or
 * BTL): its owner calls it from MPI's threads without locks, so hier's own threads leave it alone. */
int hier_proc_fabric_shared(void);
/* What the glue knows of the MPI library: it drives libfabric (1, assumed until said) or not. */
void hier_proc_set_fabric_driven(int driven);
/* Where the node's ranks run (NUMA domains in local order; mine is [me]), to give each its nearest NICs: said by
 * the first communicator spanning nodes, before its first hier_proc_fabric. */
void hier_proc_fabric_place(const int32_t *numa, int nlocal, int me);
/* A getter of the MPI library's own hwloc topology (hier_topo_adopt), asked at the first set-up instead of loading
 * one; valid until hier_proc_release. No getter, or NULL from it: the core loads its own. */
void hier_proc_lend_topology(void *(*get)(void));
/* This rank's NUMA domain (hwloc and its binding at the first call, or the simulation parameter), -1 unknown. */
int hier_proc_my_numa(int local_index);
/* Where this rank's NICs should be: its accelerator's NUMA domain where a backend names it, else hier_proc_my_numa. */
int hier_proc_nic_numa(int local_index);
/* The machine's online CPUs (not this process's affinity), <= 0 unknown. */
long hier_proc_cpus(void);
/* The segment budget: bytes of segments this process keeps mapped at most. */
size_t hier_proc_shm_budget(void);

/* Call before hier starts a thread: at exit hier's threads are stopped and joined first (registered once); `stop`
 * (NULL: none) stops the thread about to start. */
void hier_proc_threads_guard(void (*stop)(void));
/* Release everything the process holds (pools, channels, the endpoint, the topology). */
void hier_proc_release(void);

#endif
