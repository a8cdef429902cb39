/* hier_shm.h: the shared-memory segments of a node's ranks: the node segment (control lines, low-latency lines,
 * small slots), made at a communicator's first collective, and the pipeline segment (a slot of `nbufs` pipeline
 * buffers per rank), made at the first call too large for the small slots. Both are wire formats between
 * processes (bump HIER_SHM_VERSION on any change); their layouts, and why, are docs/design.md's "The segments".
 * Every slot is allocated (posix_fallocate) by its owner; files are created under a fresh, unpredictable name
 * (O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode 0600) and unlinked once every rank has mapped them. */
#ifndef HIER_SHM_H
#define HIER_SHM_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/hier_sig.h"
#include "base/hier_status.h"
#include "base/hier_wait.h"

#define HIER_SHM_MAGIC 0x72656968u /* "hier" */
#define HIER_SHM_VERSION 11u
#define HIER_SHM_LINE 128
/* Low-latency payloads: HIER_SHM_LL_HEAD bytes in the header's line (a
 * multiple of every element size, so no element straddles), the rest in a
 * tail of HIER_SHM_LL_TAIL. */
#define HIER_SHM_LL_HEAD 96
#define HIER_SHM_LL_TAIL 8192
#define HIER_SHM_NAME_MAX 64

typedef enum { HIER_SHM_NODE = 1, HIER_SHM_PIPE = 2 } hier_shm_kind_t;

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t kind;      /* hier_shm_kind_t */
    uint32_t nranks;
    uint64_t chunk_bytes;
    uint64_t slots_off;
    uint64_t slot_stride;
    uint64_t total_bytes;
    uint32_t nbufs;     /* pipeline buffers per slot */
    uint32_t pad0;
    uint8_t pad[HIER_SHM_LINE - 56];
} hier_shm_header_t;
static_assert(sizeof(hier_shm_header_t) == HIER_SHM_LINE, "header is one line pair");

/* Node segment: the local leader says here which pipeline segment the
 * node's ranks map (comm/hier_comm_node.c); seq counts its offers. */
typedef struct {
    _Atomic uint64_t seq;
    uint64_t chunk_bytes;
    uint32_t fresh;      /* made for this offer (else recycled: the others take it from their pools) */
    char name[HIER_SHM_NAME_MAX];
    uint8_t pad[HIER_SHM_LINE - 20 - HIER_SHM_NAME_MAX];
} hier_shm_offer_t;
static_assert(sizeof(hier_shm_offer_t) == HIER_SHM_LINE, "offer is one line pair");

typedef struct {
    /* Line 0, polled by every peer: barriers this rank has entered, and how
     * many peers sleep on it (futex on its low 32 bits) waiting for the next;
     * why it left the communicator's calls, if it did (minus the status: it
     * will not come back, its peers stop waiting for it); and the signatures
     * of its last two calls, by call parity (written at a call's start), so
     * a peer waiting for it can tell a slow rank from one in another call. */
    _Atomic uint64_t phase;
    _Atomic uint32_t sleepers;
    _Atomic int32_t left;
    _Atomic uint64_t sig[2][2]; /* [call & 1] = {count, word} (base/hier_sig.h) */
    /* Set (to its signature's word) while the rank is at an agreement inside
     * its call (comm/hier_comm_node.c: hier_node_agree). */
    _Atomic uint64_t agreeing;
    /* Set while the rank takes a recycled segment into a new communicator,
     * until it has cleared its signatures: what they say then is a past
     * communicator's, so a peer waiting for it takes it as late. */
    _Atomic uint64_t joining;
    /* Line 1, written by the owner. Once, before the set-up's agreement: */
    uint64_t cma_probe_addr;    /* where the owner keeps its cookie, for the single-copy probe */
    uint64_t cma_cookie;
    int32_t pid;
    /* Per call: set when a step failed here; peers check it after the
     * call's last barrier. */
    _Atomic uint32_t error;
    /* Per single-copy call, before its first barrier: where the owner's input is. */
    uint64_t input_addr;
    uint8_t pad1[64 - 32];
} hier_shm_ctl_t;
static_assert(offsetof(hier_shm_ctl_t, cma_probe_addr) == 64, "per-call fields stay off the polled line");
static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "inter-process atomics must be lock-free");
static_assert(sizeof(hier_shm_ctl_t) == HIER_SHM_LINE, "control line is one line pair");
/* A low-latency line: the header word, HIER_SHM_LL_HEAD payload bytes from
 * a 16-byte boundary (long double and the complex types need it), then the
 * call's signature (read with the payload: no extra line per call). */
#define HIER_SHM_LL_HEAD_OFF 16
#define HIER_SHM_LL_SIG_OFF (HIER_SHM_LL_HEAD_OFF + HIER_SHM_LL_HEAD)
static_assert(HIER_SHM_LL_SIG_OFF + 16 <= HIER_SHM_LINE, "a low-latency header, its head and signature share a line pair");
static_assert(offsetof(hier_shm_ctl_t, sig) == 16, "signatures on the polled line, after phase, sleepers, left");
static_assert(HIER_SHM_LL_HEAD_OFF % 16 == 0 && HIER_SHM_LINE % 16 == 0, "the head is aligned for every element type");
static_assert(HIER_SHM_LL_HEAD % 32 == 0 && HIER_SHM_LL_HEAD % 12 == 0, "no element straddles head and tail");

