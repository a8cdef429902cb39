#!/usr/bin/env bash
# contrib/hier-sanitizer-report sorts leaks right: each synthetic report
# below is hier's or another library's, and the script must say which.
set -u
S=${HIER_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
d=$(mktemp -d /tmp/hier-sanitizer-report.XXXXXX)
trap 'rm -rf "$d"' EXIT
fail=0
# case NAME WANT(ours|foreign) REPORT
case_check() {
    local name=$1 want=$2 got
    mkdir -p "$d/$name" && printf '%s\n' "$3" >"$d/$name/asan.1"
    "$S/contrib/hier-sanitizer-report" "$d/$name" >"$d/$name.out"
    case $?,$(tail -n 1 "$d/$name.out") in
    0,"sanitizers: 0 report"*) got=foreign ;;
    1,"sanitizers: "[1-9]*) got=ours ;;
    *) got=broken ;;
    esac
    if [ "$got" = "$want" ]; then echo "PASS: $name ($got)"; else echo "FAIL: $name: $got, want $want"; cat "$d/$name.out"; fail=1; fi
}
A='    #0 0x7f0 in __interceptor_malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69'
case_check core_malloc ours "Direct leak of 64 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1 in hier_comm_create src/comm/hier_comm.c:80
    #2 0x7f2 in mca_coll_hier_comm_query mca/coll/hier/coll_hier_module.c:120
"
case_check component_unsymbolized ours "Direct leak of 64 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1  (/work/_build/.libs/mca_coll_hier.so+0x1234)
    #2 0x7f2 in ompi_comm_activate (/lib/x86_64-linux-gnu/libmpi.so.40+0x5678)
"
case_check our_dupinfo ours "Direct leak of 120 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1 in fi_dupinfo (/lib/x86_64-linux-gnu/libfabric.so.1+0x1eacd)
    #2 0x7f2 in hier_fabric_rails_open src/net/hier_fabric_rails.c:160
"
case_check libfabric_provider_copy foreign "Direct leak of 120 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1 in fi_dupinfo (/lib/x86_64-linux-gnu/libfabric.so.1+0x1eacd)
    #2 0x7f2  (/lib/x86_64-linux-gnu/libfabric.so.1+0xec663)
    #3 0x7f3 in fi_endpoint /usr/include/rdma/fi_endpoint.h:177
    #4 0x7f4 in hier_fabric_rail_open src/net/hier_fabric_rails.c:137
"
case_check hwloc_plugin_named_by_the_program foreign "Direct leak of 136 byte(s) in 1 object(s) allocated from:
    #0 0x7f81188b83b7 in __interceptor_calloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:77
    #1 0x7f8116b05cae  (/work/_build-sanitize/tests/unit/test_topo+0x72cae)
    #2 0x7f8116b0607b  (/work/_build-sanitize/tests/unit/test_topo+0x7307b)
    #3 0x7f8118fbb4fd  (/lib/x86_64-linux-gnu/libhwloc.so.15+0x84fd)
    #4 0x7f8118fc39bd in hwloc_topology_load (/lib/x86_64-linux-gnu/libhwloc.so.15+0x109bd)
    #5 0x556fa4efd99e in topo_open src/base/hier_topo.c:130
    #6 0x556fa4efddf9 in hier_topo_open src/base/hier_topo.c:78
"
case_check program_symbolized ours "Direct leak of 64 byte(s) in 1 object(s) allocated from:
$A
    #1 0x556f1 in make_ranks tests/unit/test_topo.c:40
    #2 0x556f2 in topo_real_machine_bound_impl tests/unit/test_topo.c:238
"
case_check libfabric_inline_api foreign "Indirect leak of 16 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1  (/lib/x86_64-linux-gnu/libfabric.so.1+0xec7c4)
    #2 0x7f2 in fi_endpoint /usr/include/rdma/fi_endpoint.h:177
    #3 0x7f2 in hier_fabric_rail_open src/net/hier_fabric_rails.c:137
"
case_check unloaded_plugin foreign "Direct leak of 136 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1  (<unknown module>)
    #2 0x7f2  (<unknown module>)
    #3 0x7f3 in hwloc_topology_load (/lib/x86_64-linux-gnu/libhwloc.so.15+0x2d9bd)
    #4 0x7f4 in hier_topo_open src/topo/hier_topo.c:88
"
case_check ompi_init_under_test_main foreign "Direct leak of 688 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1  (/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_op_avx.so+0x3a6)
    #2 0x7f2 in ompi_op_base_op_select (/lib/x86_64-linux-gnu/libmpi.so.40+0xdc041)
    #3 0x7f3 in PMPI_Init (/lib/x86_64-linux-gnu/libmpi.so.40+0x81b7c)
    #4 0x7f4 in main tests/mpi/test_colls.c:699
"
case_check test_program_itself ours "Direct leak of 80 byte(s) in 1 object(s) allocated from:
$A
    #1 0x7f1 in across_nodes tests/unit/test_shm.c:362
"
case_check ubsan_error ours "src/exec/hier_reduce.c:224:1: runtime error: load of misaligned address 0x7f3d93a6b288 for type 'const long double'"
case_check asan_error ours "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000018
READ of size 8 at 0x602000000018 thread T0
    #0 0x7f1 in hier_ll_fold src/exec/hier_exec_ll.c:115"
exit $fail
