/* hier_settle.h: what the MPI benchmarks of contrib/ do before they time
 * anything: wait until coll/hier's communicators have their transport for
 * good, so a job's one-time costs stay out of per-call and
 * per-communicator figures. Between nodes hier serves calls over Open
 * MPI's point-to-point from the first, opens libfabric in the background
 * once the calls make it worth it, and moves there when every rank's
 * endpoint is open: that is what a job pays once (contrib/hier_start
 * times it), not what a call costs. */
#ifndef HIER_SETTLE_H
#define HIER_SETTLE_H

#include <mpi.h>
#include <stdlib.h>

/* 1 MiB allreduces on comm (large enough to start the opening under any
 * coll_hier_fabric_open_min up to that) until no rank has a communicator
 * still waiting to move (hier's MPI_T level coll_hier_pml_waiting, read
 * after each call and voted on in the next: every rank stops at the same
 * call), or for max_s seconds at most (the slowest rank's clock decides).
 * Returns the calls made while some rank waited (after the first, which
 * may set the communicator up); 0 at once where hier is not loaded. */
#define HIER_SETTLE_INTS (1 << 18)
static inline long hier_settle(MPI_Comm comm, double max_s)
{
    int provided, idx, count;
    long calls = 0;
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
    if (MPI_T_pvar_get_index("coll_hier_pml_waiting", MPI_T_PVAR_CLASS_LEVEL, &idx) != MPI_SUCCESS ||
        MPI_T_pvar_session_create(&session) != MPI_SUCCESS) {
        MPI_T_finalize();
        return 0;
    }
    MPI_T_pvar_handle_alloc(session, idx, NULL, &handle, &count);
    double t0 = MPI_Wtime();
    int *in = calloc(HIER_SETTLE_INTS, sizeof(int)), *out = malloc(HIER_SETTLE_INTS * sizeof(int));
    unsigned long long waiting = 1; /* (unknown before the first call: it may set the communicator up) */
    for (calls = -1; in && out; calls++) {
        in[0] = waiting > 0;
        in[1] = MPI_Wtime() - t0 > max_s;
        MPI_Allreduce(in, out, HIER_SETTLE_INTS, MPI_INT, MPI_MAX, comm); /* out[1]: some rank is late */
        if (!out[0] || out[1]) break;
        MPI_T_pvar_read(session, handle, &waiting);
    }
    free(in);
    free(out);
    MPI_T_pvar_handle_free(session, &handle);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    return calls;
}

#endif
