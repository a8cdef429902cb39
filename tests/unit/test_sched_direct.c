/* The peer-direct allgather's ring (sched/hier_sched_direct.c) run by a
 * one-sided simulator: notes travel FIFO per direction, a write needs the
 * key its target sent, and its pieces land late and in any order, their
 * bytes read from the source only when they land, as an RDMA NIC reads
 * them. Any rank that can move or any pending piece may go next (seeded
 * random). A write is checked when posted (its source bytes all there, so
 * an early read would be right) and read when it lands (the latest a NIC
 * may read, so a source changed in between would show in the result). A
 * rank's own copy into place, which is the caller's and not a step, happens
 * at a random moment after its first step and before its last. Every misuse
 * the ring must avoid is a distinct return code, so that mutated schedules
 * can show the simulator catches each of them. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/hier_sched_direct.h"

#define MAXN 9
#define MAXTAG 16  /* the ring's tags are 0 .. n - 2 */
#define MAXNOTES 4 /* a direction carries a key and a done at most */
#define POISON 0xff /* never a data byte (blk_val): a byte nobody wrote shows */

typedef enum {
    SIM_OK,
    SIM_DEADLOCK,
    SIM_STALE_SOURCE,          /* a write posted from bytes not yet present at the writer */
    SIM_NO_KEY,                /* a write without (or after the revocation of) its target's key */
    SIM_WRONG_KEY,             /* a write with a key that names another rank */
    SIM_LANDED_AFTER_FINISH,   /* a piece landed in a rank whose buffer is the user's again */
    SIM_FINISHED_WITH_PENDING, /* a rank returned while the NIC still reads its buffers */
    SIM_WRONG_NOTE,            /* a note of another kind than the step expects */
    SIM_LEFTOVER,              /* notes or landed pieces nobody waited for, at the end */
    SIM_BAD_STEP,              /* out of bounds, unknown op, peer or kind */
} sim_rc_t;

/* A key names a registered buffer: whose, and where in it writes start. */
typedef struct {
    int valid;
    int rank;
    size_t off;
} sim_key_t;

typedef struct {
    unsigned kind; /* hier_note_kind_t */
    sim_key_t key;
} sim_note_t;

typedef struct {
    sim_note_t q[MAXNOTES];
    int head, len;
} sim_queue_t;

/* One piece of a write on its way: where its bytes will be read from once
 * it lands, not the bytes themselves. */
typedef struct {
    int writer, target, dir; /* dir: where it comes from, seen from the target */
    unsigned tag;
    uint8_t src_kind;
    size_t src_off, dst_off, len;
} sim_piece_t;

typedef struct {
    int n, in_place;
    const uint32_t *ring;
    size_t block, max_write;
    hier_step_t *steps[MAXN]; /* by communicator rank */
    size_t nsteps[MAXN];
    int pos_of[MAXN];
    uint8_t *send[MAXN], *recv[MAXN], *present[MAXN]; /* present: per byte of recv */
    /* state of a run */
    int copied[MAXN];
    size_t at[MAXN], pending_from[MAXN];
    sim_queue_t notes[MAXN][HIER_DIRECT_PEERS]; /* by the direction they come from */
    sim_key_t keys[MAXN][HIER_DIRECT_PEERS];
    unsigned landed[MAXN][HIER_DIRECT_PEERS][MAXTAG], consumed[MAXN][HIER_DIRECT_PEERS][MAXTAG];
    sim_piece_t *pieces;
    size_t npieces, cap;
    int fail_rank; /* who failed, for messages */
} sim_t;

static size_t sim_pieces_of(const sim_t *s, size_t len)
{
    return len ? (len - 1) / s->max_write + 1 : 0; /* (no overflow at SIZE_MAX) */
}

static int sim_neighbour(const sim_t *s, int r, int dir)
{
    int p = s->pos_of[r] + (dir == HIER_DIRECT_LEFT ? s->n - 1 : 1);
    return (int)s->ring[p % s->n];
}

static int in_bounds(size_t off, size_t len, size_t size)
{
    return off <= size && len <= size - off;
}

