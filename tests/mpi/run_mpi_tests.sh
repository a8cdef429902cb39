#!/usr/bin/env bash
# shellcheck disable=SC2034 # (the table's parameters use variables through eval)
# MPI integration tests of coll/hier, run by `make check`: the programs of
# tests/mpi under mpirun at several sizes and settings. Each case must pass
# its own checks (results and MPI_T counters); the script adds checks on
# stderr messages, the stats format and leftovers in /dev/shm. The cases are
# the table at the end (CASES); above it, the helpers the table names.
set -u
B=${HIER_BUILDDIR:-$(pwd)}
S=${HIER_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PKGLIB=${HIER_OMPI_PKGLIBDIR:-}
[ -n "$PKGLIB" ] || PKGLIB=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p')
[ -n "$PKGLIB" ] || PKGLIB=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
COMPONENT_PATH="$B/.libs:$PKGLIB"
CHUNK=4096
TIMEOUT=${HIER_TEST_TIMEOUT:-300}
LOG=$(mktemp -d /tmp/hier-mpi-tests.XXXXXX)
passed=0 failed=0 skipped=0

# coll_hier_fabric_warmup 0 (WARMUP=1 for the default): libfabric opens at
# the first call between nodes, which every call then uses, so the cases can
# require it of each call; the *_default and *_warmup cases run the default,
# where calls between nodes go over Open MPI's point-to-point (pml_*) while
# libfabric opens in the background, then over libfabric.
# The component path goes in the environment (-x), not --mca: Open MPI 5's
# mpirun hands an --mca component path to PMIx as well, which then prints a
# complaint for every file in it. (-x applies to one MPMD context in 5.0.)
# libfabric's shm provider names its regions in /dev/shm by pid ("<pid>:..."),
# and a process killed before closing leaves its own behind (the fault cases
# kill ranks on purpose); pid_max is 32768 here, so a later rank given the
# pid fails fi_enable with EBUSY. Before each run, those of gone processes go.
reap_stale_fi_regions() {
    local f p
    for f in /dev/shm/[0-9]*:*; do
        [ -e "$f" ] || continue
        p=${f#/dev/shm/}
        p=${p%%:*}
        [ -d "/proc/$p" ] || rm -f "$f"
    done
}
hier_mpirun() {
    local np=$1 cmd
    shift
    # (WRAP, NETNS_RUN, BIND and HIER_MPIRUN_ARGS are word lists: split on purpose)
    # shellcheck disable=SC2206
    cmd=(${WRAP:-} ${NETNS_RUN:-} timeout -k 10 "$TIMEOUT" mpirun ${NETNS_RUN:+@MPIRUN@} --allow-run-as-root --oversubscribe
        ${BIND:---bind-to none} -np "$np" -x OMPI_MCA_mca_base_component_path="$COMPONENT_PATH" --mca coll_hier_priority 100
        --mca coll_hier_fabric_warmup "${WARMUP:-0}"
        --mca coll_hier_shm_chunk_size "$CHUNK" --mca coll_hier_net_chunk_size "$CHUNK" ${HIER_MPIRUN_ARGS:-} "$@")
    if [ -n "${HIER_TEST_DRY:-}" ]; then
        dry_show "${cmd[@]}"
        return 0
    fi
    reap_stale_fi_regions
    "${cmd[@]}"
}
# HIER_TEST_DRY=1: each selected case prints its name, the settings its
# checks read and its whole command instead of running it (to compare two
# versions of this script, or to rerun one case by hand), on the script's
# stdout (fd 3) though the case's own output goes to its file.
exec 3>&1
dry_show() {
    local v
    {
        printf 'DRY %s:' "$DRY_NAME"
        for v in EXTRA_CHECK FI_WANT HIER_NETNS_SLOTS RAILS RAILS_STATS; do
            [ -z "${!v:-}" ] || printf ' %s=%q' "$v" "${!v}"
        done
        printf ' %q' "$@"
        echo
    } >&3
}

# A case's verdict: counted, and its line ("PASS: ..." / "FAIL: ...").
case_pass() { passed=$((passed + 1)); echo "PASS: $*"; }
case_fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
case_skip() { skipped=$((skipped + 1)); echo "SKIP: $*"; }

# case_wanted NAME: HIER_TEST_CASES=REGEX runs only the cases whose names
# match (development, the sanitizer lane), HIER_TEST_SKIP=REGEX none whose
# names match (CI's other Open MPI lines: the cases that test the core's
# algorithms alone run on 4.1).
case_wanted() {
    [[ -z "${HIER_TEST_CASES:-}" || $1 =~ $HIER_TEST_CASES ]] && [[ -z "${HIER_TEST_SKIP:-}" || ! $1 =~ $HIER_TEST_SKIP ]]
}
# case NAME NP [mpirun args...] -- PROGRAM [args...]
# HIER_MPIRUN_ARGS go to every mpirun (before the case's).
case_run() {
    local name=$1 np=$2 start rc
    shift 2
    case_wanted "$name" || return 0
    start=$(date +%s)
    DRY_NAME=$name hier_mpirun "$np" "$@" >"$LOG/$name.out" 2>&1
    rc=$?
    [ -z "${HIER_TEST_DRY:-}" ] || return 0
    if [ $rc -eq 0 ] && grep -q '^SKIP: ' "$LOG/$name.out"; then # the program ran nothing: its requirement is missing
        case_skip "$name ($(grep -m1 '^SKIP: ' "$LOG/$name.out" | sed 's/^SKIP: //'))"
    elif [ $rc -eq 0 ] && { [ -z "${EXTRA_CHECK:-}" ] || [ "$(${EXTRA_CHECK:-true} "$LOG/$name.out" && echo ok)" = ok ]; }; then
        case_pass "$name ($(($(date +%s) - start)) s)"
    else
        case_fail "$name (exit $rc) -- last lines of $LOG/$name.out:"
        tail -n 25 "$LOG/$name.out" | sed 's/^/    /'
    fi
}

has_refused_registration() {
    grep -q "cannot register FI_HMEM_CUDA memory" "$1" && ! grep -q "coll:hier:error" "$1"
}
has_rule_pipelining() { grep -q "allreduce of [0-9]* B: ring (net_ring, chunk=16384, depth=1); rules file line 2" "$1"; }
has_mismatch_message() { grep -q "mismatched collective: rank [0-9]* called iall" "$1"; }
has_params_message() { grep -q "different coll_hier parameters" "$1"; }
has_shm_message() { grep -q "cannot create shared-memory file" "$1" && grep -q "shared-memory segment unavailable" "$1"; }
has_shm_full_message() { grep -q "No space left on device" "$1" && grep -q "shared-memory segment unavailable" "$1"; }
has_stats_lines() {
    local c
    for c in allreduce allgather reduce_scatter reduce_scatter_block; do
        grep -Eq "^coll:hier:stats coll=$c path=(self|(shm|cma|net)_[a-z]+|fallback:[a-z_]+) calls=[0-9]+ bytes=[0-9]+ net_bytes=[0-9]+ staged=[0-9]+$" "$1" || return 1
    done
}
has_net_stats_only() { has_net_stats "$1" && ! grep -q "^coll:hier:stats .*path=fallback" "$1"; }
has_old_libfabric() { grep -q "libfabric 1.12 (API 1.10 asked" "$1"; }
loaded_fi() { [ "$(grep -c "$FI_WANT" "$1")" -eq 4 ]; } # every rank loaded the libfabric FI_WANT names
# fabric_warmup: every rank opened libfabric in a thread of hier's where the
# MPI library does not drive it (Open MPI 4.1 over tcp: its ofi components
# load it and decline), on MPI's own thread where it does (4 ranks alike)
warm_where_allowed() {
    [ "$(grep -c "libfabric opens in a thread of hier's" "$1")" -eq 4 ] ||
        { [ "$(grep -c "the MPI library drives libfabric itself" "$1")" -eq 4 ] && ! grep -q "thread of hier's, in" "$1"; }
}
# served between nodes from the first call: over Open MPI's point-to-point
# (pml_*) before libfabric, nothing handed to the previous component
served_from_the_first() { grep -q "^coll:hier:stats .*path=pml_" "$1" && ! grep -q "^coll:hier:stats .*path=fallback" "$1"; }
# ...and for good: no libfabric (no net_* path)
pml_paths_only() { served_from_the_first "$1" && ! grep -q "^coll:hier:stats .*path=net_" "$1"; }
# hier_bench --interleave: each size's blocking, nonblocking and persistent
# rows, results checked (ok), and every kind served by hier's low-latency path
interleaved_rows() {
    local k
    for k in b nb pc; do [ "$(grep -Ec "^hier_bench:$k +allreduce +(8|64) .* ok$" "$1")" -eq 2 ] || return 1; done
    for k in allreduce iallreduce pallreduce; do grep -Eq "^coll:hier:stats coll=$k path=shm_ll calls=" "$1" || return 1; done
    ! grep -q "path=fallback" "$1"
}
# coll_hier_pipeline_depth: every rank's pipeline buffers hold the chunks in
# flight the provider's default gives (tcp: 2), or the parameter's
in_flight() { [ "$(grep -c "pipeline buffers: mapped (chunk [0-9]*, $2 chunks in flight)" "$1")" -eq 4 ]; }
in_flight_2() { in_flight "$1" 2; }
in_flight_3() { in_flight "$1" 3; }
warm_in_own_thread() { [ "$(grep -c "libfabric opens in a thread of hier's" "$1")" -eq 4 ]; }
# (the three may take two paths: the node measures the low-latency cut-off at a call, and 8000 B is near it)
has_dlopen_stats() {
    [ "$(sed -n 's/^coll:hier:stats coll=allreduce path=shm_[a-z]* calls=\([0-9]*\) .*/\1/p' "$1" |
        awk '{ n += $1 } END { print n + 0 }')" = 3 ] && ! grep -q "unable to open mca_coll_hier" "$1"
}
has_churn_stats() {
    grep -Eq "^coll:hier:stats coll=allreduce path=shm_rsag calls=[1-9]" "$1" && ! grep -q "path=fallback" "$1"
}
has_churn_net_stats() {
    grep -Eq "^coll:hier:stats coll=allreduce path=net_rd calls=[1-9]" "$1" && ! grep -q "path=fallback" "$1"
}
has_cma_stats() { grep -Eq "^coll:hier:stats coll=allgather path=cma_copy calls=[1-9]" "$1"; }
# a malformed rules file: refused on every rank with its line, the built-in rules serve
rules_refused() {
    [ "$(grep -c "rules $RULES/malformed.rules, line 3: the last rule" "$1")" -ge 2 ] &&
        grep -q "rules file $RULES/malformed.rules refused; the built-in rules serve" "$1"
}
# the window measured once per process (each rank logs its times once) and the allgathers served by
# hier's segment or single copy, none handed over
cma_window_measured() {
    [ "$(grep -c "allgather single copy: .*(segment / single copy: 64 KiB: [0-9.]* / [0-9.]* us" "$1")" = 2 ] &&
        grep -Eq "^coll:hier:stats coll=allgather path=(cma_copy|shm_copy) calls=[1-9]" "$1" &&
        ! grep -Eq "^coll:hier:stats coll=allgather path=fallback" "$1"
}
# the low-latency cut-off measured once per process and collective (each rank, as many as say they are
# served, logs its times once, at every size timed), every call served by hier (low latency or the schedule)
ll_cut_off_measured() {
    local n c t='[0-9.]* / [0-9.]* us;'
    n=$(grep -c "coll:hier:info rank [0-9]*: served by hier" "$1")
    [ "$n" -ge 2 ] || return 1
    for c in allreduce allgather reduce_scatter; do
        [ "$(grep -c "$c low latency: up to .* (low latency / schedule: 1 KiB: $t 2 KiB: $t 4 KiB: $t 8 KiB: $t)" "$1")" = "$n" ] ||
            return 1
        grep -Eq "^coll:hier:stats coll=$c(_block)? path=(shm_ll|shm_flat|shm_rsag|shm_rs|shm_copy|cma_copy) calls=[1-9]" "$1" ||
            return 1
    done
    ! grep -q "path=fallback" "$1"
}
# ...and kept: measured once per rank (the blocking call), taken by a later communicator's set-up for its first call,
# a request (each rank says so once), every allreduce by low latency
ll_cut_off_kept() {
    local t='[0-9.]* / [0-9.]* us;'
    [ "$(grep -c "allreduce low latency: up to .* (low latency / schedule: 1 KiB: $t" "$1")" = 2 ] &&
        [ "$(grep -c "low latency, the cut-offs the process kept: allreduce up to " "$1")" = 2 ] &&
        grep -Eq "^coll:hier:stats coll=allreduce path=shm_ll calls=[1-9]" "$1" && ! grep -q "path=fallback" "$1"
}
# ...where the kernel refuses single copy: said once per rank, never used, the cut-off measured against the segment
ll_cut_off_no_cma() {
    ll_cut_off_measured "$1" && grep -q "single copy (process_vm_readv) to pid [0-9]* unavailable" "$1" &&
        ! grep -q "path=cma_copy" "$1"
}
# every collective carried bytes between nodes (rank 0's own counters)
has_net_stats() {
    local c
    for c in allreduce allgather reduce_scatter reduce_scatter_block; do
        grep -Eq "^coll:hier:stats coll=$c path=net_[a-z]+ calls=[1-9][0-9]* bytes=[0-9]+ net_bytes=[1-9][0-9]* staged=[0-9]+$" "$1" || return 1
    done
}

# Python clients (mpi4py, torch): Debian's python3 with Debian's mpi4py, which
# is built for Debian's Open MPI; under another mpirun they cannot run.
PY=/usr/bin/python3
python_mpi_usable() { # python_mpi_usable [MODULE...]: prints why not
    local lib run
    lib=$($PY -c 'from mpi4py import MPI; print(MPI.Get_library_version())' 2>/dev/null |
        sed -n 's/.*Open MPI v\([0-9.]*\).*/\1/p')
    [ -n "$lib" ] || { echo "Debian's python3-mpi4py is not installed, or does not start in this Open MPI's environment"; return 1; }
    run=$(mpirun --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9.]*\).*/\1/p')
    [ "$lib" = "$run" ] || { echo "mpi4py is built for Open MPI $lib, this mpirun is $run"; return 1; }
    for m in "$@"; do
        $PY -c "import $m" 2>/dev/null || { echo "Debian's python3-$m is not installed"; return 1; }
    done
}
# The hook's bucket allreduces and the per-step loss allreduce: rank 0's
# allreduce counters hold them all, on paths between nodes; none fell back.
ddp_served_by_hier() {
    local calls steps
    calls=$(sed -n 's/^ddp: {.*"allreduce_calls": \([0-9]*\).*/\1/p' "$1")
    steps=$(sed -n 's/^ddp: {.*"steps": \([0-9]*\).*/\1/p' "$1")
    [ -n "$calls" ] && [ -n "$steps" ] && [ "$calls" -ge "$steps" ] || return 1
    grep -q '^coll:hier:stats coll=allreduce path=fallback' "$1" && return 1
    awk -v want=$((calls + steps)) '/^coll:hier:stats coll=allreduce path=net_/ {
        split($4, kv, "="); n += kv[2] } END { exit !(n >= want) }' "$1"
}
# --nonblocking: the buckets are MPI_Iallreduce (Open MPI makes some too, agreeing on communicator ids).
# Those of the first step fall back (fallback:nonblocking:
# no blocking call has set the communicator up yet); every later one is served between nodes, and the
# losses' blocking allreduces too.
ddp_nb_served_by_hier() {
    local calls steps buckets
    calls=$(sed -n 's/^ddp: {.*"allreduce_calls": \([0-9]*\).*/\1/p' "$1")
    steps=$(sed -n 's/^ddp: {.*"steps": \([0-9]*\).*/\1/p' "$1")
    buckets=$(sed -n 's/^ddp: {.*"buckets": \([0-9]*\).*/\1/p' "$1")
    [ -n "$calls" ] && [ -n "$steps" ] && [ -n "$buckets" ] && [ "$calls" -ge "$steps" ] || return 1
    grep -q '^coll:hier:stats coll=allreduce path=fallback' "$1" && return 1
    awk -v calls="$calls" -v steps="$steps" -v buckets="$buckets" '
        { split($4, kv, "=") }
        /^coll:hier:stats coll=iallreduce path=net_/ { nb += kv[2] }
        /^coll:hier:stats coll=iallreduce path=fallback:nonblocking / { fb += kv[2] }
        /^coll:hier:stats coll=iallreduce path=fallback/ { fball += kv[2] }
        /^coll:hier:stats coll=allreduce path=net_/ { b += kv[2] }
        END { exit !(nb >= calls - buckets && fb == fball && fb <= buckets && b >= steps) }' "$1"
}

TF="$B/tests/mpi/test_faults"
# killed_run NAME NP LIMIT MODE ARGS...: rank 1 is killed mid-loop (KILL_ARGS: test_faults' own, e.g.
# "--nonblocking 1": the survivors wait on nonblocking requests). MODE
# "ends": the job must end within 10 s of the kill (the runtime or hier's
# error, whichever comes first: Open MPI 5 kills the job before a survivor
# notices; timed from the killed rank's own clock line, as a start slowed by
# load is not the case's concern), and a survivor that reports must have
# failed within LIMIT s.
# MODE "recovers" (--enable-recovery: the job goes on): every survivor must
# say its call failed within LIMIT s, the killed rank's node peer that its
# peer exited, and finish (mpirun lingers: cut once every survivor is done;
# 40 s in all, as a start slowed by load is not the case's concern).
killed_run() {
    local name=$1 np=$2 limit=$3 mode=$4 out start took killed_at after done_n slow ok=0
    shift 4
    case_wanted "$name" || return 0
    out=$LOG/$name.out
    start=$(date +%s)
    # shellcheck disable=SC2086
    TIMEOUT=40 DRY_NAME=$name hier_mpirun "$np" --mca coll_hier_timeout 5 "$@" "$TF" kill --odd 1 ${KILL_ARGS:-} \
        >"$out" 2>&1 &
    local job=$!
    # (recovers: mpirun lingers once the survivors are done; it is cut then)
    while [ "$mode" = recovers ] && kill -0 $job 2>/dev/null; do
        if [ "$(grep -ac '^rank [0-9]*: done$' "$out")" -ge $((np - 1)) ]; then
            sleep 1
            pkill -TERM -P $job 2>/dev/null
            break
        fi
        sleep 0.5
    done
    wait $job
    [ -z "${HIER_TEST_DRY:-}" ] || return 0
    took="$(($(date +%s) - start)) s"
    killed_at=$(awk '/killed itself at/ { print $NF; exit }' "$out") # rank R: killed itself at EPOCH
    after=$(awk -v k="$killed_at" -v now="$(date +%s.%N)" 'BEGIN { if (k == "") print "no kill line"; else printf "%.1f s after the kill", now - k }')
    done_n=$(grep -ac '^rank [0-9]*: done$' "$out")
    slow=$(awk -v l="$limit" '/failed after/ { if ($7 + 0 >= l) print }' "$out") # rank R: allreduce I failed after T s
    if [ "$mode" = ends ]; then
        [ -z "$slow" ] && [ -n "$killed_at" ] && awk -v a="$after" 'BEGIN { exit !(a + 0 < 10) }' && ok=1
        took="$took, $after"
    else
        [ -z "$slow" ] && [ "$done_n" -eq $((np - 1)) ] && grep -aq 'exited during a collective' "$out" && ok=1
    fi
    if [ $ok = 1 ]; then
        case_pass "$name (ended after $took; $done_n survivors reported, $(grep -ac 'failed after' "$out") failed calls within ${limit} s)"
    else
        case_fail "$name (after $took) -- last lines of $out:"
        tail -n 25 "$out" | sed 's/^/    /'
    fi
}
hier_segments() { # how many coll-hier-* segments /dev/shm holds
    local f n=0
    for f in /dev/shm/coll-hier-*; do [ -e "$f" ] && n=$((n + 1)); done
    echo $n
}
shm_before=$(hier_segments)
LIBMPI=$(mpicc --showme:libdirs 2>/dev/null | awk '{print $1}')/libmpi.so
MPI_LINKS_FABRIC=$(ldd "$LIBMPI" 2>/dev/null | grep -c libfabric) # (5.0, 6.0: libfabric is always in the process)
TC="$B/tests/mpi/test_colls --chunk $CHUNK"

# Variables the table's parameters use.
# When the previous component computes, Open MPI's own reduction bugs show:
# op/avx saturates 8/16-bit sums (hidden by op ^avx), MIN/MAX compare
# MPI_UNSIGNED_LONG as signed and MPI_OFFSET as unsigned (skipped by the test).
FALLBACK_ARGS="--mca op ^avx"
T=$B/tests/mpi
# Device buffers (the test backend: memory the CPU faults on): staged in a
# pipeline of 4 KiB chunks whose asynchronous copies are slowed down (a
# missing wait reads stale bytes), peer direct over shm (FI_HMEM_SYSTEM
# registration of the test backend's alias), and staging forced where peer
# direct would work.
DEV="-x HIER_TEST_DEVICE=1 -x HIER_TEST_DEVICE_DELAY_US=5 --mca coll_hier_device_stage_chunk 4K"
PD="--mca coll_hier_fabric_provider shm --mca coll_hier_device_peer_direct_min 4K"
# hier's CUDA backend on tests/common/fake_libcuda.c, a stand-in driver whose
# device memory the CPU cannot touch and whose stream copies wait for their
# event: the backend's calls run in CI, without a GPU.
FAKECUDA=$LOG/fakecuda
mkdir -p "$FAKECUDA" && ln -sf "$B/tests/common/.libs/libfakecuda.so" "$FAKECUDA/libcuda.so.1"
FC="-x LD_LIBRARY_PATH=$FAKECUDA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} --mca coll_hier_device_stage_chunk 4K"
# Ranks with different coll_hier parameters: the same program on both sides of the MPMD ':'.
TCP="$TC --quick --world-only --skip-ompi-bugs --expect fallback:params"
# Uneven nodes without han: under hier (Open MPI 5 selects han by default)
# han serves hier's own agreement calls through a leaders' communicator,
# whose allreduce hier serves and counts; the counters are per process, so
# the test would count it as one of its own calls. (4.1: han is off anyway.)
UNEVEN="--mca coll ^han"
NET="--net"
# Rules files (docs/rules.md) that make one algorithm serve every call it can
RULES=$LOG/rules
mkdir -p "$RULES"
rules() { # rules NAME LINE...: $RULES/NAME.rules
    local f=$RULES/$1.rules
    shift
    { echo "coll-hier-rules 1"; printf '%s\n' "$@"; } >"$f"
}
rules flat "node allreduce flat - 0 any" "node allgather shm - 0 any"
rules numa "node allreduce numa - 0 any"
rules rsag "node allreduce rsag - 0 any" "node reduce_scatter shm - 0 any"
rules cma "node allgather cma - 0 any" "node allgather shm - 0 any"
rules net_ring "net allreduce ring - 0 any" "net allgather ring - 0 any" "net reduce_scatter ring - 0 any"
rules net_rd "net allreduce rd - 0 any" "net allgather rd - 0 any" "net reduce_scatter rabenseifner - 0 any"
rules net_rh "net allreduce rabenseifner - 0 any" "net allgather rabenseifner - 0 any"
rules net_ring_pipe "net allreduce ring - 0 any chunk=16K depth=1"
rules malformed "node allreduce rsag - 0 any" "node allreduce flat - 0 1K"
# Fake nodes: every host name but the first lives in its own UTS namespace
# (contrib/hier-fake-node), so Open MPI's locality says "another node" and
# the tcp BTL runs between them. Unbound: each fake node would bind its ranks
# to the same first cores.
FAKE="$FALLBACK_ARGS --mca plm_rsh_agent $S/contrib/hier-fake-node --mca mpi_yield_when_idle 1"
hosts() { # hosts FILE SLOTS... : this host, then node1, node2, ... with those slots
    local f=$LOG/$1 i=0
    shift
    : >"$f"
    for s in "$@"; do
        if [ $i -eq 0 ]; then echo "$(hostname) slots=$s" >>"$f"; else echo "node$i slots=$s" >>"$f"; fi
        i=$((i + 1))
    done
    echo "$f"
}
# Open MPI's components but its ofi ones: a process where nothing loads
# libfabric before hier (as a UCX-only build). Only where libmpi itself does
# not link libfabric (4.1).
NO_OFI=$LOG/components-without-ofi
if [ "$MPI_LINKS_FABRIC" = 0 ]; then
    mkdir -p "$NO_OFI" && for f in "$PKGLIB"/*; do case $f in *ofi*) ;; *) ln -sf "$f" "$NO_OFI/" ;; esac; done
fi
# a libfabric older than the headers hier was built with: the installed one answering as 1.12
# (tests/common/old_libfabric.c). Where libmpi itself links libfabric (5.0) it would load the
# stand-in too; Open MPI's own ofi components are left out.
OLD_FI_REAL=$(ldconfig -p 2>/dev/null | awk '/libfabric\.so\.1 / {print $NF; exit}')
OLD_FI=$LOG/oldfabric
if [ -n "$OLD_FI_REAL" ] && [ "$MPI_LINKS_FABRIC" = 0 ]; then
    mkdir -p "$OLD_FI" && ln -sf "$B/tests/common/.libs/liboldfabric.so" "$OLD_FI/libfabric.so.1"
fi
# The libfabric 2.x lane (.ci/run): this hier, built against the headers of HIER_FI_LANE (a prefix
# holding libfabric HIER_FI_LANE_VERSION), loads the library the node has: that one, and the
# system's older one (a head node's newer headers, compute nodes' older library)
FI_LANE_HEADERS="built with ${HIER_FI_LANE_VERSION:-} headers"
fi_system_version() { env -u PKG_CONFIG_PATH pkg-config --modversion libfabric | cut -d. -f1,2; }
# the fake GPU sits where this machine has a PCI NIC: NICs are placed near it
gpu_bus=$(for d in /sys/class/net/*/device; do readlink -f "$d"; done 2>/dev/null |
    grep -o '[0-9a-f]\{4\}:[0-9a-f]\{2\}:[0-9a-f]\{2\}\.[0-9a-f]' | tail -n 1)
near_gpu() { [ -z "$gpu_bus" ] || grep -q "NICs are placed near this rank's accelerator $gpu_bus" "$1"; }
[ -n "$gpu_bus" ] || echo "note: no PCI network device here: the accelerator's placement is not checked"
# test_cuda's own summary (how many allgathers went NIC to NIC), shown in the log
shows_cuda_summary() { grep -hs '^test_cuda:' "$1" >&2 || true; }
# PyTorch DDP (contrib/examples/ddp_train.py), its gradient buckets
# allreduced by MPI through hier: every rank's parameters bitwise equal,
# the loss curve within 1e-4 of DDP's own gloo allreduce (the first case),
# and rank 0's counters hold every bucket and every loss, between nodes.
DDP="$PY $S/contrib/examples/ddp_train.py --size tiny --steps 8 --check"

# A cluster of network namespaces (contrib/hier-netns-cluster): every node its
# own network stack with two rails, Open MPI's own tcp traffic on the rails.
# Every case runs the full correctness sweep, and hier must have used both
# rails: by its own counters (coll:hier:nic lines of every rank), and by the
# kernel's, which must have sent at least as much on each rail (the tcp BTL's
# traffic comes on top).
NETNS_TCP="--mca coll_hier_fabric_provider tcp --mca coll_hier_fabric_iface rail0,rail1 --mca coll_hier_stats 2 --mca mpi_yield_when_idle 1"
rails_agree() {
    awk -v want="$RAILS" '
        FNR == NR && /^coll:hier:nic / {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            hier[f["nic"]] += f["bytes"]; next }
        FNR != NR { kernel[$2] += $3 }
        END {
            n = split(want, rail, ",")
            for (i = 1; i <= n; i++) {
                r = rail[i]
                printf "rail %s: hier %d bytes, kernel %d bytes sent\n", r, hier[r], kernel[r] > "/dev/stderr"
                if (hier[r] < 65536 || kernel[r] < hier[r]) exit 1
            }
        }' "$1" "$RAILS_STATS"
}
# No NICs named, three rails and a management link with the default route
# for 2 ranks per node: hier must leave mgmt out (it says so) and every rail
# must carry a near-equal share (within 20% of the rails' mean, by hier's
# counters; the kernel's at least as much).
rails_share() {
    grep -q "NIC mgmt left out: carries the default route" "$1" || { echo "mgmt not left out" >&2; return 1; }
    rails_agree "$1" || return 1
    awk '/^coll:hier:nic / {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            b[f["nic"]] += f["bytes"] }
        END {
            if ("mgmt" in b) { print "mgmt carried " b["mgmt"] " bytes" > "/dev/stderr"; exit 1 }
            n = 0; for (r in b) { n++; sum += b[r] }
            for (r in b) { printf "%s: %.2f of the mean\n", r, b[r] / (sum / n) > "/dev/stderr"
                           if (n != 3 || b[r] < 0.8 * sum / n || b[r] > 1.2 * sum / n) exit 1 }
        }' "$1"
}
# A real Slurm cluster (contrib/hier-slurm-cluster: slurmctld, one slurmd
# per namespace node, munge): contrib/deploy/slurm's job script under sbatch,
# the component found only through a parameters file (as on a ParallelCluster
# head node), the ranks started by mpirun inside the allocation and by srun
# --mpi=pmix; test_colls checks every result and that hier served every
# collective between the nodes.
# (the job's mpirun as root: make check run by root without Open MPI's two
# variables exported, as the README's command is)
ROOT_OK=$([ "$(id -u)" -eq 0 ] && echo --allow-run-as-root)
slurm_case() { # slurm_case NAME LAUNCH
    local name=$1 launch=$2 start rc out=$LOG/$1.out
    case_wanted "$name" || return 0
    if [ -n "${HIER_TEST_DRY:-}" ]; then
        DRY_NAME=$name dry_show slurm_case "$launch"
        return 0
    fi
    start=$(date +%s)
    printf '%s\n' "mca_base_component_path = $COMPONENT_PATH" "coll_hier_priority = 100" "coll_hier_stats = 1" \
        "coll_hier_fabric_provider = tcp" "coll_hier_fabric_iface = rail0,rail1" "coll_hier_fabric_warmup = 0" \
        "coll_hier_shm_chunk_size = $CHUNK" "coll_hier_net_chunk_size = $CHUNK" >"$LOG/slurm-params.conf"
    # shellcheck disable=SC2086 # ($TC: the program and its --chunk)
    OMPI_MCA_mca_base_param_files="$LOG/slurm-params.conf" OMPI_MCA_btl_tcp_if_include=rail0,rail1 \
        HIER_LAUNCH=$launch HIER_MPIRUN_ARGS="--bind-to none --mca mpi_yield_when_idle 1${ROOT_OK:+ $ROOT_OK}" \
        timeout -k 10 "$TIMEOUT" "$S/contrib/hier-slurm-cluster" run --nodes 2 -- \
        sbatch --wait -N 2 --ntasks-per-node=2 -o "$out" "$S/contrib/deploy/slurm/hier-job.sbatch" \
        $TC --quick --world-only --net >"$LOG/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'ok (0 failures)' "$out" && has_net_stats_only "$out"; then
        case_pass "$name ($(($(date +%s) - start)) s)"
    else
        case_fail "$name (exit $rc) -- last lines of $LOG/$name.log and the job's output:"
        tail -n 12 "$LOG/$name.log" "$out" 2>/dev/null | sed 's/^/    /'
    fi
}
# mpi4py's own test suite (of the installed 3.1.4: HIER_MPI4PY_SOURCE,
# the copy in shared/ beside the tree (Debian's archive does not serve
# it), or Debian's source package): the same result for every test with
# and without hier. Where the suite cannot be had (exit 77), the later
# layouts are not tried again: they say SKIP with the first one's reason.
[ -n "${HIER_MPI4PY_SOURCE:-}" ] || [ ! -f "$S/../shared/mpi4py-3.1.4/test/runtests.py" ] ||
    HIER_MPI4PY_SOURCE=$(cd "$S/../shared/mpi4py-3.1.4" && pwd)
mpi4py_missing=
mpi4py_case() { # mpi4py_case NAME LAYOUT...: contrib/hier-mpi4py-tests' layout options
    local name=$1 start rc out
    shift
    case_wanted "$name" || return 0
    if [ -n "${HIER_TEST_DRY:-}" ]; then
        DRY_NAME=$name dry_show mpi4py_case "$@"
        return 0
    fi
    [ -z "$mpi4py_missing" ] || { case_skip "$name ($mpi4py_missing)"; return 0; }
    start=$(date +%s)
    out=$("$S/contrib/hier-mpi4py-tests" ${HIER_MPI4PY_SOURCE:+--source "$HIER_MPI4PY_SOURCE"} \
        --component-dir "$B/.libs" --timeout "$TIMEOUT" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 77 ]; then
        mpi4py_missing=${out#SKIP: }
        case_skip "$name ($mpi4py_missing)"
    elif [ $rc -eq 0 ]; then
        case_pass "$name ($(($(date +%s) - start)) s): $(grep '^mpi4py ' <<<"$out")"
        grep '^  ' <<<"$out"
    else
        case_fail "$name (exit $rc):"
        tail -n 25 <<<"$out" | sed 's/^/    /'
    fi
}
# ompi_info of the Open MPI built against loads the component and lists
# its parameters, every one of the table's (docs/parameters.md has a row each).
ompi_info_case() { # ompi_info_case NAME
    local name=$1 info want got
    case_wanted "$name" || return 0
    if [ -n "${HIER_TEST_DRY:-}" ]; then
        DRY_NAME=$name dry_show ompi_info_case
        return 0
    fi
    info=$(OMPI_MCA_mca_base_component_path="$COMPONENT_PATH" ompi_info --param coll hier --level 9 2>&1)
    want=$(grep -c '^| `coll_hier_' "$S/docs/parameters.md")
    got=$(grep -c 'parameter "coll_hier_' <<<"$info")
    if grep -q "MCA coll: hier (MCA" <<<"$info" && [ "$got" -eq "$want" ] && [ "$want" -gt 0 ]; then
        case_pass "ompi_info lists coll/hier and its $got parameters ($(grep -o 'API v[0-9.]*' <<<"$info" | head -1))"
    else
        case_fail "ompi_info --param coll hier: $got of $want parameters"
        head -5 <<<"$info" | sed 's/^/    /'
    fi
}

# Requirements: req_NAME succeeds where the case can run here, else prints
# why not (the case's SKIP reason) and fails. Asked once per run.
req_mount_ns() { unshare --mount true 2>/dev/null || { echo "unshare --mount not permitted here"; return 1; }; }
req_uts_ns() { unshare --uts true 2>/dev/null || { echo "unshare --uts not permitted here"; return 1; }; }
# Single copy needs the kernel's leave to read a sibling (Yama ptrace_scope 0)
# and, under auto, a core per rank; where either is missing hier rightly
# copies through the segment, and these cases say so instead of failing.
req_cma() {
    local yama
    yama=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
    [ "$yama" = 0 ] || { echo "kernel.yama.ptrace_scope=$yama forbids process_vm_readv between siblings"; return 1; }
}
# Ranks the kernel keeps from reading each other: root without CAP_SYS_PTRACE (setpriv), ranks not
# dumpable (tests/common/no_dump.c)
req_no_ptrace() {
    setpriv --bounding-set=-sys_ptrace -- true 2>/dev/null ||
        { echo "setpriv cannot drop CAP_SYS_PTRACE here"; return 1; }
}
req_cpus2() { [ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs, this machine has $(nproc)"; return 1; }; }
# (Open MPI 5's mpirun takes --enable-recovery, but without a ULFM build its
# own TCP layer aborts the survivors: "Socket closed", MPI_ERRORS_ARE_FATAL
# on a NULL communicator, before hier's error reaches them)
req_ompi4() {
    mpirun --version 2>/dev/null | grep -q 'Open MPI) 4\.' ||
        { echo "Open MPI 5 and later: this runtime aborts the survivors itself unless built with ULFM"; return 1; }
}
req_mpi_without_fabric() {
    [ "$MPI_LINKS_FABRIC" = 0 ] || { echo "libmpi links libfabric: no process here is without it"; return 1; }
}
req_old_fabric_standin() {
    if [ -z "$OLD_FI_REAL" ] || [ "$MPI_LINKS_FABRIC" != 0 ]; then
        echo "no libfabric.so.1 in the loader's cache, or libmpi links it"
        return 1
    fi
}
req_fi_lane() { [ -n "${HIER_FI_LANE:-}" ] || { echo "HIER_FI_LANE unset: run by .ci/run's libfabric 2.x lane"; return 1; }; }
req_mpi4py() { python_mpi_usable; }
req_torch() { python_mpi_usable torch; }
req_netns() { "$S/contrib/hier-netns-cluster" check; }
req_slurm() { "$S/contrib/hier-slurm-cluster" check; }
declare -A req_missing # NAME -> why it is missing here, "" where present
# case_requires NAME...: where one is missing, sets why to its reason and fails
case_requires() {
    local r w
    for r in "$@"; do
        if [ -z "${req_missing[$r]+set}" ]; then
            declare -F "req_$r" >/dev/null || { echo "run_mpi_tests.sh: no requirement named $r" >&2; exit 99; }
            if w=$("req_$r"); then req_missing[$r]=; else req_missing[$r]=${w:-req_$r failed}; fi
        fi
        why=${req_missing[$r]}
        [ -z "$why" ] || return 1
    done
}

# run_case NAME RANKS LAYOUT REQUIRES CHECK ENV PARAMETERS PROGRAM: one row
# of the table. The last three columns are shell words, expanded when the
# case runs (eval: they name the variables above, as "$LOG/x" or "$(...)").
run_case() {
    local name=$1 np=$2 layout=$3 requires=$4 check=$5 env=$6 params=$7 prog=$8 largs='' lenv='' n s r why
    local -a reqs=()
    case_wanted "$name" || return 0
    case $layout in
    local) ;;
    netns:*:*:*) # netns:NODES:SLOTS:RAILS
        IFS=: read -r _ n s r <<<"$layout"
        lenv="RAILS=$(seq -s, -f 'rail%g' 0 $((r - 1))) RAILS_STATS=\$LOG/\$name.rails HIER_NETNS_SLOTS=$s"
        lenv+=" NETNS_RUN=\"\$S/contrib/hier-netns-cluster run --nodes $n --rails $r --rate none --stats \$LOG/\$name.rails --\""
        reqs+=(netns) ;;
    slurm) reqs+=(slurm) ;;
    [0-9]*x[0-9]*) # NODESxSLOTS fake nodes: hostfile hNODESSLOTS
        n=${layout%x*} s=${layout#*x}
        largs="\$FAKE --hostfile \"\$(hosts h$n$s$(printf " $s%.0s" $(seq "$n")))\""
        reqs+=(uts_ns) ;;
    [0-9]*,[0-9]*) # SLOTS,SLOTS,... fake nodes, uneven
        largs="\$FAKE --hostfile \"\$(hosts h${layout//,/} ${layout//,/ })\""
        reqs+=(uts_ns) ;;
    *) echo "run_mpi_tests.sh: $name: no layout $layout" >&2; exit 99 ;;
    esac
    [ "$requires" = - ] || { IFS=, read -ra r <<<"$requires"; reqs+=("${r[@]}"); }
    if ! case_requires "${reqs[@]}"; then
        case_skip "$name ($why)"
        return 0
    fi
    [ "$check" = - ] || lenv+=" EXTRA_CHECK=$check"
    [ "$env" = - ] || lenv+=" $env"
    case $prog in
    "@killed "*) # @killed LIMIT MODE [test_faults kill's own arguments]
        read -r _ n s r <<<"$prog"
        eval "$lenv KILL_ARGS=\$r killed_run \"\$name\" \"\$np\" $n $s $largs $params" ;;
    "@slurm "*) slurm_case "$name" "${prog#@slurm }" ;;
    "@mpi4py "*) eval "mpi4py_case \"\$name\" ${prog#@mpi4py }" ;;
    @ompi_info) ompi_info_case "$name" ;;
    @*) echo "run_mpi_tests.sh: $name: no runner ${prog%% *}" >&2; exit 99 ;;
    *) eval "$lenv case_run \"\$name\" \"\$np\" $largs $params $prog" ;;
    esac
}

