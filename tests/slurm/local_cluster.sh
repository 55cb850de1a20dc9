#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for tests: Debian's munge, slurmctld and slurmd,
# with state, spool, logs and the munge key in a directory of its own.
#   source tests/slurm/local_cluster.sh; cluster_start DIR; ...; cluster_stop
# cluster_start fails (returns 1, with the reason in $cluster_why) when Slurm cannot start here.

cluster_start() {
  cluster_dir=$1
  cluster_why=""
  mkdir -p "$cluster_dir"/{state,spool,run}
  local host port
  host=$(hostname)
  port=$((17000 + RANDOM % 2000))
  for tool in munged slurmctld slurmd sbatch scontrol; do
    command -v "$tool" >/dev/null || { cluster_why="$tool is not installed"; return 1; }
  done
  dd if=/dev/urandom of="$cluster_dir/munge.key" bs=1024 count=1 status=none
  chmod 400 "$cluster_dir/munge.key"
  munged --force --key-file="$cluster_dir/munge.key" --socket="$cluster_dir/run/munge.socket" \
    --pid-file="$cluster_dir/run/munged.pid" --log-file="$cluster_dir/munged.log" \
    --seed-file="$cluster_dir/run/munge.seed" 2>>"$cluster_dir/munged.log" ||
    { cluster_why="munged did not start: $(tail -2 "$cluster_dir/munged.log")"; return 1; }
  cat >"$cluster_dir/slurm.conf" <<CONF
ClusterName=arclighttest
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire is also how long Slurm holds a requeued job back (cred_expire + 1 s): the slurmd
# still refuses the job's old credential that long, so a requeued job that starts earlier is
# killed ("Job credential revoked"). 10 s (the default is 120) keeps the requeue tests short;
# the quick scheduler passes start the job soon after that delay ends.
AuthInfo=socket=$cluster_dir/run/munge.socket,cred_expire=10
SchedulerParameters=sched_interval=2,bf_interval=2
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
JobRequeue=1
ReturnToService=2
KillWait=10
MinJobAge=600
StateSaveLocation=$cluster_dir/state
SlurmdSpoolDir=$cluster_dir/spool
SlurmctldPidFile=$cluster_dir/run/slurmctld.pid
SlurmdPidFile=$cluster_dir/run/slurmd.pid
SlurmctldLogFile=$cluster_dir/slurmctld.log
SlurmdLogFile=$cluster_dir/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 Sockets=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=20000
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF="$cluster_dir/slurm.conf"
  slurmctld -i -f "$SLURM_CONF" 2>>"$cluster_dir/slurmctld.log" || { cluster_why="slurmctld did not start"; return 1; }
  slurmd -f "$SLURM_CONF" 2>>"$cluster_dir/slurmd.log" || { cluster_why="slurmd did not start"; return 1; }
  for _ in $(seq 60); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && return 0
    sleep 0.5
  done
  cluster_why="the node did not come up idle: $(sinfo 2>&1 | tail -2) $(tail -3 "$cluster_dir/slurmctld.log")"
  return 1
}

cluster_stop() {
  [ -n "${cluster_dir:-}" ] || return 0
  for pidfile in slurmd slurmctld munged; do
    [ -f "$cluster_dir/run/$pidfile.pid" ] && kill "$(cat "$cluster_dir/run/$pidfile.pid")" 2>/dev/null
  done
  sleep 1
  for pidfile in slurmd slurmctld munged; do
    [ -f "$cluster_dir/run/$pidfile.pid" ] && kill -9 "$(cat "$cluster_dir/run/$pidfile.pid")" 2>/dev/null
  done
  return 0
}

job_state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# Waits (bounded) until job $1 is in one of the states $2 (a regex); prints the state it saw last.
# A requeued job is left to Slurm's own delay (see cred_expire above): moving its start time
# forward starts it before the node has let go of the old instance, and Slurm kills it.
wait_for_state() {
  local job=$1 want=$2 seconds=${3:-120} state=""
  for _ in $(seq $((seconds * 2))); do
    state=$(job_state "$job")
    [[ "$state" =~ ^($want)$ ]] && { echo "$state"; return 0; }
    sleep 0.5
  done
  echo "gave up after $seconds s waiting for job $1 to be $want; it is ${state:-gone}:" \
    "$(scontrol show job "$job" 2>/dev/null | grep -oE '(Reason|StartTime|Restarts)=[^ ]*' | xargs)" >&2
  echo "${state:-gone}"
  return 1
}

# Waits (bounded) until the command $3 succeeds; on giving up says that it waited for $1.
wait_until() {
  local what=$1 seconds=$2 condition=$3
  for _ in $(seq $((seconds * 2))); do
    eval "$condition" && return 0
    sleep 0.5
  done
  echo "gave up after $seconds s waiting for $what" >&2
  return 1
}