static sim_rc_t sim_note_send(sim_t *s, int r, const hier_step_t *st)
{
    if (st->tag >= HIER_NOTE_KINDS) return SIM_BAD_STEP;
    sim_note_t note = {.kind = st->tag};
    if (st->tag == HIER_NOTE_KEY) {
        if (st->dst.kind != HIER_BUF_RECV) return SIM_BAD_STEP; /* only the receive buffer is registered */
        note.key = (sim_key_t){.valid = 1, .rank = r, .off = st->dst.off};
    }
    /* what goes left arrives from the right, and the reverse */
    sim_queue_t *q = &s->notes[sim_neighbour(s, r, (int)st->peer)][1 - (int)st->peer];
    if (q->len == MAXNOTES) return SIM_BAD_STEP;
    q->q[(q->head + q->len++) % MAXNOTES] = note;
    return SIM_OK;
}

static sim_rc_t sim_note_recv(sim_t *s, int r, const hier_step_t *st)
{
    sim_queue_t *q = &s->notes[r][st->peer];
    sim_note_t note = q->q[q->head];
    q->head = (q->head + 1) % MAXNOTES, q->len--;
    if (note.kind != st->tag) return SIM_WRONG_NOTE;
    /* a done takes the key back: that buffer is its owner's again */
    s->keys[r][st->peer] = note.kind == HIER_NOTE_KEY ? note.key : (sim_key_t){0};
    return SIM_OK;
}

static int sim_all_present(const sim_t *s, int r, size_t off, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!s->present[r][off + i]) return 0;
    return 1;
}

static void sim_piece_push(sim_t *s, sim_piece_t p)
{
    if (s->npieces == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->pieces = realloc(s->pieces, s->cap * sizeof(*s->pieces));
    }
    s->pieces[s->npieces++] = p;
}

/* Post the pieces of a write; their bytes are read when each lands. */
static sim_rc_t sim_write(sim_t *s, int r, const hier_step_t *st)
{
    int t = sim_neighbour(s, r, (int)st->peer);
    size_t whole = (size_t)s->n * s->block;
    const sim_key_t *key = &s->keys[r][st->peer];
    if (!key->valid) return SIM_NO_KEY;
    if (key->rank != t) return SIM_WRONG_KEY;
    if (st->dst.kind != HIER_BUF_RECV || !in_bounds(key->off + st->dst.off, st->len, whole)) return SIM_BAD_STEP;
    if (st->src.kind == HIER_BUF_SEND) {
        if (!in_bounds(st->src.off, st->len, s->block)) return SIM_BAD_STEP;
    } else if (st->src.kind == HIER_BUF_RECV) {
        if (!in_bounds(st->src.off, st->len, whole)) return SIM_BAD_STEP;
        if (!sim_all_present(s, r, st->src.off, st->len)) return SIM_STALE_SOURCE;
    } else {
        return SIM_BAD_STEP;
    }
    if (st->tag >= MAXTAG) return SIM_BAD_STEP;
    for (size_t done = 0; done < st->len; done += s->max_write) {
        size_t len = st->len - done < s->max_write ? st->len - done : s->max_write;
        sim_piece_push(s, (sim_piece_t){.writer = r, .target = t, .dir = 1 - (int)st->peer, .tag = st->tag,
                                        .src_kind = st->src.kind, .src_off = st->src.off + done,
                                        .dst_off = key->off + st->dst.off + done, .len = len});
        s->pending_from[r]++;
    }
    return SIM_OK;
}

/* Whether rank r's next step can run now (a wrong step is "ready": it
 * runs, and fails). */
static int sim_step_ready(const sim_t *s, int r)
{
    if (s->at[r] == s->nsteps[r]) return 0;
    if (s->at[r] + 1 == s->nsteps[r] && !s->copied[r]) return 0; /* the caller's copy comes before finish */
    const hier_step_t *st = &s->steps[r][s->at[r]];
    if (st->peer >= HIER_DIRECT_PEERS) return 1;
    if (st->op == HIER_STEP_NET_NOTE_RECV) return s->notes[r][st->peer].len > 0;
    if (st->op == HIER_STEP_NET_WRITES_WAIT && st->tag < MAXTAG)
        return s->landed[r][st->peer][st->tag] - s->consumed[r][st->peer][st->tag] >= sim_pieces_of(s, st->len);
    return 1;
}