# The cases, in the order they run. One row per case (a row may go on over
# lines ending in "\"), columns separated by "|":
#   name     says the layout first (np3_, nodes2x2_, netns_, slurm_): CI's lanes select by it
#   ranks    mpirun's -np
#   layout   local | NODESxSLOTS or SLOTS,SLOTS,... (fake nodes, needs uts_ns)
#            | netns:NODES:SLOTS:RAILS (needs netns) | slurm (needs slurm)
#   requires - or req_* names, comma separated: mount_ns uts_ns cma cpus2 ompi4
#            mpi_without_fabric old_fabric_standin fi_lane mpi4py torch netns slurm
#   check    - or a function of the output file that must succeed (the has_* above)
#   env      - or settings of this script for the case: CHUNK BIND WARMUP WRAP COMPONENT_PATH FI_WANT
#   parameters  mpirun's arguments (after HIER_MPIRUN_ARGS)
#   program  the program and its arguments, or a runner: @killed LIMIT MODE [ARGS],
#            @slurm mpirun|srun, @mpi4py LAYOUT, @ompi_info
mapfile -t CASES <<'CASES'
# name                              |ranks|layout|requires|check           |env |parameters |program
np1_self                            | 1 | local | - | -                    | - | | $TC --allreduce-path self
np2_auto                            | 2 | local | - | -                    | - | | $TC
# user-defined operations: commutative ones served on every path, checked against a local fold; a non-commutative one falls back
np2_userop                          | 2 | local | - | -                    | - | | $T/test_userop
np3_userop                          | 3 | local | - | -                    | - | --mca mpi_yield_when_idle 1 | $T/test_userop --quick
# nonblocking calls as hier's requests: a fresh communicator's first calls (its set-up without waiting;
# with coll_hier_nonblocking_setup 0 they fall back), batches of every kind outstanding on two communicators, completed
# in every order, a blocking call among them, a user operation, a strided receive type; and switched off
np2_nonblocking                     | 2 | local | - | -                    | - | | $T/test_nonblocking
np4_nonblocking                     | 4 | local | - | -                    | - | --mca mpi_yield_when_idle 1 | $T/test_nonblocking --quick
# many requests outstanding at once on several communicators (a dup, a split with keys reversed, halves, world
# less one, a fresh dup every 5 rounds), started in order or interleaved across communicators differently on each
# rank, completed in every order (Wait in and out of order, Waitany, Waitall, Test loops); counts 0, 1, odd and
# large, in place, uneven, zero and all-to-one recvcounts, 8-bit sums that wrap; a rank whose round stands still
# prints its requests and hier's account of where each stands in its plan
np4_requests                        | 4 | local | - | -                    | - | --mca mpi_yield_when_idle 1 | $T/test_requests --rounds 300
np2_requests_persistent             | 2 | local | - | -                    | - | | $T/test_requests --rounds 200 --persistent
# a mismatched call among them (iallreduce on even ranks, iallgather on odd): an error on every rank, and every
# call after it completes, right (the communicator's, queued behind it too, go to the previous component)
np4_requests_mismatch               | 4 | local | - | has_mismatch_message | - | --mca mpi_yield_when_idle 1 \
    | $T/test_requests --rounds 30 --mismatch 4 --ops 20