typedef struct {
    hier_shm_kind_t kind;
    int nranks;
    size_t chunk_bytes; /* per pipeline buffer */
    unsigned nbufs;     /* pipeline buffers a slot holds (0: HIER_SHM_BUFS); a node segment's hold two */
} hier_shm_shape_t;

/* A slot's pipeline buffers where the shape says nothing else. */
#define HIER_SHM_BUFS 2u

/* A segment as this process maps it (process-local: not in the segment). */
typedef struct hier_shm {
    uint8_t *base;
    size_t size;
    hier_shm_shape_t shape;
    uint64_t my_phase;        /* barriers this process has entered */
    uint64_t ll_seq;          /* low-latency calls this process made over the segment */
    uint64_t id;              /* (hier_shm_id) */
    char name[HIER_SHM_NAME_MAX];
    char path[HIER_SHM_NAME_MAX + 4096];
    int posix;                /* path is a shm_open name, not a file path */
    int linked;
    int fd;                   /* open until the owner's slot is allocated (hier_shm_claim) */
} hier_shm_t;

static inline hier_shm_header_t *hier_shm_header(const hier_shm_t *shm)
{
    return (hier_shm_header_t *)shm->base;
}

/* Bytes of a segment of this shape. */
size_t hier_shm_size(const hier_shm_shape_t *shape);
/* Bytes of every segment this process has mapped now (the budget's measure). */
size_t hier_shm_mapped_total(void);

/* Create a segment under a fresh name (hier_shm_name), in `dir` (NULL or "":
 * POSIX shm_open, /dev/shm). */
hier_status_t hier_shm_create(const char *dir, const hier_shm_shape_t *shape, hier_shm_t **shm_p);
/* Map the segment another rank created; HIER_ERR_SHM if it is not of this shape. */
hier_status_t hier_shm_attach(const char *dir, const char *name, const hier_shm_shape_t *shape, hier_shm_t **shm_p);
const char *hier_shm_name(const hier_shm_t *shm);
/* What tells it from every other segment of this node's live processes
 * (its creator's pid and creation number), for set-ups to compare. */
uint64_t hier_shm_id(const hier_shm_t *shm);
const hier_shm_shape_t *hier_shm_shape(const hier_shm_t *shm);
/* Allocate rank me's own slot and close the file; a node segment also
 * publishes the rank's pid and single-copy probe. Once per segment and rank. */
hier_status_t hier_shm_claim(hier_shm_t *shm, int me);
/* Remove the name; the mapping stays valid. Once every rank has mapped it. */
void hier_shm_unlink(hier_shm_t *shm);
void hier_shm_detach(hier_shm_t *shm); /* NULL is fine */

/* Rank's slot: buffer 0, then buffer b b * buf_stride bytes later. */
uint8_t *hier_shm_slot(hier_shm_t *shm, int rank);
static inline size_t hier_shm_buf_stride(const hier_shm_t *shm)
{
    return hier_shm_header(shm)->chunk_bytes;
}
/* Its pipeline buffers per slot. */
static inline unsigned hier_shm_nbufs(const hier_shm_t *shm)
{
    return hier_shm_header(shm)->nbufs;
}

/* ---- node segments only ---- */
/* Where the control lines start: after the header and the offer. */
static inline size_t hier_shm_ctl_off(void)
{
    return sizeof(hier_shm_header_t) + sizeof(hier_shm_offer_t);
}
static inline hier_shm_ctl_t *hier_shm_ctl(hier_shm_t *shm, int rank)
{
    return (hier_shm_ctl_t *)(shm->base + hier_shm_ctl_off()) + rank;
}
hier_shm_offer_t *hier_shm_offer(hier_shm_t *shm);
/* Rank's low-latency line of this parity: the header word, then
 * HIER_SHM_LL_HEAD payload bytes at HIER_SHM_LL_HEAD_OFF; and the rest of
 * the payload. */
_Atomic uint64_t *hier_shm_ll_line(hier_shm_t *shm, int rank, int parity);
uint8_t *hier_shm_ll_tail(hier_shm_t *shm, int rank, int parity);
/* This process's count of low-latency calls over the segment (it outlives
 * a communicator when the segment is recycled). */
uint64_t *hier_shm_ll_seq(hier_shm_t *shm);

