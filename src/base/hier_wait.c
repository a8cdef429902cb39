/* hier_wait.c: the waits' clock and timeout (hier_wait.h). */
#include "base/hier_wait.h"

#include <time.h>

#include "base/hier_params.h"

uint64_t hier_wait_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int hier_wait_expired(uint64_t since_ms)
{
    return hier_params.timeout > 0 && hier_wait_now_ms() - since_ms >= (uint64_t)hier_params.timeout * 1000u;
}

int hier_wait_timeout_s(void)
{
    return hier_params.timeout;
}