np3_nonblocking_setup_off           | 3 | local | - | -                    | - | --mca mpi_yield_when_idle 1 --mca coll_hier_nonblocking_setup 0 \
    | $T/test_nonblocking --quick --first-falls-back
np3_nonblocking_off                 | 3 | local | - | -                    | - | --mca mpi_yield_when_idle 1 --mca coll_hier_nonblocking 0 \
    | $T/test_nonblocking --quick --expect-fallback fallback_forced
np2_bench_interleave                | 2 | local | - | interleaved_rows     | - | --mca coll_hier_stats 1 \
    | $B/contrib/hier_bench -c allreduce -b 8 -e 64 -f 8 -n 40 -w 2 --interleave 4
np2_nonblocking_mismatch            | 2 | local | - | has_mismatch_message | - | | $T/test_nonblocking --mismatch
# persistent calls (MPI_*_init; 4.1: MPIX_*_init) as hier's persistent requests: made first thing on a fresh
# communicator, every kind started together again and again (Startall), calls between starts, refusals
np2_persistent                      | 2 | local | - | -                    | - | | $T/test_persistent
np4_persistent                      | 4 | local | - | -                    | - | --mca mpi_yield_when_idle 1 | $T/test_persistent --quick
# hier's progress thread (coll_hier_progress_thread 1): it moves the requests' data, MPI's thread ends them
np2_nonblocking_progress_thread     | 2 | local | - | -                    | - | --mca coll_hier_progress_thread 1 | $T/test_nonblocking
np3_persistent_progress_thread      | 3 | local | - | -                    | - | --mca mpi_yield_when_idle 1 --mca coll_hier_progress_thread 1 \
    | $T/test_persistent --quick
