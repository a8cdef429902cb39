#!/usr/bin/env bash
# check_hier_info.sh: hier-info's account of a fixed rules file (docs/rules.md):
#  1. each size range with its algorithm, path and the file's line, by the node's ranks;
#  2. a forced algorithm named as forced, with its path;
#  3. the built-in rules between nodes named as such; a rule's chunk= and depth=;
#  4. --print-rules prints the file's rules back, read the same way;
#  5. a malformed file refused, its line named, exit status 2.
# Exit 0 when all pass, 1 otherwise.
set -u
B=${HIER_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
info=$B/contrib/hier-info
[ -x "$info" ] || { echo "FAIL: no $info (make first)"; exit 1; }
tmp=$(mktemp -d /tmp/hier-info-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
check() { # check WHAT FILE PATTERN...: every pattern (an extended regex) matches a line of FILE
    local what=$1 file=$2 p
    shift 2
    for p in "$@"; do
        if ! grep -Eq -- "$p" "$file"; then
            echo "FAIL: $what: no line matches /$p/"
            sed 's/^/    /' "$file"
            failed=1
            return
        fi
    done
    echo "PASS: $what"
}
cat >"$tmp/t.rules" <<'EOF'
coll-hier-rules 1
# one node: the low-latency path to 256 B, flat to 64 KiB on nodes of 2 ranks, rsag beyond
node allreduce ll   -       0    256
node allreduce flat ppn<=2  0    64K
node allreduce rsag -       0    any
EOF
R=$tmp/t.rules
# 1.
"$info" --rules "$R" --coll allreduce --ppn 2 -b 8 -e 1M >"$tmp/ppn2" 2>&1
check "file's rules on 2 ranks" "$tmp/ppn2" \
    "^ +8 B - 256 B +ll +shm_ll .* $R:3\$" "^ +512 B - 8 KiB +flat +shm_flat .* $R:4\$" \
    "^ +16 KiB - 64 KiB +flat +shm_flat +256 KiB +1 .* $R:4\$" "^ +128 KiB - 1 MiB +rsag +shm_rsag .* $R:5\$"
"$info" --rules "$R" --coll allreduce --ppn 4 -b 8 -e 1M >"$tmp/ppn4" 2>&1
check "file's rules on 4 ranks (ppn<=2 does not hold)" "$tmp/ppn4" \
    "^ +8 B - 256 B +ll +shm_ll .* $R:3\$" "^ +512 B - 8 KiB +rsag +shm_rsag +8 KiB .* $R:5\$" \
    "^ +16 KiB - 1 MiB +rsag +shm_rsag +256 KiB .* $R:5\$"
# 2.
"$info" --rules "$R" --coll allreduce --ppn 2 --param allreduce_algorithm=numa -b 8 -e 64K >"$tmp/forced" 2>&1
check "a forced algorithm" "$tmp/forced" "^ +8 B - 4 KiB .* shm_numa .* forced \(coll_hier_allreduce_algorithm\)\$" \
    "^ +8 KiB - 64 KiB .* shm_numa .* forced \(coll_hier_allreduce_algorithm\)\$"
# 3.
"$info" --coll allreduce --nodes 16 --ppn 8 -b 8 -e 64M >"$tmp/net" 2>&1
check "built-in rules between nodes" "$tmp/net" "^ +8 B - .* rd +net_rd .* built-in net allreduce rule 2\$" \
    "^ .* - 64 MiB +rabenseifner +net_rh .* built-in net allreduce rule 3\$"
# 3b. a rule's chunk= and depth= (below the segment's), shown where they apply
printf 'coll-hier-rules 1\nnet allreduce rd - 0 64K\nnet allreduce ring - 0 any chunk=128K depth=1\n' >"$tmp/pipe.rules"
"$info" --rules "$tmp/pipe.rules" --coll allreduce --nodes 4 --ppn 2 -b 8 -e 16M >"$tmp/pipe" 2>&1
check "a rule's chunk and depth" "$tmp/pipe" "^ +16 KiB - 64 KiB +rd +net_rd +1 MiB +2 .*pipe.rules:2\$" \
    "^ +128 KiB - 16 MiB +ring +net_ring +128 KiB +1 .*pipe.rules:3\$"
# 4.
"$info" --rules "$R" --print-rules >"$tmp/printed" 2>&1
check "--print-rules" "$tmp/printed" "^coll-hier-rules 1\$" "^node +allreduce +flat +ppn<=2 +0 +64K\$" \
    "^node +allgather +cma +own_cores,cma_pays +allgather_cma_min +any\$"
"$info" --rules "$tmp/printed" --coll allreduce --ppn 2 -b 8 -e 1M | sed "s|$tmp/printed:[0-9]*||" >"$tmp/again"
sed "s|$R:[0-9]*||" "$tmp/ppn2" | sed "s|rules: $R|rules: $tmp/printed|" | diff -q - "$tmp/again" >/dev/null &&
    echo "PASS: the printed rules choose as the file" ||
    { echo "FAIL: the printed rules choose otherwise"; diff <(sed "s|$R:[0-9]*||" "$tmp/ppn2") "$tmp/again"; failed=1; }
# 5.
printf 'coll-hier-rules 1\nnode allreduce rsag - 0 any\nnode allreduce flat - 0 1K\n' >"$tmp/bad.rules"
"$info" --rules "$tmp/bad.rules" --coll allreduce >"$tmp/bad" 2>&1
rc=$?
if [ $rc -eq 2 ]; then
    check "a malformed file refused" "$tmp/bad" "rules $tmp/bad.rules, line 3: the last rule"
else
    echo "FAIL: a malformed file: exit $rc, not 2"; failed=1
fi
exit $failed
