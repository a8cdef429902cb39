#include "sim_exec.h"

#include <stdlib.h>
#include <string.h>

#include "exec/hier_exec.h"

typedef struct {
    hier_step_t step;
    int call;
} sim_step_t;

typedef struct {
    sim_step_t *steps;
    size_t n, cap, pos;
    size_t barriers;
} sim_prog_t;

int sim_open(sim_t *sim, int nranks, size_t chunk_bytes)
{
    memset(sim, 0, sizeof(*sim));
    sim->nranks = nranks;
    sim->chunk_bytes = chunk_bytes;
    if (!(sim->slots = calloc((size_t)nranks, sizeof(*sim->slots)))) return -1;
    for (int r = 0; r < nranks; r++) {
        sim->slots[r] = malloc(2 * chunk_bytes);
        if (!sim->slots[r]) return -1;
        memset(sim->slots[r], 0xA5, 2 * chunk_bytes); /* stale data must never reach a result */
    }
    return 0;
}

void sim_close(sim_t *sim)
{
    for (int r = 0; sim->slots && r < sim->nranks; r++) free(sim->slots[r]);
    free(sim->slots);
}

static void sim_prog_append(sim_prog_t *p, const hier_step_t *steps, size_t n, int call)
{
    if (p->n + n > p->cap) {
        p->cap = (p->n + n) * 2;
        p->steps = realloc(p->steps, p->cap * sizeof(*p->steps));
    }
    for (size_t i = 0; i < n; i++) {
        p->steps[p->n + i] = (sim_step_t){.step = steps[i], .call = call};
        p->barriers += steps[i].op == HIER_STEP_BARRIER;
    }
    p->n += n;
}

/* Does rank r have a step left before its next barrier? */
static int sim_ready(const sim_prog_t *p)
{
    return p->pos < p->n && p->steps[p->pos].step.op != HIER_STEP_BARRIER;
}

typedef struct {
    const hier_sched_args_t *args;
    uint8_t *const *sbufs, *const *rbufs;
} sim_peers_t;

/* Single-copy reads: every rank's buffers are in this process. */
static hier_status_t sim_peer_read(void *ctx, hier_ref_t ref, void *dst, size_t len)
{
    const sim_peers_t *p = ctx;
    const uint8_t *base = p->args->in_place ? p->rbufs[ref.rank] + hier_sched_input_offset(p->args, ref.rank)
                                            : p->sbufs[ref.rank];
    memcpy(dst, base + ref.off, len);
    return HIER_OK;
}

int sim_run_calls(sim_t *sim, const sim_call_t *calls, int ncalls, unsigned seed)
{
    static uint8_t scratch[HIER_EXEC_SCRATCH_BYTES];
    int n = sim->nranks, rc = 0;
    sim_prog_t *progs = calloc((size_t)n, sizeof(*progs));
    hier_step_t *steps = NULL;
    int *ready = malloc(sizeof(*ready) * (size_t)n);

    for (int c = 0; c < ncalls; c++) {
        hier_sched_args_t args = *calls[c].args;
        size_t nchunks = hier_sched_nchunks(&args);
        free(steps);
        steps = malloc(hier_sched_max_steps(&args) * sizeof(*steps));
        for (int r = 0; r < n; r++) {
            args.me = r;
            for (size_t k = 0; k < nchunks; k++) {
                int buf = sim->break_buf ? 0 : (int)((sim->chunk_seq + k) & 1);
                sim_prog_append(&progs[r], steps, hier_sched_build(&args, k, buf, steps), c);
            }
        }
        sim->chunk_seq += nchunks;
    }
    for (int r = 1; r < n; r++)
        if (progs[r].barriers != progs[0].barriers) rc = -1;

    for (size_t phase = 0; rc == 0 && phase <= progs[0].barriers; phase++) {
        int nready;
        do { /* one random ready rank performs one step */
            nready = 0;
            for (int r = 0; r < n; r++)
                if (sim_ready(&progs[r])) ready[nready++] = r;
            if (!nready) break;
            int r = ready[rand_r(&seed) % (unsigned)nready];
            const sim_step_t *s = &progs[r].steps[progs[r].pos++];
            const sim_call_t *call = &calls[s->call];
            sim_peers_t peers = {.args = call->args, .sbufs = call->sbufs, .rbufs = call->rbufs};
            hier_exec_bufs_t bufs = {.sbuf = call->sbufs[r], .rbuf = call->rbufs[r], .slots = sim->slots,
                                     .buf_stride = sim->chunk_bytes, .esize = call->args->esize,
                                     .kernel = call->kernel, .peer_read = sim_peer_read, .peer_ctx = &peers,
                                     .scratch = scratch};
            if (hier_exec_step(&bufs, &s->step) != HIER_OK) rc = -1;
        } while (nready);
        for (int r = 0; r < n; r++) /* everyone passes the barrier */
            if (progs[r].pos < progs[r].n) progs[r].pos++;
    }
    for (int r = 0; r < n; r++) free(progs[r].steps);
    free(progs);
    free(steps);
    free(ready);
    return rc;
}

int sim_run(sim_t *sim, const hier_sched_args_t *tmpl, uint8_t *const *sbufs, uint8_t *const *rbufs,
            hier_reduce_kernel_t kernel, unsigned seed)
{
    sim_call_t call = {.args = tmpl, .sbufs = sbufs, .rbufs = rbufs, .kernel = kernel};
    return sim_run_calls(sim, &call, 1, seed);
}
