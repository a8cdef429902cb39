/* hier_settle.h: what the MPI benchmarks of contrib/ do before they time
 * anything: wait until coll/hier serves calls on the communicator, so a
 * job's one-time costs stay out of per-call and per-communicator figures.
 * Between nodes hier opens libfabric in the background from the first call
 * and meanwhile hands calls to the previous component (fallback:warmup):
 * that is what a job pays once (contrib/hier_start times it), not what a
 * call costs. */
#ifndef HIER_SETTLE_H
#define HIER_SETTLE_H

#include <mpi.h>
#include <stdlib.h>

/* 1 MiB allreduces on comm (large enough to start the opening under any
 * coll_hier_fabric_open_min up to that) until one is not counted as
 * fallback:warmup (hier's MPI_T counter
 * coll_hier_allreduce_fallback_warmup_calls), or for max_s seconds at most
 * (the slowest rank's clock decides, so every rank stops at the same call;
 * the verdict per call is the same on every rank). Returns the calls that
 * fell back; 0 at once where hier is not loaded. */
#define HIER_SETTLE_INTS (1 << 18)
static inline long hier_settle(MPI_Comm comm, double max_s)
{
    int provided, idx, count;
    long fell = 0;
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
    if (MPI_T_pvar_get_index("coll_hier_allreduce_fallback_warmup_calls", MPI_T_PVAR_CLASS_COUNTER, &idx) !=
            MPI_SUCCESS ||
        MPI_T_pvar_session_create(&session) != MPI_SUCCESS) {
        MPI_T_finalize();
        return 0;
    }
    MPI_T_pvar_handle_alloc(session, idx, NULL, &handle, &count);
    double t0 = MPI_Wtime();
    int *in = calloc(HIER_SETTLE_INTS, sizeof(int)), *out = malloc(HIER_SETTLE_INTS * sizeof(int));
    for (; in && out; fell++) {
        unsigned long long before = 0, after = 0;
        in[0] = MPI_Wtime() - t0 > max_s;
        MPI_T_pvar_read(session, handle, &before);
        MPI_Allreduce(in, out, HIER_SETTLE_INTS, MPI_INT, MPI_MAX, comm); /* out[0]: some rank is late */
        MPI_T_pvar_read(session, handle, &after);
        if (after == before || out[0]) break;
    }
    free(in);
    free(out);
    MPI_T_pvar_handle_free(session, &handle);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    return fell;
}

#endif