static sim_rc_t sim_step(sim_t *s, int r)
{
    const hier_step_t *st = &s->steps[r][s->at[r]++];
    sim_rc_t rc = SIM_OK;
    if (st->peer >= HIER_DIRECT_PEERS) return SIM_BAD_STEP;
    switch (st->op) {
    case HIER_STEP_NET_NOTE_SEND: rc = sim_note_send(s, r, st); break;
    case HIER_STEP_NET_NOTE_RECV: rc = sim_note_recv(s, r, st); break;
    case HIER_STEP_NET_WRITE: rc = sim_write(s, r, st); break;
    case HIER_STEP_NET_WRITES_WAIT:
        if (st->tag >= MAXTAG) return SIM_BAD_STEP;
        s->consumed[r][st->peer][st->tag] += (unsigned)sim_pieces_of(s, st->len);
        break;
    default: return SIM_BAD_STEP;
    }
    if (rc == SIM_OK && s->at[r] == s->nsteps[r] && s->pending_from[r]) return SIM_FINISHED_WITH_PENDING;
    return rc;
}

/* The caller's copy of its own block into place (not in place). */
static void sim_copy_own(sim_t *s, int r)
{
    memcpy(s->recv[r] + (size_t)r * s->block, s->send[r], s->block);
    memset(s->present[r] + (size_t)r * s->block, 1, s->block);
    s->copied[r] = 1;
}

/* Piece i lands: its bytes are read from the writer's buffer now. */
static sim_rc_t sim_land(sim_t *s, size_t i)
{
    sim_piece_t p = s->pieces[i];
    s->pieces[i] = s->pieces[--s->npieces];
    s->pending_from[p.writer]--;
    if (s->at[p.target] == s->nsteps[p.target]) {
        s->fail_rank = p.target;
        return SIM_LANDED_AFTER_FINISH;
    }
    const uint8_t *src = (p.src_kind == HIER_BUF_SEND ? s->send[p.writer] : s->recv[p.writer]) + p.src_off;
    memcpy(s->recv[p.target] + p.dst_off, src, p.len);
    memset(s->present[p.target] + p.dst_off, 1, p.len);
    s->landed[p.target][p.dir][p.tag]++;
    return SIM_OK;
}

static sim_rc_t sim_leftover(const sim_t *s)
{
    for (int r = 0; r < s->n; r++)
        for (int d = 0; d < HIER_DIRECT_PEERS; d++) {
            if (s->notes[r][d].len) return SIM_LEFTOVER;
            for (int t = 0; t < MAXTAG; t++)
                if (s->landed[r][d][t] != s->consumed[r][d][t]) return SIM_LEFTOVER;
        }
    return SIM_OK;
}

static void sim_reset(sim_t *s)
{
    memset(s->copied, 0, sizeof(*s) - offsetof(sim_t, copied));
    for (int r = 0; r < s->n; r++) {
        s->copied[r] = s->in_place;
        if (!s->copied[r] && !s->nsteps[r]) sim_copy_own(s, r); /* (a ring of one: at once) */
    }
}

/* Action a < n: rank a's next step; a >= n: rank a - n's own copy, due at
 * some moment after its first step and before its last. */
static int sim_actions(const sim_t *s, int *acts, int *done)
{
    int k = 0;
    *done = 0;
    for (int r = 0; r < s->n; r++) {
        *done += s->at[r] == s->nsteps[r];
        if (sim_step_ready(s, r)) acts[k++] = r;
        if (!s->copied[r] && (s->at[r] >= 1 || s->nsteps[r] <= 1)) acts[k++] = s->n + r;
    }
    return k;
}

/* Run every rank's steps (s->steps, buffers set, in the order s->ring).
 * A rank's move and a landing are picked with even odds, so that a long
 * write's many pieces neither starve the ranks nor all land at once. */