np3_persistent_off                  | 3 | local | - | -                    | - | --mca mpi_yield_when_idle 1 --mca coll_hier_nonblocking 0 \
    | $T/test_persistent --quick --expect-fallback fallback_forced
# device buffers (the test backend's: the CPU cannot touch them) staged through each request's host mirrors
np3_nonblocking_device              | 3 | local | - | -                    | - | -x HIER_TEST_DEVICE_DELAY_US=5 --mca mpi_yield_when_idle 1 \
    | $T/test_nonblocking --quick --device
np3_persistent_device               | 3 | local | - | -                    | - | -x HIER_TEST_DEVICE_DELAY_US=5 --mca mpi_yield_when_idle 1 \
    | $T/test_persistent --quick --device
# communicators that come and go (BLACS): 10,000 rounds of split + 2 allreduces + free, served, nothing left
# behind, and a first call creates no communicator (han, the previous component on 5.0 and 6.0, built 6
# and 7 at each first call while hier's set-up called it, and keeps 0.67 kB per communicator on 5.0)
np2_split_use_free                  | 2 | local | - | -                    | - | | $T/test_churn
np4_split_use_free                  | 4 | local | - | -                    | - | --mca mpi_yield_when_idle 1 | $T/test_churn --rounds 3000
# bound to cores, NUMA domains come from hwloc and each rank's binding
np2_bound                           | 2 | local | - | -                    | BIND="--bind-to core" | | $TC --quick
np3_rsag                            | 3 | local | - | -                    | - | --mca coll_hier_allreduce_algorithm rsag | $TC --allreduce-path shm_rsag
np4_flat                            | 4 | local | - | -                    | - | --mca coll_hier_allreduce_algorithm flat | $TC --allreduce-path shm_flat
np4_numa                            | 4 | local | - | -                    | - | --mca coll_hier_allreduce_algorithm numa --mca coll_hier_numa_ranks_per_domain 2 \
    | $TC --allreduce-path shm_numa
