#!/usr/bin/env bash
# check_deploy.sh: what of contrib/deploy can run here does.
#  1. hier-install builds hier against the Open MPI under test into a fresh
#     prefix, writes a parameters file, and a job given only that file
#     (OMPI_MCA_mca_base_param_files, as the system file would be read) is
#     served by hier: rank 0's counters, no fallback;
#  2. --params-only rewrites the file's coll/hier lines, keeps the others;
#  3. ssh/hier-mpirun-efa in its tcp form (HIER_IFACE=lo) runs a job hier serves;
#  3b. --params-only --tune --tune-args --quick: hier-tune (installed) writes
#     a rules file of this machine, the parameters name it, and a job given
#     only the parameters file loads it and is served by hier;
#  4. the EKS manifest is an MPIJob of kubeflow.org/v2beta1 whose workers ask
#     for EFA, hugepages and a memory-backed /dev/shm, and the Dockerfile's
#     build step is hier-install.
# Exit 0 when all pass, 1 otherwise; a part that cannot run here says SKIP.
set -u
S=${HIER_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$S/contrib/deploy
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d /tmp/hier-deploy.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
served() { # served LOG: hier's stats lines, every one on a path of hier's
    grep -q '^coll:hier:stats coll=allreduce path=\(self\|shm_\|cma_\|net_\)' "$1" && ! grep -q 'path=fallback' "$1"
}

# 1.
printf '# a line of the site that must survive\nbtl_base_warn_component_unused = 0\n' >"$tmp/params.conf"
if "$D/hier-install" --prefix "$tmp/prefix" --params-file "$tmp/params.conf" --jobs 2 >"$tmp/install.log" 2>&1; then
    OMPI_MCA_mca_base_param_files="$tmp/params.conf" mpirun --oversubscribe --bind-to none -np 2 \
        --mca coll_hier_stats 1 "$tmp/prefix/bin/hier_bench" -b 8 -e 64K -f 8 -n 5 >"$tmp/job.log" 2>&1
    if [ $? -eq 0 ] && served "$tmp/job.log"; then
        echo "PASS: hier-install: a job given only its parameters file is served by hier"
    else
        fail "hier-install: the job was not served by hier"; tail -n 15 "$tmp/job.log"
    fi
else
    fail "hier-install"; tail -n 15 "$tmp/install.log"
fi

# 2.
if [ -f "$tmp/prefix/lib/openmpi/mca_coll_hier.so" ]; then
    "$D/hier-install" --prefix "$tmp/prefix" --params-file "$tmp/params.conf" --params-only --provider tcp \
        >"$tmp/params.log" 2>&1
    if [ "$(grep -c '^# >>> coll/hier' "$tmp/params.conf")" = 1 ] && grep -q '^coll_hier_fabric_provider = tcp' "$tmp/params.conf" &&
        grep -q '^btl_base_warn_component_unused = 0' "$tmp/params.conf" &&
        ! grep -q '^coll_hier_pipeline_depth' "$tmp/params.conf"; then
        echo "PASS: hier-install --params-only: its lines replaced once, the site's kept"
    else
        fail "hier-install --params-only"; cat "$tmp/params.conf"
    fi
    # on EFA the provider's default depth (0: four chunks in flight, test_model), and Open MPI takes the provider
    "$D/hier-install" --prefix "$tmp/prefix" --params-file "$tmp/params.conf" --params-only --provider efa \
        >"$tmp/params.log" 2>&1
    values=$(OMPI_MCA_mca_base_param_files="$tmp/params.conf" ompi_info --param coll hier --level 9 --parsable 2>/dev/null |
        sed -n 's/^mca:coll:hier:param:coll_hier_\(pipeline_depth\|fabric_provider\):value:/\1=/p' | sort | tr '\n' ' ')
    if [ "$(grep -c '^# >>> coll/hier' "$tmp/params.conf")" = 1 ] && ! grep -q '^coll_hier_pipeline_depth' "$tmp/params.conf" &&
        [ "$values" = "fabric_provider=efa pipeline_depth=0 " ]; then
        echo "PASS: hier-install --provider efa: the provider set, the depth left to it, as ompi_info reads them"
    else
        fail "hier-install --provider efa (ompi_info says '$values')"; cat "$tmp/params.conf"
    fi
fi

# 3.
if [ -f "$tmp/prefix/lib/openmpi/mca_coll_hier.so" ]; then
    echo "localhost slots=2" >"$tmp/hosts"
    HIER_PREFIX="$tmp/prefix" HIER_IFACE=lo HIER_MPIRUN_ARGS="--oversubscribe --bind-to none" \
        "$D/ssh/hier-mpirun-efa" "$tmp/hosts" 2 "$tmp/prefix/bin/hier_bench" -b 8 -e 4K -f 8 -n 5 >"$tmp/ssh.log" 2>&1
    if [ $? -eq 0 ] && served "$tmp/ssh.log"; then
        echo "PASS: ssh/hier-mpirun-efa (tcp on lo): served by hier"
    else
        fail "ssh/hier-mpirun-efa"; tail -n 15 "$tmp/ssh.log"
    fi
fi

# 3b.
if [ -f "$tmp/prefix/lib/openmpi/mca_coll_hier.so" ]; then
    "$D/hier-install" --prefix "$tmp/prefix" --params-file "$tmp/params.conf" --params-only --tune \
        --tune-args "--quick" >"$tmp/tune.log" 2>&1
    rules=$(sed -n 's/^coll_hier_rules = //p' "$tmp/params.conf")
    OMPI_MCA_mca_base_param_files="$tmp/params.conf" mpirun --oversubscribe --bind-to none -np 2 \
        --mca coll_hier_stats 1 --mca coll_hier_verbose 1 "$tmp/prefix/bin/hier_bench" -b 8 -e 64K -f 8 -n 5 \
        >"$tmp/tuned-job.log" 2>&1
    if [ $? -eq 0 ] && [ -n "$rules" ] && head -2 "$rules" | grep -q "^machine cpu " &&
        grep -q "rules file $rules loaded" "$tmp/tuned-job.log" && served "$tmp/tuned-job.log"; then
        echo "PASS: hier-install --tune: hier-tune --quick's rules file in the parameters, loaded, served"
    else
        fail "hier-install --tune"; tail -n 15 "$tmp/tune.log" "$tmp/tuned-job.log"
    fi
fi

# 4.
if /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
    if /usr/bin/python3 - "$D/eks/mpijob.yaml" <<'EOF'; then
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
assert job["apiVersion"] == "kubeflow.org/v2beta1" and job["kind"] == "MPIJob", "not a v2beta1 MPIJob"
specs = job["spec"]["mpiReplicaSpecs"]
assert set(specs) == {"Launcher", "Worker"}, specs.keys()
cmd = specs["Launcher"]["template"]["spec"]["containers"][0]["command"]
assert cmd[0] == "mpirun" and "coll_hier_priority" in cmd, "the launcher runs no mpirun with hier"
worker = specs["Worker"]["template"]["spec"]
limits = worker["containers"][0]["resources"]["limits"]
assert "vpc.amazonaws.com/efa" in limits and "hugepages-2Mi" in limits, limits
shm = [v for v in worker["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
mounts = [m["mountPath"] for m in worker["containers"][0]["volumeMounts"]]
assert shm and "/dev/shm" in mounts, "no memory-backed /dev/shm"
EOF
        echo "PASS: eks/mpijob.yaml: a v2beta1 MPIJob, workers with EFA, hugepages and /dev/shm"
    else
        fail "eks/mpijob.yaml"
    fi
else
    echo "SKIP: eks/mpijob.yaml (no python3-yaml)"
fi
if grep -q '^RUN .*contrib/deploy/hier-install' "$D/eks/Dockerfile" ||
    grep -A2 '^RUN' "$D/eks/Dockerfile" | grep -q 'contrib/deploy/hier-install'; then
    echo "PASS: eks/Dockerfile builds with hier-install"
else
    fail "eks/Dockerfile does not run hier-install"
fi
exit $failed