static sim_rc_t sim_run(sim_t *s, unsigned seed)
{
    int acts[2 * MAXN], done;
    sim_rc_t rc = SIM_OK;
    free(s->pieces);
    sim_reset(s);
    while (rc == SIM_OK) {
        int k = sim_actions(s, acts, &done);
        if (!k && !s->npieces) {
            rc = done == s->n ? sim_leftover(s) : SIM_DEADLOCK;
            break;
        }
        if (s->npieces && (!k || rand_r(&seed) % 2)) {
            rc = sim_land(s, rand_r(&seed) % s->npieces);
            continue;
        }
        int a = acts[rand_r(&seed) % (unsigned)k];
        s->fail_rank = a % s->n;
        if (a >= s->n)
            sim_copy_own(s, a - s->n);
        else
            rc = sim_step(s, a);
    }
    free(s->pieces);
    s->pieces = NULL;
    return rc;
}

/* ---------------------------------------------------------------- cases */

static uint8_t blk_val(int rank, size_t i)
{
    return (uint8_t)(1 + (rank * 37 + (int)(i % 1021) * 11) % 200);
}

typedef struct {
    int n;
    size_t block, max_write;
    int in_place;
    unsigned seed;
} direct_case_t;

/* A ring order drawn from the seed: the builder must not assume identity. */
static void ring_draw(uint32_t *ring, int n, unsigned seed)
{
    for (int p = 0; p < n; p++) ring[p] = (uint32_t)p;
    for (int p = n - 1; p > 0; p--) {
        int q = (int)(rand_r(&seed) % (unsigned)(p + 1));
        uint32_t x = ring[p];
        ring[p] = ring[q], ring[q] = x;
    }
}

static void case_build(sim_t *s, const direct_case_t *c, uint32_t *ring)
{
    *s = (sim_t){.n = c->n, .in_place = c->in_place, .ring = ring, .block = c->block, .max_write = c->max_write};
    ring_draw(ring, c->n, c->seed * 2654435761u);
    for (int p = 0; p < c->n; p++) s->pos_of[ring[p]] = p;
    for (int p = 0; p < c->n; p++) {
        hier_direct_args_t a = {.total = c->n, .pos = p, .ring = ring, .block = c->block, .in_place = c->in_place};
        int r = (int)ring[p];
        s->steps[r] = malloc(sizeof(hier_step_t) * (hier_sched_direct_max_steps(c->n) + 1));
        s->nsteps[r] = hier_sched_direct_allgather(&a, s->steps[r]);
    }
}

/* Buffers as the user hands them: the receive buffer unwritten but for my
 * own block when in place. */
static void case_fill(sim_t *s)
{
    size_t whole = (size_t)s->n * s->block;
    for (int r = 0; r < s->n; r++) {
        s->send[r] = realloc(s->send[r], s->block + 1);
        s->recv[r] = realloc(s->recv[r], whole + 1);
        s->present[r] = realloc(s->present[r], whole + 1);
        memset(s->recv[r], POISON, whole);
        memset(s->present[r], 0, whole);
        for (size_t i = 0; i < s->block; i++) s->send[r][i] = blk_val(r, i);
        if (s->in_place) {
            memcpy(s->recv[r] + (size_t)r * s->block, s->send[r], s->block);
            memset(s->present[r] + (size_t)r * s->block, 1, s->block);
            memset(s->send[r], POISON, s->block); /* in place there is no send buffer to read */
        }
    }
}

static void case_free(sim_t *s)
{
    for (int r = 0; r < s->n; r++) free(s->steps[r]), free(s->send[r]), free(s->recv[r]), free(s->present[r]);
}

static sim_rc_t case_run(sim_t *s, unsigned seed)
{
    case_fill(s);
    return sim_run(s, seed);
}

/* Whether every receive buffer holds every rank's block (no assert: a
 * mutated schedule may get it wrong without any other fault). */
static int case_correct(const sim_t *s)
{
    for (int r = 0; r < s->n; r++)
        for (int k = 0; k < s->n; k++)
            for (size_t i = 0; i < s->block; i++)
                if (s->recv[r][(size_t)k * s->block + i] != blk_val(k, i)) return 0;
    return 1;
}

/* Block k is rank k's data everywhere, and each of my left neighbour's
 * n - 1 writes came in exactly its share of pieces, nothing else. */
