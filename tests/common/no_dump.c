/* no_dump.c: preloaded into every rank of a test job (-x LD_PRELOAD), it
 * makes the process not dumpable, so that without CAP_SYS_PTRACE a sibling
 * cannot read it with process_vm_readv: single copy refused, as under Yama's
 * ptrace_scope 1 (Ubuntu's default). */
#include <sys/prctl.h>

__attribute__((constructor)) static void no_dump(void)
{
    prctl(PR_SET_DUMPABLE, 0);
}
