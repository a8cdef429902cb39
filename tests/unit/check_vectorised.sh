#!/bin/sh
# check_vectorised.sh: the reduction kernels of the built core library are
# vector code. They are plain loops that only the compiler vectorises, and
# a build whose flags leave them scalar is still correct, only about five
# times slower (configure's default -O2 came after our -O3 and did exactly
# that, unnoticed, until perf showed it). So check the instructions: every
# clone of a few float, double and int32 kernels must contain packed
# arithmetic. x86-64 only (elsewhere: skipped, exit 77).
set -u
lib=${HIER_BUILDDIR:-.}/.libs/libhiercore.a

case $(uname -m) in x86_64) ;; *) echo "SKIP: x86-64 only"; exit 77 ;; esac
command -v objdump >/dev/null || { echo "SKIP: no objdump"; exit 77; }
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }

dis=$(mktemp) || exit 1
trap 'rm -f "$dis"' EXIT
objdump -d --no-show-raw-insn "$lib" >"$dis" || { echo "FAIL: objdump $lib"; exit 1; }

fail=0
checked=0
# kernel name, then the packed instruction (a regular expression) its loop must use;
# MIN/MAX are NaN-aware selects, so packed compares rather than maxpd
for spec in comb_float_sum:addps acc_float_sum:addps acc_double_sum:addpd comb_double_max:cmp[a-z]+pd \
    acc_int32_sum:paddd; do
    fn=hier_reduce_${spec%%:*}
    insn=${spec#*:}
    clones=$(grep -oE "<$fn(\.[a-z0-9_]+)?>:" "$dis" | grep -v resolver | tr -d '<>:')
    [ -n "$clones" ] || { echo "FAIL: $fn not found in $lib"; fail=1; continue; }
    for c in $clones; do
        body=$(awk -v f="<$c>:" '$2 == f {on = 1; next} on && /^$/ {exit} on' "$dis")
        checked=$((checked + 1))
        if printf '%s\n' "$body" | grep -qE "[[:space:]]v?$insn[[:space:]]"; then
            echo "ok: $c uses $insn"
        else
            echo "FAIL: $c has no packed $insn: the loop was not vectorised (check the CFLAGS)"
            fail=1
        fi
    done
done
echo "$checked kernel clones checked"
exit $fail
