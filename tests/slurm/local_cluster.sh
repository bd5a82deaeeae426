#!/usr/bin/env bash
# tests/slurm/local_cluster.sh SCRIPT.sbatch EXPECT_REGEX [sbatch options...]
# Starts a one-node Slurm cluster on this machine (munged, slurmctld, slurmd, all in a
# temporary directory, the node claiming 8 CPUs), submits SCRIPT with sbatch --wait,
# prints the job's output, checks it matches EXPECT_REGEX and that the job succeeded,
# then stops every daemon it started. Exit 77 (CTest: skipped) when Slurm or munge is
# not installed; run as root (slurmd must).
set -euo pipefail
script=$1 expect=$2
shift 2
for tool in munged slurmctld slurmd sbatch scontrol; do
  command -v "$tool" > /dev/null || { echo "slurm test: $tool is not installed; skipped"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "slurm test: needs root (slurmd); skipped"; exit 77; }

dir=$(mktemp -d /tmp/crown-slurm.XXXXXX)
host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
cleanup() {
  for pid in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -f "$pid" ] && kill "$(cat "$pid")" 2> /dev/null || true
  done
  sleep 1
  rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p "$dir"/{state,spool,munge}
# munge: our own key, socket and pid file, so a running munged elsewhere is untouched.
mungekey -c -k "$dir/munge/munge.key" 2> /dev/null || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge/munge.key"
munged --force -S "$dir/munge/socket" --pid-file "$dir/munged.pid" --key-file "$dir/munge/munge.key" \
  --log-file "$dir/munge/log" --seed-file "$dir/munge/seed" 2> /dev/null

cat > "$dir/slurm.conf" << CONF
ClusterName=crowntest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
NodeName=$host CPUs=8 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  scontrol show node "$host" 2> /dev/null | grep -qE "State=IDLE" && break
  sleep 0.5
done
scontrol show node "$host" | grep -qE "State=IDLE" || {
  echo "slurm test: the node did not come up"
  cat "$dir"/slurmctld.log "$dir"/slurmd.log
  exit 1
}

out=$dir/job.out
status=0
sbatch --wait --output="$out" --chdir="$dir" "$@" "$script" > /dev/null || status=$?
cat "$out"
[ "$status" -eq 0 ] || { echo "slurm test: the job failed (sbatch exit $status)"; exit 1; }
grep -Eq "$expect" "$out" || { echo "slurm test: no line matches /$expect/"; exit 1; }
echo "slurm test: passed"