np5_auto                            | 5 | local | - | -                    | - | | $TC
np3_cma                             | 3 | local | cma | -                  | - | --mca coll_hier_allgather_algorithm cma | $TC --allgather-path cma_copy
# auto's single-copy window, widened: served by it (rank 0's counters) and correct
np2_auto_cma_window                 | 2 | local | cma,cpus2 | has_cma_stats | - | --mca coll_hier_stats 1 --mca coll_hier_allgather_cma_min 1 \
    --mca coll_hier_allgather_cma_max 1G --mca coll_hier_allgather_ll_max 64 --mca coll_hier_allreduce_flat_max 512 | $TC
# auto's single-copy window measured on this node (both paths timed once per process): served by hier
# (one of its two paths, rank 0's counters), correct, and the times logged
np2_auto_cma_measured               | 2 | local | cma,cpus2 | cma_window_measured | - | --mca coll_hier_stats 1 --mca coll_hier_verbose 1 \
    --mca coll_hier_allgather_ll_max 64 | $TC
# the low-latency cut-off measured on this node (once per process and collective, both paths timed from
# 1 KiB to 8 KiB): every call served by hier, results checked, the times logged; crowded too
np2_ll_cut_off_measured             | 2 | local | - | ll_cut_off_measured  | - | --mca coll_hier_stats 1 --mca coll_hier_verbose 1 \
    | $B/contrib/hier_bench -c allreduce,allgather,reduce_scatter_block -b 256 -e 16K -n 20 -w 2
