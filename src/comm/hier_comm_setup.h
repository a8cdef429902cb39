/* hier_comm_setup.h: a communicator's set-up, collective, at its first call (hier_comm_setup.c). */
#ifndef HIER_COMM_SETUP_H
#define HIER_COMM_SETUP_H

#include "comm/hier_comm_state.h"

/* HIER_OK: served from now on; HIER_ERR_NOT_SUPPORTED: never (c->refused says why). */
hier_status_t hier_comm_setup(hier_comm_t *c);

#endif
