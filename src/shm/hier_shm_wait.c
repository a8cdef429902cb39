/* hier_shm_wait.c: how a rank waits for its node's peers (barriers, flags), and what it checks while it waits
 * (docs/design.md, "Inside a node"). A wait spins, then yields driving the caller's progress (where the writer
 * wakes sleepers and ranks outnumber cores, it sleeps after a few yields); now and then it looks at the peer it
 * waits for (hier_shm_wait_check), never within the spin:
 * 1. has it left the communicator's calls? Then stop with its reason;
 * 2. is its process gone without writing what we wait for? Then stop: it died;
 * 3. is it in another call, or ahead, by signature? It will never write what we wait for: a mismatch;
 * 4. has the wait stood still for coll_hier_timeout while the peer is in my call? Then say where every rank
 *    is, and stop (a peer that has not reached the call is late, not stuck: its clock does not run). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/hier_log.h"
#include "shm/hier_shm.h"

/* How often (in yields) a waiting rank looks at the peer it waits for. */
#define HIER_SHM_CHECK_YIELDS 1024
/* Sleeping barrier waits: yields first, then futex sleeps this long at most
 * (a wake-up normally comes first; the bound keeps Open MPI's progress and
 * the checks going). */
#define HIER_SHM_SLEEP_AFTER_YIELDS 8
#define HIER_SHM_SLEEP_NS 200000

/* The low 32 bits of a 64-bit word, as a futex sees them (x86: little endian). */
static uint32_t *hier_shm_futex_word(_Atomic uint64_t *word)
{
    return (uint32_t *)(void *)word;
}

static int hier_shm_rank(const hier_shm_wait_t *w, int local)
{
    return w->ranks ? (int)w->ranks[local] : local;
}

static inline void hier_shm_sign_line(hier_shm_t *shm, hier_shm_wait_t *w, hier_sig_t sig)
{
    _Atomic uint64_t *mine = hier_shm_ctl(shm, w->me)->sig[hier_sig_call(sig) & 1];
    w->sig = sig;
    atomic_store_explicit(&mine[0], sig.count, memory_order_relaxed);
    atomic_store_explicit(&mine[1], sig.word, memory_order_release);
}

void hier_shm_sign(hier_shm_t *shm, hier_shm_wait_t *w, hier_sig_t sig)
{
    hier_shm_sign_line(shm, w, sig);
}

hier_sig_t hier_shm_sign_call(hier_shm_t *shm, hier_shm_wait_t *w, hier_coll_t coll, uint64_t count, hier_dtype_t dt,
                              hier_op_t op, uint32_t digest, uint64_t call)
{
    hier_sig_t sig = hier_sig_make(coll, count, dt, op, digest, call);
    hier_shm_sign_line(shm, w, sig);
    return sig;
}

void hier_shm_joining(hier_shm_t *shm, int me)
{
    atomic_store_explicit(&hier_shm_ctl(shm, me)->joining, 1, memory_order_release);
}