np4_ll_cut_off_measured             | 4 | local | - | ll_cut_off_measured  | - | --mca coll_hier_stats 1 --mca coll_hier_verbose 1 \
    --mca mpi_yield_when_idle 1 | $B/contrib/hier_bench -c allreduce,allgather,reduce_scatter_block -b 256 -e 16K -n 20 -w 2
# ...and kept: a later communicator whose first call is a request takes the cut-off the process measured
np2_ll_cut_off_kept                 | 2 | local | - | ll_cut_off_kept      | - | --mca coll_hier_stats 1 --mca coll_hier_verbose 1 \
    | $T/test_nonblocking --kept-cut-off
# ...and where the kernel refuses single copy (ranks not dumpable, no CAP_SYS_PTRACE: as under Yama's
# ptrace_scope 1): the allgather's cut-off timed against the segment, never single copy, every call served
np2_ll_cut_off_no_cma               | 2 | local | no_ptrace | ll_cut_off_no_cma | WRAP="setpriv --bounding-set=-sys_ptrace --" \
    | -x LD_PRELOAD=$B/tests/common/.libs/libnodump.so --mca coll_hier_stats 1 --mca coll_hier_verbose 1 \
    | $B/contrib/hier_bench -c allreduce,allgather,reduce_scatter_block -b 256 -e 64K -n 20 -w 2
# a rules file makes each algorithm serve in turn: results checked, every call on its path (rank 0's counters)
np3_rules_flat                      | 3 | local | - | -                    | - | --mca coll_hier_rules $RULES/flat.rules \
    | $TC --allreduce-path shm_flat --allgather-path shm_copy
np4_rules_numa                      | 4 | local | - | -                    | - | --mca coll_hier_rules $RULES/numa.rules \
    --mca coll_hier_numa_ranks_per_domain 2 --mca mpi_yield_when_idle 1 | $TC --allreduce-path shm_numa
np3_rules_rsag                      | 3 | local | - | -                    | - | --mca coll_hier_rules $RULES/rsag.rules | $TC --allreduce-path shm_rsag
np3_rules_cma                       | 3 | local | cma | -                  | - | --mca coll_hier_rules $RULES/cma.rules | $TC --allgather-path cma_copy
np2_rules_malformed                 | 2 | local | - | rules_refused        | - | --mca coll_hier_rules $RULES/malformed.rules | $TC --quick
np8_auto_numa3                      | 8 | local | - | -                    | - | --mca coll_hier_numa_ranks_per_domain 3 --mca coll_hier_allreduce_ll_max 256 \
    --mca coll_hier_allreduce_flat_max 8K | $TC
np3_derived                         | 3 | local | - | -                    | - | --mca mpi_param_check 0 | $TC --quick --derived
np3_device_staged                   | 3 | local | - | -                    | - | $DEV | $TC
np3_device_staged_userop            | 3 | local | - | -                    | - | $DEV | $T/test_userop --quick
np3_device_peer_direct_shm          | 3 | local | - | -                    | - | $DEV $PD | $TC --direct-min 4096
np3_device_force_staging            | 3 | local | - | -                    | - | $DEV $PD --mca coll_hier_device_force_staging 1 | $TC --quick
np4_device_on_even_ranks_shm        | 4 | local | - | -                    | - | $DEV -x HIER_TEST_DEVICE=even $PD | $TC --quick --direct-min 4096
# Real CUDA buffers where a GPU is present; elsewhere the test says SKIP
np2_cuda                            | 2 | local | - | -                    | - | | $T/test_cuda
# ...in 64 KiB pipeline chunks, over an endpoint that may register CUDA memory (shm: peer direct if it can)
np2_cuda_pipelined_shm              | 2 | local | - | shows_cuda_summary   | - | --mca coll_hier_device_stage_chunk 64K --mca coll_hier_fabric_provider shm \
    | $T/test_cuda
# The same on the stand-in driver. Over shm it also shows that a libfabric
# without CUDA support refuses the registration and the buffers are staged
# (once said, never an error).
np2_cuda_fake_driver                | 2 | local | - | -                    | - | $FC | $T/test_cuda
np3_cuda_fake_driver_shm            | 3 | local | - | has_refused_registration | - | $FC --mca coll_hier_verbose 1 --mca coll_hier_fabric_provider shm \
    | $T/test_cuda
np2_shm_unavailable                 | 2 | local | - | has_shm_message      | - | $FALLBACK_ARGS --mca coll_hier_shm_dir /nonexistent/dir --mca coll_hier_verbose 1 \
    | $TC --quick --skip-ompi-bugs --expect fallback:shm
# /dev/shm full: a private mount namespace with a 64 KiB tmpfs there (Open
# MPI's own shared memory moved to /tmp): hier falls back, results correct.
np3_shm_full                        | 3 | local | mount_ns | has_shm_full_message | WRAP="$S/tests/mpi/tiny-shm" \
    | $FALLBACK_ARGS --mca btl_vader_backing_directory /tmp --mca coll_hier_verbose 1 \
    | $TC --quick --skip-ompi-bugs --expect fallback:shm
np3_forced_fallback                 | 3 | local | - | -                    | - | $FALLBACK_ARGS --mca coll_hier_allreduce_algorithm fallback \
    --mca coll_hier_allgather_algorithm fallback --mca coll_hier_reduce_scatter_algorithm fallback \
    | $TC --quick --skip-ompi-bugs --expect fallback:forced
np3_fallbacks                       | 3 | local | - | -                    | - | | $T/test_fallback
# Ranks with different coll_hier parameters (one set in the environment of
# one process only) would run different steps: hier must see it and leave the
# communicator to the previous component, saying so.
np2_different_params                | 1 | local | - | has_params_message   | - | $FALLBACK_ARGS \
    | $TCP : -np 1 -x OMPI_MCA_coll_hier_allreduce_ll_max=1K -x OMPI_MCA_mca_base_component_path="$COMPONENT_PATH" $TCP
# ...or different rules (the files' contents differ; their paths may)
# (each side its own in its environment: Open MPI 5.0's mpirun gives a --mca to every application context)
np2_different_rules                 | 1 | local | - | has_params_message   | - | $FALLBACK_ARGS -x OMPI_MCA_coll_hier_rules=$RULES/flat.rules \
    | $TCP : -np 1 -x OMPI_MCA_coll_hier_rules=$RULES/rsag.rules -x OMPI_MCA_mca_base_component_path="$COMPONENT_PATH" $TCP
# Several nodes. Virtual nodes of 2 ranks on this host (coll_hier_ranks_per_node)...
np4_virtual_nodes_shm               | 4 | local | - | -                    | - | $FALLBACK_ARGS --mca coll_hier_ranks_per_node 2 --mca coll_hier_fabric_provider shm \
    | $TC --quick $NET
# Past every old cap (64 nodes): 72 virtual nodes of one rank, every
# collective from 8 B to 1 MiB checked exactly (doubles) and served between
# nodes (rank 0's counters: net paths only, no fallback).
np72_virtual_nodes_shm              | 72 | local | - | has_net_stats_only  | - | --mca mpi_yield_when_idle 1 --mca coll_hier_ranks_per_node 1 \
    --mca coll_hier_fabric_provider shm --mca coll_hier_stats 1 | $B/contrib/hier_bench -b 8 -e 1M -f 16 -n 3 -w 1 -d double
# ...and real ones: fake nodes (FAKE above)
nodes2x2_tcp                        | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $TC $NET
nodes2x2_split_use_free_tcp         | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $T/test_churn
nodes2x2_depth_default_tcp          | 4 | 2x2 | - | in_flight_2            | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_verbose 5 \
    | $B/contrib/hier_bench -c allreduce -b 4M -e 4M -n 2 -w 1 -d double
nodes2x2_depth_3_tcp                | 4 | 2x2 | - | in_flight_3            | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_verbose 5 \
    --mca coll_hier_pipeline_depth 3 | $B/contrib/hier_bench -c allreduce -b 4M -e 4M -n 2 -w 1 -d double
nodes2x2_userop_tcp                 | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $T/test_userop --quick
nodes2x2_nonblocking_tcp            | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $T/test_nonblocking
nodes2x2_persistent_tcp             | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $T/test_persistent --quick
nodes2x2_nonblocking_device_tcp     | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $T/test_nonblocking --quick --device
# hier's progress thread between nodes where a CPU is free for it (one rank per node, as the default
# turns it on; where ranks fill the CPUs, forced on, calls stalled for up to a minute: docs/limitations.md)
nodes2x1_nonblocking_progress_thread_tcp | 2 | 2x1 | - | -                 | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_progress_thread 1 \
    | $T/test_nonblocking
# The default parameters: served between nodes from the first call, over Open MPI's point-to-point until
# every rank's libfabric endpoint is open, then over libfabric: the sweep's every type and op (the
# unsigned 8-bit sums Open MPI 4.1's op/avx saturates among them), a dup, splits, interleaved
nodes2x2_default_tcp                | 4 | 2x2 | - | served_from_the_first  | WARMUP=1 | --mca coll_hier_fabric_provider tcp \
    --mca coll_hier_stats 1 | $TC $NET
nodes2x1_default_tcp                | 2 | 2x1 | - | served_from_the_first  | WARMUP=1 | --mca coll_hier_stats 1 | $TC $NET
nodes2x2_default_shm                | 4 | 2x2 | - | served_from_the_first  | WARMUP=1 | --mca coll_hier_fabric_provider shm \
    --mca coll_hier_stats 1 | $TC --quick $NET
nodes3x2_default_tcp                | 6 | 3x2 | - | served_from_the_first  | WARMUP=1 | \
    --mca coll_hier_stats 1 | $TC --quick $NET