static void case_check(const sim_t *s, const direct_case_t *c)
{
    size_t want = sim_pieces_of(s, c->block);
    for (int r = 0; r < c->n; r++) {
        for (int k = 0; k < c->n; k++)
            for (size_t i = 0; i < c->block; i++)
                cr_assert_eq(s->recv[r][(size_t)k * c->block + i], blk_val(k, i),
                             "n %d block %zu max_write %zu in_place %d seed %u: rank %d block %d [%zu]", c->n,
                             c->block, c->max_write, c->in_place, c->seed, r, k, i);
        for (int t = 0; t < MAXTAG; t++) {
            cr_assert_eq(s->landed[r][HIER_DIRECT_LEFT][t], t < c->n - 1 ? want : 0,
                         "n %d block %zu max_write %zu: rank %d tag %d", c->n, c->block, c->max_write, r, t);
            cr_assert_eq(s->landed[r][HIER_DIRECT_RIGHT][t], 0, "rank %d: written from the right", r);
        }
    }
}

static const char *rc_name(sim_rc_t rc)
{
    static const char *names[] = {"ok", "deadlock", "stale source", "no key", "wrong key", "landed after finish",
                                  "finished with pending", "wrong note", "leftover", "bad step"};
    return names[rc];
}

/* ---------------------------------------------------------------- tests */

/* Block 0 is kept: the builder emits its steps regardless, writes of no
 * pieces, and a zero-length allgather must still complete. */
Test(sched_direct, ring_gathers_every_block_in_any_landing_order)
{
    static const size_t blocks[] = {0, 1, 7, 64, 1000};
    static const size_t max_writes[] = {1, 3, 64, SIZE_MAX};
    uint32_t ring[MAXN];
    for (int n = 1; n <= MAXN; n++)
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
            for (size_t m = 0; m < sizeof(max_writes) / sizeof(max_writes[0]); m++)
                for (int ip = 0; ip < 2; ip++)
                    for (unsigned seed = 1; seed <= 3; seed++) {
                        direct_case_t c = {.n = n, .block = blocks[b], .max_write = max_writes[m], .in_place = ip,
                                           .seed = seed * 97 + (unsigned)n};
                        sim_t s;
                        case_build(&s, &c, ring);
                        sim_rc_t rc = case_run(&s, c.seed);
                        cr_assert_eq(rc, SIM_OK, "n %d block %zu max_write %zu in_place %d seed %u: %s (rank %d)",
                                     n, c.block, c.max_write, ip, c.seed, rc_name(rc), s.fail_rank);
                        case_check(&s, &c);
                        case_free(&s);
                    }
}

/* The bound the callers size their arrays by is exact: 2 n + 2. */
Test(sched_direct, step_count_is_the_stated_bound)
{
    static hier_step_t steps[2 * 200 + 2];
    uint32_t ring[200];
    for (int n = 1; n <= 200; n++) {
        ring_draw(ring, n, (unsigned)n);
        for (int p = 0; p < n; p++) {
            hier_direct_args_t a = {.total = n, .pos = p, .ring = ring, .block = 8, .in_place = p % 2};
            size_t got = hier_sched_direct_allgather(&a, steps);
            cr_assert_eq(got, hier_sched_direct_max_steps(n), "n %d pos %d: %zu steps", n, p, got);
            cr_assert_eq(got, n < 2 ? 0 : 2 * (size_t)n + 2, "n %d: bound", n);
        }
    }
}

/* A rank writes n - 1 blocks, each once, all to its right, none its right
 * neighbour's own; and waits only on its left. */