void hier_shm_sign_reset(hier_shm_t *shm, int me)
{
    hier_shm_ctl_t *mine = hier_shm_ctl(shm, me);
    for (int p = 0; p < 2; p++) {
        atomic_store_explicit(&mine->sig[p][1], 0, memory_order_relaxed);
        atomic_store_explicit(&mine->sig[p][0], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&mine->joining, 0, memory_order_release); /* (after the clearing) */
}

/* A peer's signature of the call of this parity (word first: a count read
 * after it is that call's, unless the peer ran two calls ahead). */
static hier_sig_t hier_shm_peer_sig(hier_shm_t *shm, int rank, unsigned parity)
{
    _Atomic uint64_t *theirs = hier_shm_ctl(shm, rank)->sig[parity & 1];
    hier_sig_t s;
    s.word = atomic_load_explicit(&theirs[1], memory_order_acquire);
    s.count = atomic_load_explicit(&theirs[0], memory_order_relaxed);
    return s;
}

void hier_shm_leave(hier_shm_t *shm, const hier_shm_wait_t *w, hier_status_t why)
{
    hier_shm_ctl_t *mine = hier_shm_ctl(shm, w->me);
    atomic_store_explicit(&mine->error, (uint32_t)-why, memory_order_relaxed);
    atomic_store_explicit(&mine->left, (int32_t)-why, memory_order_release);
    if (atomic_load(&mine->sleepers)) /* (they look again at once) */
        syscall(SYS_futex, hier_shm_futex_word(&mine->phase), FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

hier_status_t hier_shm_sig_mismatch(const hier_shm_wait_t *w, int rank, hier_sig_t theirs)
{
    char why[320];
    hier_sig_explain(hier_shm_rank(w, rank), theirs, hier_shm_rank(w, w->me), w->sig, why, sizeof(why));
    HIER_ERROR("mismatched collective: %s", why);
    return HIER_ERR_MISMATCH;
}

hier_status_t hier_shm_check_peers(hier_shm_t *shm, const hier_shm_wait_t *w)
{
    for (int i = 1; i < w->nranks; i++) {
        int r = (w->me + i) % w->nranks;
        hier_status_t st = hier_shm_sig_compare(w, r, hier_shm_peer_sig(shm, r, hier_sig_call(w->sig)));
        if (st != HIER_OK) return st;
    }
    return HIER_OK;
}

void hier_shm_agreeing(hier_shm_t *shm, const hier_shm_wait_t *w, int on)
{
    atomic_store_explicit(&hier_shm_ctl(shm, w->me)->agreeing, on ? w->sig.word : 0, memory_order_release);
}

int hier_shm_all_agreeing(hier_shm_t *shm, const hier_shm_wait_t *w)
{
    for (int r = 0; r < w->nranks; r++) {
        uint64_t at = atomic_load_explicit(&hier_shm_ctl(shm, r)->agreeing, memory_order_acquire);
        if (!at || (uint16_t)at != hier_sig_call(w->sig)) return 0; /* (the word's low bits: its call) */
    }
    return 1;
}

/* A peer is gone when its pid no longer exists or is a zombie (its parent,
 * usually the MPI launcher's daemon, has not reaped it yet). */
static int hier_shm_peer_alive(hier_shm_t *shm, int rank)
{
    pid_t pid = hier_shm_ctl(shm, rank)->pid;
    char path[64], stat[256];
    if (pid <= 0) return 1;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1; /* no procfs: trust kill() */
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *paren = strrchr(stat, ')');
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

/* 3: the peer's signature of my call: not there yet (*late_p: it has not
 * reached the call), mine (it is slow), or another (a mismatch; also when
 * it is ahead of me). */
static hier_status_t hier_shm_same_call(hier_shm_t *shm, int rank, const hier_shm_wait_t *w, int *late_p)
{
    *late_p = 0;
    if (!hier_sig_valid(w->sig)) return HIER_OK; /* (set-up: no call yet) */
    if (atomic_load_explicit(&hier_shm_ctl(shm, rank)->joining, memory_order_acquire)) { /* (before its signature) */
        *late_p = 1;
        return HIER_OK;
    }
    hier_sig_t theirs = hier_shm_peer_sig(shm, rank, hier_sig_call(w->sig));
    if (!hier_sig_valid(theirs) || hier_sig_ahead(w->sig, theirs) < 0) {
        *late_p = 1;
        return HIER_OK;
    }
    return hier_shm_sig_compare(w, rank, theirs);
}

void hier_shm_phases(hier_shm_t *shm, int nranks, char *line, size_t len)
{
    int n = 0;
    line[0] = '\0';
    for (int r = 0; r < nranks && n < (int)len - 24; r++)
        n += snprintf(line + n, len - (size_t)n, " %llu",
                      (unsigned long long)atomic_load_explicit(&hier_shm_ctl(shm, r)->phase, memory_order_relaxed));
}

/* Where everyone is, for a wait that timed out. */
static void hier_shm_report(hier_shm_t *shm, int rank, const hier_shm_wait_t *w)
{
    char line[256], call[128];
    hier_shm_phases(shm, w->nranks, line, sizeof(line));
    hier_sig_describe(w->sig, call, sizeof(call));
    HIER_ERROR("rank %d has waited %d s for rank %d (same node) in its %s; barrier phases by local rank:%s",
               hier_shm_rank(w, w->me), hier_wait_timeout_s(), hier_shm_rank(w, rank), call, line);
}

/* The checks 1-4 of the file's comment; *since_ms: when the wait began to stand still. */
static hier_status_t hier_shm_left(hier_shm_t *shm, int rank, const hier_shm_wait_t *w)
{
    int32_t left = atomic_load_explicit(&hier_shm_ctl(shm, rank)->left, memory_order_acquire);
    if (left)
        HIER_ERROR("rank %d: rank %d (same node) left the call: %s", hier_shm_rank(w, w->me),
                   hier_shm_rank(w, rank), hier_status_str((hier_status_t)-left));
    return (hier_status_t)-left;
}

static hier_status_t hier_shm_wait_check(hier_shm_t *shm, int rank, const hier_shm_wait_t *w, _Atomic uint64_t *word,
                                         uint64_t target, uint64_t *since_ms)
{
    hier_status_t st = hier_shm_left(shm, rank, w);                                                    /* 1 */
    if (st != HIER_OK) return st;
    if (!hier_shm_peer_alive(shm, rank)) {                                                             /* 2 */
        /* (it may have left, then exited, since 1: its reason is the call's;
         * or written the word, finished the call and exited since the
         * caller's last look: then it has done its part) */
        if ((st = hier_shm_left(shm, rank, w)) != HIER_OK) return st;
        if (atomic_load_explicit(word, memory_order_acquire) >= target) return HIER_OK;
        HIER_ERROR("rank %d: rank %d (same node, pid %d) exited during a collective", hier_shm_rank(w, w->me),
                   hier_shm_rank(w, rank), (int)hier_shm_ctl(shm, rank)->pid);
        return HIER_ERR_PEER_DEAD;
    }
    int late;
    st = hier_shm_same_call(shm, rank, w, &late);                                                      /* 3 */
    if (st != HIER_OK) return st;
    if (late) { /* a rank that has not reached the collective is late, not stuck: MPI waits for it */
        *since_ms = 0;
        return HIER_OK;
    }
    if (!*since_ms) {                                                                                  /* 4 */
        *since_ms = hier_wait_now_ms();
    } else if (hier_wait_expired(*since_ms)) {
        hier_shm_report(shm, rank, w);
        return HIER_ERR_TIMEOUT;
    }
    return HIER_OK;
}

static inline void hier_shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Sleep until `word` reaches target or the bound passes: announce the sleeper,
 * check again (the waker stores the word before it looks for sleepers,
 * both sequentially consistent, so one of us sees the other). */
static void hier_shm_sleep_on(_Atomic uint64_t *word, _Atomic uint32_t *sleepers, uint64_t target)
{
    atomic_fetch_add(sleepers, 1);
    uint64_t seen = atomic_load(word);
    if (seen < target) {
        struct timespec ts = {0, HIER_SHM_SLEEP_NS};
        syscall(SYS_futex, hier_shm_futex_word(word), FUTEX_WAIT, (uint32_t)seen, &ts, NULL, 0);
    }
    atomic_fetch_sub(sleepers, 1);
}

static hier_status_t hier_shm_wait_on(hier_shm_t *shm, int rank, _Atomic uint64_t *word, uint64_t target,
                                      const hier_shm_wait_t *w, _Atomic uint32_t *sleepers)
{
    for (int i = 0; i < w->spin_count; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) >= target) return HIER_OK;
        hier_shm_cpu_relax();
    }
    uint64_t since_ms = 0;
    for (unsigned long y = 1;; y++) {
        if (atomic_load_explicit(word, memory_order_acquire) >= target) return HIER_OK;
        if (sleepers && w->sleep && y > HIER_SHM_SLEEP_AFTER_YIELDS) hier_shm_sleep_on(word, sleepers, target);
        else sched_yield();
        hier_progress_fn_t p = w->progress_every < 2 || y % (unsigned)w->progress_every == 0 ? w->progress : w->poll;
        if (p) p();
        if (y % HIER_SHM_CHECK_YIELDS) continue;
        hier_status_t st = hier_shm_wait_check(shm, rank, w, word, target, &since_ms);
        if (st != HIER_OK) return st;
    }
}

hier_status_t hier_shm_wait(hier_shm_t *shm, int rank, _Atomic uint64_t *word, uint64_t target,
                            const hier_shm_wait_t *w)
{
    return hier_shm_wait_on(shm, rank, word, target, w, NULL);
}

/* One look, no wait: the checks of a wait every HIER_SHM_CHECK_YIELDS
 * looks at the same word (a request tested from Open MPI's progress loop
 * is looked at about as often as a wait turns). */
hier_status_t hier_shm_test(hier_shm_t *shm, int rank, _Atomic uint64_t *word, uint64_t target,
                            const hier_shm_wait_t *w, hier_shm_probe_t *p)
{
    if (atomic_load_explicit(word, memory_order_acquire) >= target) {
        p->looks = 0;
        p->since_ms = 0;
        return HIER_OK;
    }
    if (++p->looks % HIER_SHM_CHECK_YIELDS) return HIER_IN_PROGRESS;
    hier_status_t st = hier_shm_wait_check(shm, rank, w, word, target, &p->since_ms);
    return st != HIER_OK ? st : HIER_IN_PROGRESS;
}

uint64_t hier_shm_barrier_arrive(hier_shm_t *shm, const hier_shm_wait_t *w)
{
    uint64_t target = hier_shm_phase_next(shm);
    hier_shm_ctl_t *mine = hier_shm_ctl(shm, w->me);

    atomic_store(&mine->phase, target);
    if (atomic_load(&mine->sleepers))
        syscall(SYS_futex, hier_shm_futex_word(&mine->phase), FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    return target;
}

hier_status_t hier_shm_barrier_pass(hier_shm_t *shm, const hier_shm_wait_t *w, uint64_t target, hier_shm_probe_t *p,
                                    int block)
{
    if (p->next < 1) p->next = 1;
    for (; p->next < w->nranks; p->next++) {
        int r = (w->me + p->next) % w->nranks;
        hier_shm_ctl_t *peer = hier_shm_ctl(shm, r);
        hier_status_t st = block ? hier_shm_wait_on(shm, r, &peer->phase, target, w, &peer->sleepers)
                                 : hier_shm_test(shm, r, &peer->phase, target, w, p);
        if (st != HIER_OK) return st;
    }
    return HIER_OK;
}

hier_status_t hier_shm_barrier(hier_shm_t *shm, const hier_shm_wait_t *w)
{
    hier_shm_probe_t p = {0};
    return hier_shm_barrier_pass(shm, w, hier_shm_barrier_arrive(shm, w), &p, 1);
}
