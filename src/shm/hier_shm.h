/* hier_shm.h: the per-node shared-memory segment of one communicator.
 *
 * Layout (a wire format between processes; bump HIER_SHM_VERSION on change):
 *   [0, 128)                      hier_shm_header_t
 *   [128, 128 + 128 n)            one hier_shm_ctl_t per local rank, each on its
 *                                 own 128-byte line pair (no false sharing, and
 *                                 clear of the adjacent-line prefetcher)
 *   [ll_off + r * 2 * LL_AREA)    rank r's two low-latency areas (hier_comm_ll.c)
 *   [data_off + r * slot_stride)  rank r's slot: two pipeline buffers of
 *                                 chunk_bytes each, page aligned, allocated
 *                                 (posix_fallocate) by rank r itself so the
 *                                 pages sit on its NUMA node (first touch)
 */
#ifndef HIER_SHM_H
#define HIER_SHM_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/hier_status.h"

#define HIER_SHM_MAGIC 0x72656968u /* "hier" */
#define HIER_SHM_VERSION 3u
/* Low-latency area: a header word, then up to 8312 payload bytes. */
#define HIER_SHM_LL_WORDS 1025
#define HIER_SHM_LL_AREA (HIER_SHM_LL_WORDS * 8 + 120) /* rounded to a line pair: 8320 */
#define HIER_SHM_LINE 128

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t nranks;
    uint32_t reserved;
    uint64_t chunk_bytes;
    uint64_t data_off;
    uint64_t slot_stride;
    uint64_t total_bytes;
    uint8_t pad[HIER_SHM_LINE - 48];
} hier_shm_header_t;
static_assert(sizeof(hier_shm_header_t) == HIER_SHM_LINE, "header is one line pair");

typedef struct {
    /* Line 0, polled by every peer: barriers this rank has entered, and how
     * many peers sleep on it (futex on its low 32 bits) waiting for the next. */
    _Atomic uint64_t phase;
    _Atomic uint32_t sleepers;
    uint8_t pad0[64 - 12];
    /* Line 1. Written once by the owner before the attach agreement: */
    int32_t pid;
    int32_t numa;               /* the owner's NUMA domain, -1 unknown */
    uint64_t cma_probe_addr;    /* where the owner keeps its cookie, for the single-copy probe */
    uint64_t cma_cookie;
    /* Per single-copy call, before its first barrier: where the owner's input
     * and receive buffers are. */
    uint64_t input_addr;
    uint64_t recv_addr;
    /* Set when a step failed here; peers check it after the call's last barrier. */
    _Atomic uint32_t error;
    uint8_t pad1[64 - 44];
} hier_shm_ctl_t;
static_assert(offsetof(hier_shm_ctl_t, pid) == 64, "per-call fields stay off the polled line");
static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "inter-process atomics must be lock-free");
static_assert(sizeof(hier_shm_ctl_t) == HIER_SHM_LINE, "control line is one line pair");
static_assert(HIER_SHM_LL_AREA % HIER_SHM_LINE == 0, "low-latency areas start on line pairs");

/* What waiting does once spinning stops paying: the glue passes opal_progress. */
typedef void (*hier_progress_fn_t)(void);

typedef struct {
    int nranks;
    int me;
    int spin_count;
    hier_progress_fn_t progress;
    /* Ranks outnumber cores: a barrier wait that outlasts a few yields
     * sleeps (futex, briefly) so the ranks doing work get the CPU. */
    int sleep;
} hier_shm_wait_t;

typedef struct hier_shm hier_shm_t;

/* Size of a segment for nranks slots of 2 x chunk_bytes. */
size_t hier_shm_segment_size(int nranks, size_t chunk_bytes);

/* Rank 0 creates the segment file; `name` (at most HIER_SHM_NAME_MAX bytes)
 * is what the others attach to. dir == NULL or "" means POSIX shm_open. */
#define HIER_SHM_NAME_MAX 256
hier_status_t hier_shm_create(const char *dir, const char *name, int nranks, size_t chunk_bytes,
                              hier_shm_t **shm_p);
hier_status_t hier_shm_attach(const char *dir, const char *name, int nranks, int me, size_t chunk_bytes,
                              hier_shm_t **shm_p);
/* Reserve and touch this rank's own slot and publish its pid and NUMA domain. */
hier_status_t hier_shm_claim(hier_shm_t *shm, int me, int numa);
/* NUMA domain a rank published in hier_shm_claim (valid after the agreement). */
int hier_shm_peer_numa(hier_shm_t *shm, int rank);
/* The control line of a rank, for the single-copy fields. */
hier_shm_ctl_t *hier_shm_ctl(hier_shm_t *shm, int rank);
/* Remove the name; the mapping stays valid. Called once every rank has attached. */
void hier_shm_unlink(hier_shm_t *shm);
void hier_shm_detach(hier_shm_t *shm);

uint8_t *hier_shm_slot(hier_shm_t *shm, int rank);
size_t hier_shm_parity_stride(const hier_shm_t *shm);

/* Enter the next barrier and wait until every local rank has entered it.
 * HIER_ERR_PEER_DEAD if a peer process has exited while we wait. */
hier_status_t hier_shm_barrier(hier_shm_t *shm, const hier_shm_wait_t *wait);

/* Wait until ready(word, arg) holds for a word that `rank` writes: spin, then
 * yield and drive progress, checking now and then that `rank` is alive. */
typedef int (*hier_shm_ready_fn_t)(uint64_t word, uint64_t arg);
hier_status_t hier_shm_wait(hier_shm_t *shm, int rank, _Atomic uint64_t *word, hier_shm_ready_fn_t ready,
                            uint64_t arg, const hier_shm_wait_t *wait);

/* Rank's low-latency area of this parity: HIER_SHM_LL_WORDS words. */
_Atomic uint64_t *hier_shm_ll_area(hier_shm_t *shm, int rank, int parity);

#endif