Test(sched_direct, each_rank_writes_every_block_but_its_right_neighbours)
{
    static const size_t blocks[] = {1, 7, 1000};
    uint32_t ring[MAXN];
    for (int n = 2; n <= MAXN; n++)
        for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
            direct_case_t c = {.n = n, .block = blocks[b], .max_write = 1, .seed = (unsigned)n};
            sim_t s;
            case_build(&s, &c, ring);
            for (int r = 0; r < n; r++) {
                size_t bytes = 0;
                int hit[MAXN] = {0}, right = sim_neighbour(&s, r, HIER_DIRECT_RIGHT);
                for (size_t i = 0; i < s.nsteps[r]; i++) {
                    const hier_step_t *st = &s.steps[r][i];
                    if (st->op == HIER_STEP_NET_WRITES_WAIT) cr_assert_eq(st->peer, HIER_DIRECT_LEFT);
                    if (st->op != HIER_STEP_NET_WRITE) continue;
                    cr_assert_eq(st->peer, HIER_DIRECT_RIGHT, "rank %d writes left", r);
                    cr_assert_eq(st->dst.off % c.block, 0);
                    hit[st->dst.off / c.block]++;
                    bytes += st->len;
                }
                cr_assert_eq(bytes, (size_t)(n - 1) * c.block, "n %d block %zu: rank %d wrote %zu", n, c.block, r,
                             bytes);
                for (int k = 0; k < n; k++) cr_assert_eq(hit[k], k != right, "n %d: rank %d block %d", n, r, k);
            }
            case_free(&s);
        }
}

/* ---------------------------------------------------------------- mutations
 * Each takes the correct schedule of one case, checks it passes for every
 * seed, breaks one rank's (or every rank's) steps, and counts the seeds on
 * which the simulator returns each code. */

#define MUT_SEEDS 40

static void step_delete(sim_t *s, int r, size_t i)
{
    memmove(&s->steps[r][i], &s->steps[r][i + 1], (s->nsteps[r] - i - 1) * sizeof(hier_step_t));
    s->nsteps[r]--;
}

static size_t step_find(const sim_t *s, int r, hier_step_op_t op, uint32_t tag)
{
    for (size_t i = 0; i < s->nsteps[r]; i++)
        if (s->steps[r][i].op == op && s->steps[r][i].tag == tag) return i;
    cr_assert_fail("rank %d has no step %d tag %u", r, op, tag);
    return 0;
}

static void step_swap(sim_t *s, int r, size_t i, size_t j)
{
    hier_step_t x = s->steps[r][i];
    s->steps[r][i] = s->steps[r][j], s->steps[r][j] = x;
}

static const direct_case_t mut_case = {.n = 5, .block = 64, .max_write = 3, .seed = 11};

static void mut_runs(sim_t *s, unsigned *count)
{
    memset(count, 0, sizeof(unsigned) * (SIM_BAD_STEP + 1));
    for (unsigned seed = 0; seed < MUT_SEEDS; seed++) count[case_run(s, seed)]++;
}

static void mut_control(sim_t *s, uint32_t *ring)
{
    unsigned count[SIM_BAD_STEP + 1];
    case_build(s, &mut_case, ring);
    mut_runs(s, count);
    cr_assert_eq(count[SIM_OK], MUT_SEEDS, "the unmutated ring fails");
}

/* (a) Writing a block on without waiting for it: posted before it is all
 * there, for some seed; and its pieces are never waited for, so no seed
 * ends clean. */
Test(sched_direct, mutation_write_without_its_wait_is_a_stale_source)
{
    sim_t s;
    uint32_t ring[MAXN];
    unsigned count[SIM_BAD_STEP + 1];
    mut_control(&s, ring);
    int r = (int)ring[2];
    step_delete(&s, r, step_find(&s, r, HIER_STEP_NET_WRITES_WAIT, 1));
    mut_runs(&s, count);
    cr_assert_eq(count[SIM_OK], 0, "a seed passed without the wait");
    cr_assert_gt(count[SIM_STALE_SOURCE], 0, "no seed wrote a stale block");
    case_free(&s);
}

/* (b) Returning without the right neighbour's done: the NIC may still be
 * reading my buffers. */
Test(sched_direct, mutation_finish_without_done_leaves_writes_in_flight)
{
    sim_t s;
    uint32_t ring[MAXN];
    unsigned count[SIM_BAD_STEP + 1];
    mut_control(&s, ring);
    int r = (int)ring[1];
    step_delete(&s, r, step_find(&s, r, HIER_STEP_NET_NOTE_RECV, HIER_NOTE_DONE));
    mut_runs(&s, count);
    cr_assert_eq(count[SIM_OK], 0, "a seed passed without the done");
    cr_assert_gt(count[SIM_FINISHED_WITH_PENDING] + count[SIM_LANDED_AFTER_FINISH], 0,
                 "no seed finished with writes in flight");
    case_free(&s);
}

