# tests/slurm/cluster.sh — sourced by the slurm tests: a real Slurm cluster on this machine,
# every file in a temporary directory, torn down on exit.
#   source cluster.sh; cluster_up            # one node: this host, claiming 8 CPUs
#   source cluster.sh; cluster_up h1 h2      # one slurmd per network-namespace host
#   cluster_run OUT sbatch-options... script [args]   # submits, waits; prints the job id
#   cluster_wait JOBID [SECONDS]             # until the job ends; prints its final state
# Exit 77 (CTest: skipped), naming why, when Slurm, munge, root or namespaces are missing.
# Sets SLURM_CONF and `cluster_dir`; the EXIT trap stops every daemon it started (by pid
# file) and removes the namespaces, the bridge and the /etc/hosts lines it made.

cluster_skip() { echo "slurm test: $*; skipped"; exit 77; }
for tool in nsenter munged mungekey slurmctld slurmd sbatch scontrol squeue sacct; do
  command -v "$tool" > /dev/null || cluster_skip "$tool is not installed"
done
[ "$(id -u)" -eq 0 ] || cluster_skip "needs root (slurmd)"

cluster_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) # the test scripts' directory
cluster_dir=$(mktemp -d /var/tmp/crown-slurm.XXXXXX) # not /tmp: hosts get their own
cluster_tag=cs$$
cluster_hosts=()
# A requeued job waits cred_expire seconds (Slurm's default 120) before it may start, and
# then for the next main scheduling pass (sched_interval, default 60): 176 s measured with
# the defaults. The tests shorten both; CLUSTER_DEFAULT_DELAYS=1 keeps Slurm's.
if [ "${CLUSTER_DEFAULT_DELAYS:-0}" = 1 ]; then
  cluster_cred_expire=120 cluster_sched_interval=60
else
  cluster_cred_expire=${CLUSTER_CRED_EXPIRE:-5} cluster_sched_interval=1
