#include "base/hier_status.h"

const char *hier_status_str(hier_status_t status)
{
    switch (status) {
    case HIER_IN_PROGRESS: return "in progress";
    case HIER_NOT_READY: return "not ready yet";
    case HIER_ALONE: return "one rank";
    case HIER_OK: return "success";
    case HIER_ERR_NOT_SUPPORTED: return "not supported";
    case HIER_ERR_NO_MEMORY: return "out of memory";
    case HIER_ERR_INVALID_ARG: return "invalid argument";
    case HIER_ERR_SHM: return "shared-memory error";
    case HIER_ERR_PEER_DEAD: return "peer process died";
    case HIER_ERR_TIMEOUT: return "timed out";
    case HIER_ERR_TOPOLOGY: return "topology error";
    case HIER_ERR_INTERNAL: return "internal error";
    case HIER_ERR_BUFFER: return "unusable buffer";
    case HIER_ERR_MISMATCH: return "ranks called different collectives";
    }
    return "unknown status";
}