/* (c) The first write before the key: always caught, whatever the order. */
Test(sched_direct, mutation_write_before_the_key_has_no_key)
{
    sim_t s;
    uint32_t ring[MAXN];
    unsigned count[SIM_BAD_STEP + 1];
    mut_control(&s, ring);
    int r = (int)ring[3];
    step_swap(&s, r, step_find(&s, r, HIER_STEP_NET_NOTE_RECV, HIER_NOTE_KEY),
              step_find(&s, r, HIER_STEP_NET_WRITE, 0));
    mut_runs(&s, count);
    cr_assert_eq(count[SIM_NO_KEY], MUT_SEEDS, "a write without its key went through");
    case_free(&s);
}

/* (d) Every rank waiting for its right neighbour's key before sending its
 * own: the ring deadlocks. (One rank doing so alone is harmless: its
 * neighbour still sends first.) */
Test(sched_direct, mutation_everyone_waits_for_a_key_first_deadlocks)
{
    sim_t s;
    uint32_t ring[MAXN];
    unsigned count[SIM_BAD_STEP + 1];
    mut_control(&s, ring);
    step_swap(&s, (int)ring[0], 0, 1);
    mut_runs(&s, count);
    cr_assert_eq(count[SIM_OK], MUT_SEEDS, "one rank receiving its key first is not a fault");
    for (int p = 1; p < mut_case.n; p++) step_swap(&s, (int)ring[p], 0, 1);
    mut_runs(&s, count);
    cr_assert_eq(count[SIM_DEADLOCK], MUT_SEEDS, "the ring of key waits did not deadlock");
    case_free(&s);
}

/* (e) A done sent where a key is expected, and a note nobody receives. */
Test(sched_direct, mutation_wrong_or_unreceived_notes_are_caught)
{
    sim_t s;
    uint32_t ring[MAXN];
    unsigned count[SIM_BAD_STEP + 1];
    mut_control(&s, ring);
    int r = (int)ring[4];
    s.steps[r][step_find(&s, r, HIER_STEP_NET_NOTE_SEND, HIER_NOTE_KEY)].tag = HIER_NOTE_DONE;
    mut_runs(&s, count);
    cr_assert_eq(count[SIM_WRONG_NOTE], MUT_SEEDS, "a done taken for a key");
    case_free(&s);
    mut_control(&s, ring);
    r = (int)ring[0];
    s.steps[r][s.nsteps[r]++] = (hier_step_t){.op = HIER_STEP_NET_NOTE_SEND, .peer = HIER_DIRECT_RIGHT,
                                              .tag = HIER_NOTE_DONE}; /* (room: the bound + 1) */
    mut_runs(&s, count);
    cr_assert_eq(count[SIM_LEFTOVER], MUT_SEEDS, "a note left over went unnoticed");
    case_free(&s);
}

/* (f) A write from a block that reaches the writer last (its right
 * neighbour's) instead of the one it just waited for: posted before that
 * block is there for some seed; where the ring happened to deliver it in
 * time, the run completes but with the wrong block in place, which the
 * result shows. */
Test(sched_direct, mutation_write_from_the_wrong_block_is_caught)
{
    sim_t s;
    uint32_t ring[MAXN];
    unsigned stale = 0;
    mut_control(&s, ring);
    int r = (int)ring[2], right = (int)ring[3];
    s.steps[r][step_find(&s, r, HIER_STEP_NET_WRITE, 1)].src.off = (size_t)right * mut_case.block;
    for (unsigned seed = 0; seed < MUT_SEEDS; seed++) {
        sim_rc_t rc = case_run(&s, seed);
        stale += rc == SIM_STALE_SOURCE;
        cr_assert(rc != SIM_OK || !case_correct(&s), "seed %u: the wrong block went unnoticed", seed);
    }
    cr_assert_gt(stale, 0, "no seed wrote from a missing block");
    case_free(&s);
}
