#!/usr/bin/env bash
# tests/slurm/two_nodes.sh JOBSCRIPTS_DIR HEAT2D_DIR [TRAIN_DIR]
# A two-node Slurm: one slurmd in each of two network-namespace hosts (h1, h2; their own
# hostnames and addresses, joined by a bridge; cluster.sh), slurmctld on this machine.
# Checks srun across the nodes, then jobs spanning both: heat2d (2 + 2 tasks; the
# checksum of the one-node run) and train in SPMD (2 + 2 ranks, DDP over TCP between the
# hosts). Exit 77 naming why where namespaces cannot be made (not root, no iproute2).
set -euo pipefail
jobs=$1 apps=$2 train=${3:-}
source "$(dirname "$0")/cluster.sh"
cluster_up h1 h2
d=$cluster_dir
# Between the pretend hosts only TCP is real: the namespaces share one kernel, so UCX's
# shared-memory transports would take them for one node (tests/netns/two_hosts.sh).
net="OMPI_MCA_btl_tcp_if_include=10.78.0.0/24,OMPI_MCA_osc=ucx,sm,UCX_TLS=tcp,self"
net+=",UCX_NET_DEVICES=eth0,OMPI_MCA_mpi_yield_when_idle=1"
failed=0
job() { # job NAME EXPECT SBATCH-OPTIONS... -- SCRIPT ARGS...
  local name=$1 expect=$2 state id
  shift 2
  id=$(cluster_run "$d/$name.out" "$@") || true
  state=$(cluster_state "$id")
  if [ "$state" = COMPLETED ] && grep -Eq "$expect" "$d/$name.out"; then
    echo "ok   $name (job $id, $(scontrol show job "$id" | sed -n 's/.* NodeList=\([^ ]*\).*/\1/p' | head -1))"
  else
    echo "FAIL $name (job $id: $state)"
    cat "$d/$name.out"
    failed=1
  fi
}
printf '#!/bin/bash\nset -o pipefail\nsrun -N2 -n4 --ntasks-per-node=2 hostname | sort | uniq -c\n' > "$d/hosts.sbatch"
job srun_across_nodes "2 h1" -N2 --ntasks-per-node=2 "$d/hosts.sbatch"
grep -q "2 h2" "$d/srun_across_nodes.out" || { echo "FAIL: srun did not reach h2"; failed=1; }
job heat2d_two_nodes "^checksum 750.96103842088439$" -N2 --ntasks-per-node=2 \
  --export="ALL,APPS_DIR=$apps,CHECKPOINT_EVERY=20,CHECKPOINT_DIR=$d/heat2d.ck,$net" \
  "$jobs/heat2d.sbatch" --n 128 --iterations 80
if [ -n "$train" ]; then
  job train_two_nodes "^crown-train: srun exit 0" -N2 --ntasks-per-node=2 --cpus-per-task=1 \
    --export="ALL,APPS_DIR=$train,CHECKPOINT_DIR=$d/train.ck,$net" "$jobs/train.sbatch" \
    --steps 10 --context 16 --channels 32 --heads 4 --blocks 2 --batch 4 --sample 0 \
    --csv "$d/train.csv"
  grep -q "on 4 ranks" "$d/train_two_nodes.out" || { echo "FAIL: train did not run on 4 ranks"; failed=1; }
fi
[ $failed -eq 0 ] && echo "slurm two-node test: passed"
exit $failed