nodes4x2_default_tcp                | 8 | 4x2 | - | served_from_the_first  | WARMUP=1 | \
    --mca coll_hier_stats 1 | $TC --quick $NET
nodes3x2_default_shm                | 6 | 3x2 | - | served_from_the_first  | WARMUP=1 | --mca coll_hier_fabric_provider shm \
    --mca coll_hier_stats 1 | $TC --quick $NET
nodes4x2_default_shm                | 8 | 4x2 | - | served_from_the_first  | WARMUP=1 | --mca coll_hier_fabric_provider shm \
    --mca coll_hier_stats 1 | $TC --quick $NET
nodes2x2_nonblocking_default        | 4 | 2x2 | - | -                      | WARMUP=1 | | $T/test_nonblocking
nodes2x2_persistent_default         | 4 | 2x2 | - | -                      | WARMUP=1 | | $T/test_persistent --quick
# the same between nodes: with the defaults (over the point-to-point, then libfabric once open), libfabric at
# the first call, Open MPI's point-to-point for good (no provider); persistent; uneven and larger layouts
nodes2x1_requests_default           | 2 | 2x1 | - | -                      | WARMUP=1 | | $T/test_requests --rounds 400 --seed 2
nodes2x2_requests_default           | 4 | 2x2 | - | -                      | WARMUP=1 | | $T/test_requests --rounds 2000 --seed 3
nodes2x2_requests_tcp               | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp \
    | $T/test_requests --rounds 1000 --seed 4
nodes2x2_requests_no_provider       | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider nonexistent \
    | $T/test_requests --rounds 1000 --seed 5
nodes2x2_requests_persistent_default | 4 | 2x2 | - | -                     | WARMUP=1 | | $T/test_requests --rounds 1000 --seed 6 --persistent
nodes2x2_requests_mismatch_default  | 4 | 2x2 | - | has_mismatch_message   | WARMUP=1 | --mca coll_hier_timeout 10 \
    | $T/test_requests --rounds 30 --mismatch 4 --ops 20 --seed 10
nodes3x2_requests_shm               | 6 | 3x2 | - | -                      | - | --mca coll_hier_fabric_provider shm \
    | $T/test_requests --rounds 200 --seed 7
nodes4x2_requests_default           | 8 | 4x2 | - | -                      | WARMUP=1 | | $T/test_requests --rounds 150 --seed 8
nodes3_uneven_requests_default      | 5 | 2,1,2 | - | -                    | WARMUP=1 | $UNEVEN | $T/test_requests --rounds 200 --seed 9
nodes2x2_mismatch_default           | 4 | 2x2 | - | -                      | WARMUP=1 | --mca coll_hier_timeout 5 \
    | $T/test_faults mismatch --limit 12
# two nodes of one rank each: small calls go by the pair path (one message each way, exec/hier_exec_pair.c),
# its mismatches an error on both ranks, over the point-to-point and over libfabric; the schedules' run
# at that shape with the pair path off
nodes2x1_mismatch_default           | 2 | 2x1 | - | -                      | WARMUP=1 | --mca coll_hier_timeout 5 \
    | $T/test_faults mismatch --limit 12
nodes2x1_mismatch_tcp               | 2 | 2x1 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_timeout 5 \
    | $T/test_faults mismatch --limit 12
nodes2x1_no_pair_tcp                | 2 | 2x1 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_net_pair_max 0 \
    | $TC --quick $NET
# Where the MPI library does not drive the libfabric its ofi components loaded (4.1 and 5.0 over tcp),
# hier's thread opens it; where it drives it, MPI's thread. (The thread that opens it may end before
# its creator says it runs: 5.0's components have initialised libfabric already, so it ends at once;
# said after, it was never seen done, and the ranks asked for ever: 7 runs in 12 before.)
nodes2x2_tcp_warmup                 | 4 | 2x2 | - | warm_where_allowed     | WARMUP=1 | --mca coll_hier_fabric_provider tcp --mca coll_hier_verbose 1 \
    | $TC --quick $NET --warm
# and where nothing had loaded libfabric (Open MPI without its ofi components, as a UCX-only build):
# hier's own thread opens it
nodes2x2_tcp_warmup_own_thread      | 4 | 2x2 | mpi_without_fabric | warm_in_own_thread | COMPONENT_PATH="$B/.libs:$NO_OFI" WARMUP=1 \
    | --mca coll_hier_fabric_provider tcp --mca coll_hier_verbose 1 | $TC --quick $NET --warm
nodes2x2_shm                        | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider shm | $TC --quick $NET
nodes2x1_tcp                        | 2 | 2x1 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $TC --quick $NET
nodes2x2_libfabric_older_than_headers | 4 | 2x2 | old_fabric_standin | has_old_libfabric | - | --mca mtl ^ofi --mca btl ^ofi \
    -x LD_LIBRARY_PATH="$OLD_FI" -x HIER_OLD_FI_REAL="$OLD_FI_REAL" -x HIER_OLD_FI_VERSION=1.12 --mca coll_hier_verbose 1 \
    --mca coll_hier_fabric_provider tcp | $TC --quick $NET
nodes2x2_libfabric_lane_library     | 4 | 2x2 | fi_lane | loaded_fi      | FI_WANT="libfabric $HIER_FI_LANE_VERSION (API 1.10 asked; $FI_LANE_HEADERS)" \
    | -x LD_LIBRARY_PATH="$HIER_FI_LANE/lib" --mca coll_hier_verbose 1 --mca coll_hier_fabric_provider tcp | $TC --quick $NET
nodes2x2_libfabric_system_library   | 4 | 2x2 | fi_lane | loaded_fi      | FI_WANT="libfabric $(fi_system_version) (API 1.10 asked; $FI_LANE_HEADERS)" \
    | -x LD_LIBRARY_PATH= --mca coll_hier_verbose 1 --mca coll_hier_fabric_provider tcp | $TC --quick $NET
nodes3_uneven_2_1_1_tcp_rxm         | 4 | 2,1,1 | - | -                    | - | $UNEVEN --mca coll_hier_fabric_provider 'tcp;ofi_rxm' | $TC --quick $NET
nodes3_uneven_rabenseifner          | 4 | 2,1,1 | - | -                    | - | $UNEVEN --mca coll_hier_fabric_provider tcp \
    --mca coll_hier_net_algorithm rabenseifner --mca coll_hier_net_split_min 0 | $TC --quick --world-only $NET --allreduce-path net_rh
# the same with radix 2: three nodes need a fold (one node's data crosses twice)
nodes3_uneven_rabenseifner_folded   | 4 | 2,1,1 | - | -                    | - | $UNEVEN --mca coll_hier_fabric_provider tcp \
    --mca coll_hier_net_algorithm rabenseifner --mca coll_hier_net_radix_max 2 --mca coll_hier_net_split_min 0 \
    | $TC --quick --world-only $NET --allreduce-path net_rh
# six nodes in radix 3 x 2: two levels, three members each in the first
nodes6x1_rabenseifner_mixed_radix   | 6 | 6x1 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_net_algorithm rabenseifner \
    --mca coll_hier_net_radix_max 3 | $TC --quick --world-only $NET --allreduce-path net_rh
nodes2x2_auto_rabenseifner          | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_net_rd_max_two_nodes 0 \
    --mca coll_hier_net_split_min 0 | $TC --quick --world-only $NET --allreduce-path net_rh
nodes4x2_round_robin_tcp            | 8 | 4x2 | - | -                      | - | --map-by node --mca coll_hier_fabric_provider tcp | $TC --quick $NET
nodes2x2_device_peer_direct_shm     | 4 | 2x2 | - | -                      | - | $DEV $PD | $TC $NET --direct-min 4096
nodes2x2_device_staged_tcp          | 4 | 2x2 | - | -                      | - | $DEV --mca coll_hier_fabric_provider tcp | $TC $NET
nodes2x2_cuda_fake_driver_tcp       | 4 | 2x2 | - | near_gpu               | - | $FC -x HIER_FAKE_CUDA_DEVICES=2 -x HIER_FAKE_CUDA_BUSID="$gpu_bus" \
    --mca coll_hier_verbose 1 --mca coll_hier_fabric_provider tcp | $T/test_cuda
# the default staging chunk: reduce_scatter's first calls unsplit, later ones split
nodes2x2_cuda_fake_driver_default_chunk | 4 | 2x2 | - | -                  | - | -x LD_LIBRARY_PATH="$FAKECUDA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    -x HIER_FAKE_CUDA_DEVICES=2 --mca coll_hier_fabric_provider tcp | $T/test_cuda
# between nodes, each algorithm by a rules file (rank 0's counters: every world allreduce on its path)
nodes2x2_rules_ring                 | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_rules $RULES/net_ring.rules \
    | $TC --quick --world-only $NET --allreduce-path net_ring
nodes2x2_rules_rd                   | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_rules $RULES/net_rd.rules \
    | $TC --quick --world-only $NET --allreduce-path net_rd
# a rule's chunk= and depth=: the pipeline cut and run as it says (logged with the choice), results right
nodes2x2_rules_ring_pipelining      | 4 | 2x2 | - | has_rule_pipelining    | - | --mca coll_hier_fabric_provider tcp \
    --mca coll_hier_rules $RULES/net_ring_pipe.rules --mca coll_hier_verbose 2 | $TC --quick --world-only $NET --allreduce-path net_ring
nodes3_uneven_rules_rabenseifner    | 4 | 2,1,1 | - | -                    | - | $UNEVEN --mca coll_hier_fabric_provider tcp --mca coll_hier_rules $RULES/net_rh.rules \
    --mca coll_hier_net_split_min 0 | $TC --quick --world-only $NET --allreduce-path net_rh