/* How a rank waits for its node's peers. */
typedef struct {
    int nranks;
    int me;
    int spin_count;
    hier_progress_fn_t progress; /* Open MPI's and the endpoint's, every progress_every turns */
    hier_progress_fn_t poll;     /* the endpoint's alone, the turns between (NULL: none) */
    int progress_every;          /* 1 (0: the same), or crowded HIER_WAIT_PROGRESS_TURNS */
    /* Ranks outnumber cores: a barrier wait that outlasts a few yields
     * sleeps (futex, briefly) so the ranks doing work get the CPU. */
    int sleep;
    /* The call under way (hier_shm_sign), and communicator ranks by local
     * index for messages (NULL: the same). */
    hier_sig_t sig;
    const uint32_t *ranks;
} hier_shm_wait_t;

/* A call starts: its signature goes on my control line (w->sig too); made from the call's fields and returned. */
void hier_shm_sign(hier_shm_t *shm, hier_shm_wait_t *w, hier_sig_t sig);
hier_sig_t hier_shm_sign_call(hier_shm_t *shm, hier_shm_wait_t *w, hier_coll_t coll, uint64_t count, hier_dtype_t dt,
                              hier_op_t op, uint32_t digest, uint64_t call);
/* I leave the communicator's calls for good (why: the status that made me):
 * peers waiting for me stop with it instead of timing out; the segment is
 * not recycled. */
void hier_shm_leave(hier_shm_t *shm, const hier_shm_wait_t *w, hier_status_t why);
/* At a call's end, after a barrier every rank entered in it: every peer ran
 * the same call (HIER_ERR_MISMATCH, logged, if not). */
hier_status_t hier_shm_check_peers(hier_shm_t *shm, const hier_shm_wait_t *w);
/* The barrier phase of each of the node's nranks ranks, as " 12 12 11" into line (for reports). */
void hier_shm_phases(hier_shm_t *shm, int nranks, char *line, size_t len);
/* An agreement inside a call: I am at one (on) or past it; whether every
 * peer is at one in my call too (after a barrier they all entered). */
void hier_shm_agreeing(hier_shm_t *shm, const hier_shm_wait_t *w, int on);
int hier_shm_all_agreeing(hier_shm_t *shm, const hier_shm_wait_t *w);
/* The phase of the next barrier this process enters (hier_shm_wait.c). */
static inline uint64_t hier_shm_phase_next(hier_shm_t *shm)
{
    return ++shm->my_phase;
}
/* A recycled segment coming into a new communicator: I am joining it (my
 * signatures are a past communicator's: peers take me as late), then my
 * signatures are cleared and I have joined. */
void hier_shm_joining(hier_shm_t *shm, int me);
void hier_shm_sign_reset(hier_shm_t *shm, int me);
/* A peer's signature that is not mine, explained in the log: HIER_ERR_MISMATCH. */
hier_status_t hier_shm_sig_mismatch(const hier_shm_wait_t *w, int rank, hier_sig_t theirs);
/* Compare a peer's signature with mine (the compare in the caller, the explanation out of its way). */
static inline hier_status_t hier_shm_sig_compare(const hier_shm_wait_t *w, int rank, hier_sig_t theirs)
{
    return hier_sig_same(theirs, w->sig) ? HIER_OK : hier_shm_sig_mismatch(w, rank, theirs);
}

/* Where a request that waits without blocking stands: the peer it looks at
 * next, and the clocks of the wait's checks (zero-initialised). */
typedef struct {
    int next;
    unsigned looks;
    uint64_t since_ms;
} hier_shm_probe_t;

/* A barrier in parts, for requests: enter it (the phase to wait for), then
 * pass it: wait (block), or look once (HIER_IN_PROGRESS while a peer has
 * not entered it; every HIER_SHM_CHECK_YIELDS looks the checks of a wait);
 * p starts zeroed for each barrier. */
uint64_t hier_shm_barrier_arrive(hier_shm_t *shm, const hier_shm_wait_t *wait);
hier_status_t hier_shm_barrier_pass(hier_shm_t *shm, const hier_shm_wait_t *wait, uint64_t target,
                                    hier_shm_probe_t *p, int block);
/* Enter the next barrier and wait until every local rank has entered it.
 * HIER_ERR_PEER_DEAD if a peer process has exited while we wait,
 * HIER_ERR_MISMATCH if it runs another call, HIER_ERR_TIMEOUT past
 * coll_hier_timeout, or the status a peer left with. */
hier_status_t hier_shm_barrier(hier_shm_t *shm, const hier_shm_wait_t *wait);

/* Wait until a counter that `rank` raises (a barrier's phase, a low-latency header's sequence) reaches
 * `target`: spin, then yield and drive progress, checking now and then that `rank` is alive, in the same
 * call, and has not left (errors as the barrier's). */
hier_status_t hier_shm_wait(hier_shm_t *shm, int rank, _Atomic uint64_t *word, uint64_t target,
                            const hier_shm_wait_t *wait);
/* The same, one look: HIER_OK when reached, HIER_IN_PROGRESS when not yet,
 * or a check's error (p: the checks' clocks, kept between looks). */
hier_status_t hier_shm_test(hier_shm_t *shm, int rank, _Atomic uint64_t *word, uint64_t target,
                            const hier_shm_wait_t *wait, hier_shm_probe_t *p);

#endif