fi
cluster_down() {
  local jobs h
  # Jobs still there (a test that failed or timed out): killed outright, so that no
  # slurmstepd outlives its cluster.
  jobs=$(squeue -h -o %i 2> /dev/null || true)
  if [ -n "$jobs" ]; then
    scancel --full --signal=KILL $jobs 2> /dev/null
    sleep 1
  fi
  cluster_stop "$cluster_dir"/slurmd*.pid "$cluster_dir"/slurmctld.pid "$cluster_dir/munged.pid"
  # Tasks a killed slurmstepd left behind in our namespaces.
  for h in "${cluster_hosts[@]}"; do
    ip netns pids "$cluster_tag-$h" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
    ip netns del "$cluster_tag-$h" 2> /dev/null || true
  done
  if [ ${#cluster_hosts[@]} -gt 0 ]; then
    ip link del "${cluster_tag}br" 2> /dev/null || true
    sed -i "/# $cluster_tag\$/d" /etc/hosts
  fi
  if [ "${CLUSTER_KEEP:-0}" = 1 ]; then
    echo "slurm test: kept $cluster_dir"
  else
    rm -rf "$cluster_dir" 2> /dev/null || { sleep 1 && rm -rf "$cluster_dir"; } || true
  fi
  return 0
}
# cluster_stop PIDFILE...: SIGTERM to each, then waits (up to 10 s) for all to be gone:
# munged writes its seed file and slurmctld its state as they exit, and a directory
# removed meanwhile is "not empty" (the clean-clone CI once failed a passed test on that).
# All at once: each daemon takes about 2 s to leave, one after another 5.4 s per test.
cluster_stop() {
  local f pids=() pid i
  for f in "$@"; do
    [ -f "$f" ] && pid=$(cat "$f") && kill "$pid" 2> /dev/null && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2> /dev/null || continue 2
      sleep 0.1
    done
    kill -9 "$pid" 2> /dev/null || true
  done
}
trap cluster_down EXIT
trap 'exit 143' INT TERM # CTest's timeout: still tear down

# cluster_up [HOST...]: no hosts: this machine is the one node.
cluster_up() {
  cluster_hosts=("$@")
  local d=$cluster_dir host ctl nodes addr=""
  host=$(hostname -s)
  local port=$((20000 + RANDOM % 20000))
  mkdir -p "$d"/{state,spool,munge}
  # Our own munge key, socket and pid file: a munged running elsewhere is untouched.
  mungekey -c -k "$d/munge/munge.key" 2> /dev/null ||
    dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$d/munge/munge.key"
  munged --force -S "$d/munge/socket" --pid-file "$d/munged.pid" --key-file "$d/munge/munge.key" \
    --log-file "$d/munge/log" --seed-file "$d/munge/seed" 2> /dev/null
  if [ $# -eq 0 ]; then
    ctl=$host
    nodes="NodeName=$host CPUs=8 State=UNKNOWN"
    # CLUSTER_FAKE_GPUS=N: N gres/gpu on the node without device files (no GPU
    # here; plain files stand in): Slurm allocates, counts and binds them.
    if [ "${CLUSTER_FAKE_GPUS:-0}" -gt 0 ]; then
      nodes+=" Gres=gpu:$CLUSTER_FAKE_GPUS"
      for ((g = 0; g < CLUSTER_FAKE_GPUS; ++g)); do touch "$d/gpu$g"; done
      echo "Name=gpu File=$d/gpu[0-$((CLUSTER_FAKE_GPUS - 1))]" > "$d/gres.conf"
    fi
  else
    command -v ip > /dev/null && command -v unshare > /dev/null ||
      cluster_skip "network-namespace hosts need ip and unshare"
    unshare --uts --mount --propagation private true 2> /dev/null ||
      cluster_skip "cannot make UTS and mount namespaces here (unshare refused)"
    ip link add "${cluster_tag}br" type bridge 2> /dev/null ||
      cluster_skip "cannot create a bridge here (no CAP_NET_ADMIN?)"
    ip addr add 10.78.0.1/24 dev "${cluster_tag}br" && ip link set "${cluster_tag}br" up
    local i=1 h
    nodes=""
    for h in "$@"; do
      ip netns add "$cluster_tag-$h" || cluster_skip "cannot create a network namespace here"
      ip link add "v$cluster_tag$i" type veth peer name eth0 netns "$cluster_tag-$h"
      ip link set "v$cluster_tag$i" master "${cluster_tag}br" up
      ip -n "$cluster_tag-$h" addr add "10.78.0.1$i/24" dev eth0
      ip -n "$cluster_tag-$h" link set eth0 up
      ip -n "$cluster_tag-$h" link set lo up
      echo "10.78.0.1$i $h # $cluster_tag" >> /etc/hosts
      nodes+="NodeName=$h NodeAddr=10.78.0.1$i CPUs=4 State=UNKNOWN"$'\n'
      i=$((i + 1))
    done
    ctl="$host(10.78.0.1)"
  fi
  cat > "$d/slurm.conf" << CONF
ClusterName=crowntest
SlurmctldHost=$ctl
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$d/munge/socket,cred_expire=$cluster_cred_expire
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=$cluster_sched_interval
JobRequeue=1
KillWait=30
GresTypes=gpu
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
$nodes
PartitionName=test Nodes=ALL Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
CONF
  # Slurm's PMIx keeps a directory per step named by job and step only (under /tmp by
  # default): ours, so that clusters of other test runs, or leftovers of a killed one,
  # cannot collide with it. Namespace hosts have their own /tmp each instead (one
  # directory for both would collide between the hosts' step daemons).
  if [ $# -eq 0 ]; then
    mkdir -p "$d/pmix"
    echo "PMIxCliTmpDirBase=$d/pmix" > "$d/mpi.conf"
  fi
  export SLURM_CONF=$d/slurm.conf
  slurmctld -f "$SLURM_CONF"
  local names=()
  if [ $# -eq 0 ]; then
    mkdir -p "$d/spool/$host"
    slurmd -f "$SLURM_CONF"
    names=("$host")
  else
    for h in "$@"; do
      mkdir -p "$d/spool/$h"
      # nsenter, not `ip netns exec`: that remounts /sys, without the cgroup tree slurmd
      # needs. Each host has its own /tmp, as real ones do (Slurm's PMIx keeps per-step
      # directories there, named alike on every node).
      mkdir -p "$d/tmp-$h"
      nsenter --net="/run/netns/$cluster_tag-$h" unshare --uts --mount --propagation private \
        bash -c "hostname $h; $(cluster_private_tmp "$d/tmp-$h"); exec slurmd -N $h -f $SLURM_CONF" ||
        { echo "slurm test: slurmd on $h did not start"; cat "$d/slurmd-$h.log" 2> /dev/null; exit 1; }
      names+=("$h")
    done
  fi
  local n
  for n in "${names[@]}"; do
    for _ in $(seq 60); do
      scontrol show node "$n" 2> /dev/null | grep -q "State=IDLE" && break
      sleep 0.5
    done
    scontrol show node "$n" | grep -q "State=IDLE" || {
      echo "slurm test: node $n did not come up"
      cat "$d"/slurmctld.log "$d"/slurmd*.log
      exit 1
    }
  done
}

# The commands that give a namespace host its own /tmp. What the job needs under the real
# /tmp (a checkout and build there, as a CI's clean clone may be) stays visible: each such
# top-level directory is bound into the private /tmp before it replaces the real one.
cluster_private_tmp() { # host-tmp-dir -> a shell fragment
  local own=$1 keep=() p
  for p in "$PWD" "$cluster_here"; do
    case $p in /tmp/*) p=${p#/tmp/}; keep+=("/tmp/${p%%/*}") ;; esac
  done
  local out=""
  for p in $(printf '%s\n' "${keep[@]}" | sort -u); do
    out+="mkdir -p $own/${p#/tmp/}; mount --bind $p $own/${p#/tmp/}; "
  done
  echo "${out}mount --rbind $own /tmp"
}

# cluster_host_run HOST CMD...: runs CMD on a namespace host (as a user logged in there).
cluster_host_run() {
  local h=$1
  shift
  nsenter --net="/run/netns/$cluster_tag-$h" unshare --uts --mount --propagation private \
    bash -c "hostname $h; $(cluster_private_tmp "$cluster_dir/tmp-$h"); exec \"\$@\"" bash "$@"
}

# cluster_run OUT SBATCH-ARGS...: submits (the job's output to OUT, run in cluster_dir),
# waits until the job has ended and prints its id. Not sbatch --wait: that looks at the
# job after 2 s, then 8 s more, then every 32 s, so a 12 s job took 42 s.
cluster_run() {
  local out=$1 job
  shift
  job=$(sbatch --parsable --output="$out" --chdir="$cluster_dir" "$@") || return 1
  job=${job%%;*} # --parsable: "id;cluster" where a cluster is named
  cluster_wait "$job" > /dev/null
  echo "$job"
}

# cluster_state JOBID: the job's state (COMPLETED, FAILED, PENDING, RUNNING...).
cluster_state() {
  scontrol show job "$1" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# cluster_wait JOBID [SECONDS]: waits until the job has ended for good; prints the state.
cluster_wait() {
  local job=$1 limit=${2:-170} state
  for _ in $(seq $((limit * 2))); do
    state=$(cluster_state "$job")
    case "$state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
        echo "$state"; return 0 ;;
    esac
    sleep 0.5
  done
  echo "TIMEOUT_WAITING($state)"
}