nodes2x2_ring_big_chunks            | 4 | 2x2 | - | -                      | - | --mca coll_hier_net_algorithm ring --mca coll_hier_net_split_min 0 \
    --mca coll_hier_fabric_slot_size 4K --mca coll_hier_fabric_slots 2 | $TC --quick --world-only $NET --allreduce-path net_ring
# (a rank whose network peer left on a mismatch its own node never saw waits out the timeout once the
# wire stands still, and its node mate, waiting for it, its own: twice the timeout at most, 5.8 s and
# 10.9 s seen on a loaded machine)
nodes2x2_mismatch                   | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_timeout 5 \
    | $T/test_faults mismatch --limit 12
nodes2x2_mismatch_odd2              | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_timeout 5 \
    | $T/test_faults mismatch --odd 2 --limit 12
nodes2x2_stopped_rank               | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_timeout 20 \
    | $T/test_faults stop --odd 1 --seconds 3
nodes2x2_killed_rank_recovery       | 4 | 2x2 | ompi4 | -                  | - | --mca coll_hier_fabric_provider tcp --enable-recovery | @killed 7 recovers
nodes2x2_killed_rank_recovery_nonblocking | 4 | 2x2 | ompi4 | -            | - | --mca coll_hier_fabric_provider tcp --enable-recovery \
    | @killed 7 recovers --nonblocking 1
nodes2x2_killed_rank                | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | @killed 7 ends
nodes2x2_killed_rank_nonblocking    | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | @killed 7 ends --nonblocking 1
nodes2x2_stats                      | 4 | 2x2 | - | has_net_stats          | - | --mca coll_hier_stats 1 | $TC --quick --world-only $NET
# MPI_THREAD_MULTIPLE: collectives on several communicators at once from several threads
# (and communicators freed while others run)
nodes2x2_threads_tcp                | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp | $T/test_threads --threads 4
nodes2x2_threads_shm                | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider shm | $T/test_threads --threads 3
nodes2x2_threads_persistent_tcp     | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider tcp \
    | $T/test_threads --threads 3 --iters 3 --persistent
# communicator churn between nodes: each dup's mailbox on the shared channels
nodes2x2_churn_tcp                  | 4 | 2x2 | - | has_churn_net_stats    | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_stats 1 \
    | $B/contrib/hier_churn --iters 30 --comms 30
nodes2x2_ddp_gloo                   | 4 | 2x2 | torch | -                  | - | -x GLOO_SOCKET_IFNAME=lo --mca coll ^hier \
    | $DDP --comm gloo --losses "$LOG/ddp.losses"
nodes2x2_ddp_hier                   | 4 | 2x2 | torch | ddp_served_by_hier | - | -x GLOO_SOCKET_IFNAME=lo --mca coll_hier_fabric_provider tcp \
    --mca coll_hier_stats 1 | $DDP --expect-losses "$LOG/ddp.losses"
nodes2x2_ddp_hier_nonblocking       | 4 | 2x2 | torch | ddp_nb_served_by_hier | - | -x GLOO_SOCKET_IFNAME=lo --mca coll_hier_fabric_provider tcp \
    --mca coll_hier_stats 1 | $DDP --nonblocking --expect-losses "$LOG/ddp.losses"
mpi4py_suite_np2                    | 2 | local | mpi4py | -                 | - | | @mpi4py --np 2
mpi4py_suite_np3                    | 3 | local | mpi4py | -                 | - | | @mpi4py --np 3
mpi4py_suite_fakenodes2x2           | 4 | 2x2 | mpi4py | -                   | - | | @mpi4py --fake-nodes 2x2
# No usable libfabric provider: served between nodes over Open MPI's point-to-point for good, every
# kind of call (the first fails to open it, with fabric_warmup 0; the default asks in the background)
nodes2x2_no_provider                | 4 | 2x2 | - | pml_paths_only         | - | --mca coll_hier_fabric_provider nonexistent \
    --mca coll_hier_stats 1 | $TC $NET
nodes4x2_no_provider                | 8 | 4x2 | - | pml_paths_only         | - | --mca coll_hier_fabric_provider nonexistent \
    --mca coll_hier_stats 1 | $TC --quick $NET
nodes3_uneven_no_provider_default   | 4 | 2,1,1 | - | pml_paths_only       | WARMUP=1 | $UNEVEN --mca coll_hier_fabric_provider nonexistent \
    --mca coll_hier_stats 1 | $TC --quick $NET
nodes2x2_no_provider_nonblocking    | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider nonexistent | $T/test_nonblocking
nodes2x2_no_provider_persistent     | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider nonexistent | $T/test_persistent --quick
nodes2x2_no_provider_mismatch       | 4 | 2x2 | - | -                      | - | --mca coll_hier_fabric_provider nonexistent --mca coll_hier_timeout 5 \
    | $T/test_faults mismatch --limit 12
netns_2x2_rails3_default_nics       | 4 | netns:2:2:3 | - | rails_share    | - | --mca coll_hier_fabric_provider tcp --mca coll_hier_stats 2 \
    --mca coll_hier_verbose 1 --mca mpi_yield_when_idle 1 | $B/contrib/hier_bench -c allreduce,allgather -b 16M -e 16M -n 5
netns_2x2_rails2                    | 4 | netns:2:2:2 | - | rails_agree    | - | $NETNS_TCP | $TC --world-only
netns_2x1_rails2_striped            | 2 | netns:2:1:2 | - | rails_agree    | - | $NETNS_TCP | $TC --world-only
netns_3_uneven_rails2               | 4 | netns:3:2,1,1:2 | - | rails_agree | - | $NETNS_TCP $UNEVEN | $TC --quick --world-only
slurm_sbatch_mpirun_2x2             | 4 | slurm | - | -                    | - | | @slurm mpirun
slurm_sbatch_srun_pmix_2x2          | 4 | slurm | - | -                    | - | | @slurm srun
np3_threads                         | 3 | local | - | -                    | - | | $T/test_threads --threads 3
np3_threads_persistent              | 3 | local | - | -                    | - | | $T/test_threads --threads 3 --iters 3 --persistent
# libmpi dlopened RTLD_LOCAL by a program not linked with it (mpi4py 4's
# wheels): hier must still load (its stats lines) and serve the allreduces.
np2_libmpi_dlopen_local             | 2 | local | - | has_dlopen_stats     | - | --mca coll_hier_stats 1 | $T/test_dlopen "$LIBMPI"
np2_one_gib_per_rank                | 2 | local | - | -                    | CHUNK=262144 | | $T/test_big
# counts past INT_MAX (MPI_Allgather_c, MPI_Allreduce_c: size_t counts reach hier on 6.0); SKIP before MPI 4
np2_bigcount_past_int_max           | 2 | local | - | -                    | CHUNK=262144 | | $T/test_big --bigcount
# Communicator churn (dups, split storms, live ones) with checked 256 KiB
# first calls: every communicator maps pipeline buffers, recycled from the
# pool; the /dev/shm check at the end sees that none stays behind.
np4_churn                           | 4 | local | - | has_churn_stats      | CHUNK=65536 | --mca mpi_yield_when_idle 1 --mca coll_hier_stats 1 \
    | $B/contrib/hier_churn --iters 30 --comms 30 --bytes 256K
np4_stats                           | 4 | local | - | has_stats_lines      | - | --mca coll_hier_stats 1 | $TC --quick
# Faults (never hang, never guess): calls that differ between ranks fail on
# every rank within the timeout (5 s here) and the communicator falls back;
# a rank stopped for 3 s (past the spin, within the timeout) changes
# nothing; a killed rank fails its local peers at once.
np2_mismatch                        | 2 | local | - | -                    | - | --mca coll_hier_timeout 5 | $TF mismatch --limit 8
np3_mismatch_odd1                   | 3 | local | - | -                    | - | --mca coll_hier_timeout 5 | $TF mismatch --odd 1 --limit 8
np4_stopped_rank                    | 4 | local | - | -                    | - | --mca coll_hier_timeout 20 | $TF stop --odd 1 --seconds 3
np3_killed_rank                     | 3 | local | - | -                    | - | | @killed 7 ends
np3_killed_rank_nonblocking         | 3 | local | - | -                    | - | | @killed 7 ends --nonblocking 1
ompi_info                           | 1 | local | - | -                    | - | | @ompi_info
CASES
for row in "${CASES[@]}"; do
    # a row goes on over lines that end in "\"
    if [ -n "${pending:-}" ]; then row="$pending $row" pending=; fi
    [[ $row == *\\ ]] && { pending=${row%\\}; continue; }
    [[ $row =~ ^[[:space:]]*(#|$) ]] && continue
    IFS='|' read -r c_name c_np c_layout c_requires c_check c_env c_params c_prog <<<"$row"
    for v in c_name c_np c_layout c_requires c_check c_env c_params c_prog; do
        read -r "${v?}" <<<"${!v}" # trims the padding
    done
    run_case "$c_name" "$c_np" "$c_layout" "$c_requires" "$c_check" "${c_env:--}" "$c_params" "$c_prog"
done

if [ -n "${HIER_TEST_DRY:-}" ]; then
    echo "mpi: dry run, nothing ran ($skipped would skip here)"
    rm -rf "$LOG"
    exit 0
fi
# Not a case but the run's closing check: whatever the selected cases left.
shm_after=$(hier_segments)
if [ "$shm_after" -le "$shm_before" ]; then
    case_pass "no coll-hier segment left in /dev/shm"
else
    case_fail "$((shm_after - shm_before)) coll-hier segment(s) left in /dev/shm"
fi

echo "mpi: $passed passed, $failed failed, $skipped skipped (a program said SKIP: its requirement is missing)"
[ $failed -eq 0 ] && rm -rf "$LOG"
[ $failed -eq 0 ] || exit 1
# (automake's SKIP when nothing ran: every case selected lacked its requirement)
[ $passed -gt 1 ] || [ $skipped -eq 0 ] || exit 77
