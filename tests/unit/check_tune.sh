#!/usr/bin/env bash
# check_tune.sh: hier-tune's one-node rules from given times (no run):
#  1. a smaller chunk that is 10% faster than the segment's own at a size
#     it cuts gets its rule's chunk=; one 5% faster, or one the call fits
#     in (the same steps: noise), does not;
#  2. a fixed rule only where an algorithm the built-in rules would not
#     take there, or a smaller chunk, is 10% faster at two neighbouring
#     sizes; none between the paths the node measures at run time (low
#     latency and the schedule from 1 KiB, single copy and the segment);
#     the built-in rules after the fixed ones; a fixed rule kept only where
#     it measures 5% faster than the defaults again (confirm);
#  3. the rules written load, and hier-info shows each range's chunk.
# Exit 0 when all pass, 1 otherwise.
set -u
S=${HIER_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${HIER_BUILDDIR:-$S}
[ -x "$B/contrib/hier-info" ] || { echo "FAIL: no $B/contrib/hier-info (make first)"; exit 1; }
tmp=$(mktemp -d /tmp/hier-tune-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
python3 - "$S/contrib/hier-tune" "$B/contrib" "$tmp/t.rules" <<'EOF' || exit 1
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("hier_tune", sys.argv[1])
tune = importlib.util.module_from_spec(importlib.util.spec_from_loader("hier_tune", loader))
loader.exec_module(tune)
tune.HERE = sys.argv[2]  # (hier-info is a build product)
K, M = 1 << 10, 1 << 20
# allreduce, np 2: rsag at 128 KiB-8 MiB; a 64 KiB chunk 1% / 3% / 25% / 20% / 6% / 3% / 20% faster
rsag = {8: 5.0, 128 * K: 100.0, 256 * K: 200.0, 512 * K: 400.0, 1 * M: 800.0, 2 * M: 1600.0, 4 * M: 3200.0,
        8 * M: 6400.0}
small = {128 * K: 99.0, 256 * K: 194.0, 512 * K: 300.0, 1 * M: 640.0, 2 * M: 1510.0, 4 * M: 3100.0, 8 * M: 5330.0}
flat = {s: 3 * t for s, t in rsag.items()}
flat[256 * K] = 160.0  # (20% faster at one size alone: noise)
# reduce_scatter: low latency the built-in choice below 1 KiB, measured against the segment above
ll = {256: 2.0, 512: 2.4, 2 * K: 3.0, 4 * K: 4.0, 8 * K: 6.0}
shm = {256: 1.5, 512: 1.9, 2 * K: 2.0, 4 * K: 2.5, 8 * K: 9.0, 2 * M: 900.0}
res = {"allreduce": {"rsag": rsag, "flat": flat},
       "allgather": {"shm": {64 * K: 30.0, 128 * K: 60.0, 1 * M: 400.0, 2 * M: 800.0},
                     "cma": {64 * K: 20.0, 128 * K: 40.0, 1 * M: 600.0, 2 * M: 1200.0}},
       "reduce_scatter": {"ll": ll, "shm": shm}}
chunked = {"allreduce": {("rsag", 64 * K): small, ("flat", 64 * K): small},
           "allgather": {("shm", 128 * K): {1 * M: 320.0, 2 * M: 640.0}}, "reduce_scatter": {}}
fail = []
if tune.chunk_for("rsag", 512 * K, 512 * K, 400.0, chunked["allreduce"]) != 64 * K:
    fail.append("a chunk 25% faster not taken")
if tune.chunk_for("rsag", 512 * K, 64 * K, 400.0, chunked["allreduce"]):
    fail.append("a chunk taken for a call it does not cut")
if tune.chunk_for("rsag", 2 * M, 2 * M, 1600.0, chunked["allreduce"]):
    fail.append("a chunk 6% faster taken")
if tune.chunk_for("rsag", 8, 8, 5.0, chunked["allreduce"]):
    fail.append("a chunk taken where none was timed")
builtin = tune.builtin_rules()
groups = tune.node_fixed({2: (res, {}, chunked)}, [2], 8 * M)
lines = tune.node_lines(groups, builtin)
print("\n".join(lines))
fixed = [l.split() for l in lines if l not in builtin]
want = [["allreduce", "rsag", "-", "370728", "1482910", "chunk=64K"],
        ["allgather", "cma", "own_cores,cma_pays", "185364", "any"], ["allgather", "shm", "-", "185364", "any", "chunk=128K"],
        ["reduce_scatter", "shm", "-", "0", "1K"]]
if [f[1:] for f in fixed] != want:
    fail.append("fixed rules %s, want %s: a chunk 20-25%% faster at two sizes (the segment's after single "
                "copy where the node measures it faster), the segment 25%% faster than low latency below 1 KiB; "
                "nothing at one size alone, nothing between the paths the node measures at run time" % (fixed, want))
for coll in ("allreduce", "allgather", "reduce_scatter"):
    mine = [l for l in lines if l.split()[1] == coll and l in builtin]
    if mine != [l for l in builtin if l.split()[:2] == ["node", coll]]:
        fail.append("%s: the built-in rules not after the fixed ones" % coll)
# confirm: a group kept only where its rules measure 5% faster than the defaults again
def fake_bench(np_, extra, coll, top, component_dir, bench, lo):
    gain = {"allreduce": 1.2, "allgather": 0.95, "reduce_scatter": 1.06}[coll] if "coll_hier_rules" in " ".join(extra) else 1.0
    s, out = lo, {}
    while s <= top:
        out[s] = 100.0 / gain
        s *= 2
    return out, set()
tune.bench_run = fake_bench
tune.config_args = lambda name, d: []
kept = tune.confirm(groups, builtin, 2, 8 * M, None, "hier_bench", sys.argv[3], lambda m: print("log: " + m))
if [g["coll"] for g in kept] != ["allreduce", "reduce_scatter"]:
    fail.append("confirm kept %s, want allreduce (1.2x) and reduce_scatter (1.06x), not allgather (0.95x)"
                % [g["coll"] for g in kept])
open(sys.argv[3], "w").write("coll-hier-rules 1\n" + "\n".join(lines) + "\n")
for f in fail:
    print("FAIL: " + f)
sys.exit(1 if fail else 0)
EOF
"$B/contrib/hier-info" --rules "$tmp/t.rules" --coll allreduce --ppn 2 -b 128K -e 8M >"$tmp/info" 2>&1 ||
    { echo "FAIL: the rules written do not load"; cat "$tmp/info"; exit 1; }
cat "$tmp/info"
# 512 KiB and 1 MiB at 64 KiB, 2-8 MiB at the segment's 256 KiB
for want in '512 KiB - 1 MiB +rsag +shm_rsag +64 KiB' '2 MiB - 8 MiB +rsag +shm_rsag +256 KiB'; do
    grep -Eq -- "$want" "$tmp/info" || { echo "FAIL: hier-info has no line /$want/"; exit 1; }
done
echo "PASS: hier-tune fixes a choice only where one measured 10% faster at two sizes, and its rules load"
