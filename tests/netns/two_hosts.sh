#!/usr/bin/env bash
# two_hosts.sh BUILD_DIR MPIEXEC [--bench]
# Runs the one-sided suites and crown-info on two real (network-namespace) hosts joined
# by a bridge, so that MPI_Comm_split_type sees two nodes and every cross-host byte
# goes over TCP. Needs root and iproute2; exits 77 (CTest: skipped) otherwise.
# Everything it creates is removed on exit. With --bench it runs `crown-bench onesided
# --smoke` across the two hosts through each transport instead (CSV on stdout).
set -uo pipefail
build=$1 mpiexec=$2 mode=${3:-test}
[ "$(id -u)" -eq 0 ] && command -v ip > /dev/null && command -v unshare > /dev/null || {
  echo "SKIP: needs root, ip and unshare"; exit 77; }
tag=crown$$
work=$(mktemp -d)
cleanup() {
  for h in h1 h2; do ip netns del "$tag-$h" 2> /dev/null; done
  ip link del "${tag}br" 2> /dev/null
  sed -i "/# $tag\$/d" /etc/hosts
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM # CTest's timeout: still clean up
ip link add "${tag}br" type bridge && ip addr add 10.77.0.1/24 dev "${tag}br" &&
  ip link set "${tag}br" up || { echo "SKIP: cannot create a bridge here"; exit 77; }
for i in 1 2; do
  ns=$tag-h$i
  ip netns add "$ns"
  ip link add "v$tag$i" type veth peer name eth0 netns "$ns"
  ip link set "v$tag$i" master "${tag}br" up
  ip -n "$ns" addr add "10.77.0.1$i/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  echo "10.77.0.1$i h$i # $tag" >> /etc/hosts
done
cat > "$work/agent" << AGENT
#!/bin/bash
h=\$1; shift
exec ip netns exec "$tag-\$h" unshare --uts bash -c "hostname \$h; \$*"
AGENT
chmod +x "$work/agent"
printf "h1 slots=2\nh2 slots=2\n" > "$work/hosts"
# The namespaces share one kernel, so UCX's shared-memory transports take the two
# hosts for one node, and traffic between network namespaces over them hangs: UCX is
# limited to TCP here, as it would be between real hosts without RDMA.
launch=("$mpiexec" --hostfile "$work/hosts" --mca plm_rsh_agent "$work/agent"
  --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24
  -x OMPI_MCA_osc=ucx,sm -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth0)

if [ "$mode" = --bench ]; then
  header=1 status=0
  for transport in ucx mpi am; do
    "${launch[@]}" -np 2 --map-by node -x CROWN_TRANSPORT=$transport \
      "$build/apps/crown-bench" onesided --smoke > "$work/out" || status=1
    tail -n +$header "$work/out"
    header=2
  done
  exit $status
fi

failed=0
budget=780 # seconds; CTest's timeout (900) kills without running the cleanup trap
run() { # run NAME NP ARGS... ; prints the tail of the output on failure
  local name=$1 np=$2 left=$((budget - SECONDS))
  shift 2
  if [ $left -le 10 ]; then
    echo "FAIL $name (np $np): the script's ${budget} s budget is spent"; failed=1; return
  fi
  local start=$SECONDS
  if timeout $((left < 120 ? left : 120)) "${launch[@]}" -np "$np" "$@" > "$work/out" 2>&1; then
    echo "ok   $name (np $np, $((SECONDS - start)) s)"
  else
    echo "FAIL $name (np $np)"; tail -20 "$work/out"; failed=1
  fi
}
run crown-info 4 "$build/apps/crown-info"
grep -q "4 ranks on 2 hosts.*world mesh{hosts=2,procs=2}" "$work/out" || {
  echo "FAIL crown-info does not see two hosts:"; cat "$work/out"; failed=1; }
# auto: UCX driven by Crown's progress engine, over TCP.
for suite in coarray collectives differential sync; do
  run "$suite" 4 "$build/tests/onesided/test_$suite"
  run "$suite" 2 --map-by node "$build/tests/onesided/test_$suite"
done
run "progress, busy target" 2 --map-by node -x CROWN_PROGRESS_THREAD=1 \
  "$build/tests/onesided/test_progress"
# The MPI window: its heavy atomic loops take minutes over osc/ucx's emulated RMA on
# TCP, so sync runs without them there.
for suite in coarray collectives differential; do
  run "$suite, CROWN_TRANSPORT=mpi" 4 -x CROWN_TRANSPORT=mpi "$build/tests/onesided/test_$suite"
done
run "sync (events, sync_images, critical), CROWN_TRANSPORT=mpi" 4 -x CROWN_TRANSPORT=mpi \
  "$build/tests/onesided/test_sync" \
  '--run_test=!atomic_counter_is_exact:!lock_protected_counter_is_exact:!every_atomic_operation'
# Crown's active messages over two-sided MPI.
for suite in coarray collectives differential sync; do
  run "$suite, CROWN_TRANSPORT=am" 4 -x CROWN_TRANSPORT=am "$build/tests/onesided/test_$suite"
done
exit $failed
