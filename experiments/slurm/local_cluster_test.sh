#!/usr/bin/env bash
# A real single-node Slurm cluster on localhost, without systemd, to test `looptool slurm-train`.
#
#   experiments/slurm/local_cluster_test.sh [--trivial-only] [--keep] [--ctest]
#
# --ctest (how CTest runs it, as test SlurmLocalCluster): exit 77, which CTest reports as
# skipped, when this machine cannot host the cluster (not root, packages missing, daemons that do
# not come up, a node that never turns idle); every looptune check still fails the test.
#
# Installs slurm-wlm, munge and libpmix-dev when missing (Debian, root; Slurm's pmix plugin
# loads the unversioned pmix2/lib/libpmix.so that only libpmix-dev ships), writes a munge key and
# slurm.conf into a fresh temporary directory, starts munged, slurmctld and slurmd there (their
# own ports, state, logs and pid files; proctrack/linuxproc, task/none, no cgroups), waits for
# the node to be idle, then checks:
#   1. a trivial job (`sbatch --wrap hostname`) runs and writes its output, and a two-task
#      `srun --mpi=pmix` step starts both ranks (how slurm-train starts several trainers);
#   2. `looptool slurm-train ... -- --threads 1 --trainer apex --actors 1 --steps 300` on a small generated
#      dataset completes and leaves checkpoint.pt and metrics.csv in the run directory;
#   3. `scontrol requeue` of that job starts it again, appending to the same log, and the
#      trainer says it resumed from the checkpoint;
#   4. a second run (1500 steps, a checkpoint every 100) requeued while it trains is killed,
#      starts again, resumes from its last checkpoint (0 < step < 1500) and finishes;
#   5. when `looptool train` has --distributed: a two-task run (srun --mpi=pmix, --distributed
#      mpi) completes with a checkpoint and metrics.
# Parts 2-5 are skipped (and said so) with --trivial-only or when `looptool train` is missing.
# Every daemon and job process it started is stopped by PID on exit. Prints one PASS/FAIL line
# per check and a closing "slurm: N passed, N failed"; exits non-zero when any check failed.
#
# Environment: LOOPTUNE_BUILD_DIR (default <repo>/build) holds cli/looptool; LOOPTUNE_SLURM_STEPS
# (default 300) and LOOPTUNE_SLURM_MIDWAY_STEPS (default 1500) the training steps of 2 and 4.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${LOOPTUNE_BUILD_DIR:-$ROOT/build}"
LOOPTOOL="$(cd "$BUILD/cli" 2>/dev/null && pwd)/looptool"
STEPS="${LOOPTUNE_SLURM_STEPS:-300}"
MID_STEPS="${LOOPTUNE_SLURM_MIDWAY_STEPS:-1500}"
TRIVIAL_ONLY=0 KEEP=0 CTEST=0
for arg in "$@"; do
  case "$arg" in
    --trivial-only) TRIVIAL_ONLY=1 ;;
    --keep) KEEP=1 ;;
    --ctest) CTEST=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    *) echo "error: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf '==> %s\n' "$*" >&2; }
PASSED=0 FAILED=0 SKIPPED=0
pass() { PASSED=$((PASSED + 1)); printf 'PASS  %s\n' "$*"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL  %s\n' "$*"; }
skip() { SKIPPED=$((SKIPPED + 1)); printf 'SKIP  %s\n' "$*"; }
# cannot_host MESSAGE: the machine, not looptune, is the problem: a skip under CTest.
cannot_host() {
  echo "error: $*" >&2
  if [ "$CTEST" = 1 ]; then echo "SKIP  this machine cannot host the test cluster: $*"; exit 77; fi
  exit 1
}

# --- packages ------------------------------------------------------------------------------
install_deps() {
  local missing=() p
  for p in slurm-wlm munge libpmix-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing missing packages: ${missing[*]}"
  [ "$(id -u)" -eq 0 ] || cannot_host "installing ${missing[*]} needs root"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
}
[ "$(id -u)" -eq 0 ] || cannot_host "run as root (the daemons run as root with SlurmUser=root)"
install_deps

# --- the cluster's files ---------------------------------------------------------------------
T="$(mktemp -d /tmp/looptune_slurm.XXXXXX)"
chmod 755 "$T"  # munged wants execute permission for all on its socket's directories
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log" "$T/jobs"
chmod 755 "$T/munge"
export SLURM_CONF="$T/slurm.conf"
# Every process of this cluster carries this marker in its environment: the cleanup finds the
# job processes that outlive their daemons by it (this script itself does not carry it).
MARK="LOOPTUNE_SLURM_TEST=$T"
run_marked() { env "$MARK" "$@"; }

cleanup() {
  local rc=$? pid f
  set +e
  if [ -s "$T/slurmctld.pid" ] && kill -0 "$(cat "$T/slurmctld.pid")" 2>/dev/null; then
    scancel --quiet --full --user=root 2>/dev/null
    for _ in $(seq 20); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 1; done
  fi
  for f in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munge/munged.pid"; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    kill -0 "$pid" 2>/dev/null || continue
    kill "$pid"
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  done
  # Anything left that this cluster started (slurmstepd, a trainer): by PID, found by the marker.
  for f in /proc/[0-9]*/environ; do
    pid="${f#/proc/}"; pid="${pid%/environ}"
    [ "$pid" = "$$" ] && continue
    if { tr '\0' '\n' <"$f"; } 2>/dev/null | grep -qxF "$MARK"; then
      log "stopping left-over process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
      kill -9 "$pid" 2>/dev/null
    fi
  done
  if [ "$KEEP" = 1 ]; then log "kept $T"; else rm -rf "$T"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The node as slurmd sees this machine (CPUs, sockets, cores, memory), renamed localhost.
NODE_HW="$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]* //')"
cat >"$SLURM_CONF" <<EOF
# A throw-away single-node cluster written by experiments/slurm/local_cluster_test.sh.
ClusterName=looptune-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 $NODE_HW State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
# No cgroup plugin is loaded (proctrack/linuxproc, task/none); the file only keeps slurmd from
# looking for /etc/slurm/cgroup.conf.
cat >"$T/cgroup.conf" <<EOF
CgroupAutomount=no
EOF

# --- daemons ---------------------------------------------------------------------------------
log "cluster files in $T"
mungekey --create --keyfile="$T/munge/munge.key"
run_marked munged --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/log/munged.log" --seed-file="$T/munge/munged.seed"
run_marked slurmctld -f "$SLURM_CONF"
run_marked slurmd -f "$SLURM_CONF" -N localhost
for f in munge/munged.pid slurmctld.pid slurmd.pid; do
  for _ in $(seq 20); do [ -s "$T/$f" ] && break; sleep 0.5; done
  [ -s "$T/$f" ] || { KEEP=1; cannot_host "no $T/$f; logs in $T/log"; }
done
log "munged $(cat "$T/munge/munged.pid"), slurmctld $(cat "$T/slurmctld.pid"), slurmd $(cat "$T/slurmd.pid")"

state=""
for _ in $(seq 60); do
  state="$(sinfo -h -n localhost -o %T 2>/dev/null || true)"
  [ "$state" = idle ] && break
  sleep 1
done
if [ "$state" = idle ]; then pass "node localhost idle in sinfo"; else KEEP=1; cannot_host "node not idle after 60 s (state '$state'; logs in $T/log)"; fi
sinfo
log "srun --mpi=list:"; srun --mpi=list 2>&1 | sed 's/^/    /' >&2

# job_state ID: the job's state as scontrol shows it.
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
# wait_job ID SECONDS [RESTARTS]: waits until the job has ended (after RESTARTS requeues);
# prints its final state.
wait_job() {
  local id="$1" limit="$2" restarts="${3:-0}" s r
  for _ in $(seq "$limit"); do
    s="$(job_state "$id")"
    r="$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')"
    case "$s" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
        [ "${r:-0}" -ge "$restarts" ] && { echo "$s"; return; } ;;
    esac
    sleep 1
  done
  echo "${s:-UNKNOWN}(still after ${limit}s)"
}

# requeue_now ID: requeues the job and, once it is pending again (a running job passes through
# COMPLETING first), lifts the hold of about two minutes Slurm puts on a requeued job.
# Lifting it at once can start the job again within the second its old credential was revoked,
# and slurmd then refuses the new one ("Killing non-startable batch JobId=4: Job credential
# revoked", seen in CI; credentials carry whole seconds): wait for the old slurmstepd to be
# gone and for the clock to move on first.
requeue_now() {
  scontrol requeue "$1"
  for _ in $(seq 120); do [ "$(job_state "$1")" = PENDING ] && break; sleep 0.5; done
  for _ in $(seq 120); do pgrep -f "^slurmstepd: \[$1\." >/dev/null || break; sleep 0.5; done
  sleep 2
  scontrol update JobId="$1" StartTime=now
}

# --- 1. a trivial job ------------------------------------------------------------------------
out="$(cd "$T/jobs" && sbatch -o "$T/jobs/hostname-%j.out" --wrap hostname)"
id="${out##* }"
s="$(wait_job "$id" 60)"
if [ "$s" = COMPLETED ] && [ "$(cat "$T/jobs/hostname-$id.out")" = "$(hostname)" ]; then
  pass "sbatch --wrap hostname: job $id $s, printed '$(cat "$T/jobs/hostname-$id.out")'"
else
  fail "sbatch --wrap hostname: job $id $s, output '$(cat "$T/jobs/hostname-$id.out" 2>/dev/null)'"
fi

# --- 1b. a two-task step under PMIx, as slurm-train launches several trainers -----------------
out="$(cd "$T/jobs" && srun --mpi=pmix -n 2 bash -c 'echo "rank ${PMIX_RANK:-none} of ${SLURM_NTASKS}"' 2>&1 | sort || true)"
if [ "$out" = "$(printf 'rank 0 of 2\nrank 1 of 2')" ]; then
  pass "srun --mpi=pmix -n 2: $(tr '\n' ';' <<<"$out")"
else
  fail "srun --mpi=pmix -n 2 printed: $out"
fi

# --- 2-3. slurm-train, then a requeue that resumes --------------------------------------------
if [ "$TRIVIAL_ONLY" = 1 ]; then
  skip "slurm-train and requeue (--trivial-only)"
elif [ ! -x "$LOOPTOOL" ] || ! "$LOOPTOOL" train --help >/dev/null 2>&1; then
  skip "slurm-train and requeue: $LOOPTOOL has no 'train' subcommand"
else
  RUN="$T/run"
  "$LOOPTOOL" generate --dimA 64:128:32,100 --dimB 100,64:128:32 --out "$T/data" >/dev/null
  log "looptool slurm-train --out $RUN --time 00:05:00 -- --dataset $T/data --threads 1 --trainer apex --actors 1 --steps $STEPS --learning-starts 100"
  out="$(cd "$T/jobs" && run_marked "$LOOPTOOL" slurm-train --out "$RUN" --time 00:05:00 -- \
    --dataset "$T/data" --threads 1 --trainer apex --actors 1 --steps "$STEPS" --learning-starts 100)"
  echo "$out"
  id="$(sed -n 's/^submitted batch job \([0-9]*\)$/\1/p' <<<"$out")"
  joblog="$RUN/slurm-$id.out"
  if [ -z "$id" ]; then
    fail "slurm-train printed no job id"
  else
    s="$(wait_job "$id" 600)"
    log "first run: job $id $s; its log:"; sed 's/^/    /' "$joblog" >&2 || true
    if [ "$s" = COMPLETED ] && [ -s "$RUN/checkpoint.pt" ] && [ -s "$RUN/metrics.csv" ]; then
      pass "slurm-train job $id $s: checkpoint.pt ($(stat -c %s "$RUN/checkpoint.pt") B), metrics.csv ($(($(wc -l <"$RUN/metrics.csv") - 1)) rows)"
    else
      fail "slurm-train job $id $s; run directory: $(ls "$RUN" | tr '\n' ' ')"
    fi

    requeue_now "$id"
    s="$(wait_job "$id" 600 1)"
    log "after scontrol requeue: job $id $s; its log:"; sed 's/^/    /' "$joblog" >&2 || true
    if [ "$s" = COMPLETED ] && grep -q "^== looptune slurm-train: job $id start 2 " "$joblog" &&
       grep -q "resumed from $RUN/checkpoint.pt" "$joblog"; then
      pass "requeued job $id started again and $(grep -o "resumed from $RUN/checkpoint.pt at step [0-9]*" "$joblog" | tail -1)"
    else
      fail "requeued job $id $s: no second start that resumed from $RUN/checkpoint.pt in $joblog"
    fi
  fi

  # 4. The same while the trainer runs: Slurm kills it, the next start resumes from the last
  # checkpoint written before the kill and finishes the step budget.
  RUN2="$T/run-midway"
  out="$(cd "$T/jobs" && run_marked "$LOOPTOOL" slurm-train --out "$RUN2" --time 00:10:00 --job-name looptune-midway -- \
    --dataset "$T/data" --threads 1 --trainer apex --actors 1 --steps "$MID_STEPS" --learning-starts 100 --checkpoint-every 100)"
  id="$(sed -n 's/^submitted batch job \([0-9]*\)$/\1/p' <<<"$out")"
  joblog="$RUN2/slurm-$id.out"
  for _ in $(seq 600); do
    [ "$(job_state "$id")" = RUNNING ] && [ -s "$RUN2/checkpoint.pt" ] && break
    sleep 0.5
  done
  s="$(job_state "$id")"
  if [ "$s" != RUNNING ] || [ ! -s "$RUN2/checkpoint.pt" ]; then
    fail "job $id: no checkpoint while running (state $s); mid-run requeue not tried"
  else
    requeue_now "$id"
    s="$(wait_job "$id" 900 1)"
    log "after scontrol requeue of the running job $id: $s; its log:"; sed 's/^/    /' "$joblog" >&2 || true
    at="$(sed -n "s|^resumed from $RUN2/checkpoint.pt at step \([0-9]*\) .*|\1|p" "$joblog" | tail -1)"
    if [ "$s" = COMPLETED ] && grep -q "^== looptune slurm-train: job $id start 2 " "$joblog" &&
       [ -n "$at" ] && [ "$at" -gt 0 ] && [ "$at" -lt "$MID_STEPS" ] &&
       grep -q "^$MID_STEPS steps, .*(resumed)" "$joblog"; then
      pass "job $id requeued while running: resumed at step $at, finished $MID_STEPS steps"
    else
      fail "job $id requeued while running: $s, resumed at step '${at}', log $joblog"
    fi
  fi

  # 5. Two tasks: srun --mpi=pmix starts two trainers with --distributed mpi.
  if ! "$LOOPTOOL" train --help 2>/dev/null | grep -q -- '--distributed'; then
    skip "slurm-train --ntasks-per-node 2: $LOOPTOOL train has no --distributed"
  else
    RUN3="$T/run-2tasks"
    out="$(cd "$T/jobs" && run_marked "$LOOPTOOL" slurm-train --ntasks-per-node 2 --out "$RUN3" --time 00:05:00 \
      --job-name looptune-2tasks -- --dataset "$T/data" --threads 1 --trainer apex --actors 1 --steps "$STEPS" --learning-starts 100)"
    id="$(sed -n 's/^submitted batch job \([0-9]*\)$/\1/p' <<<"$out")"
    s="$(wait_job "$id" 600)"
    log "two-task job $id $s; its log:"; sed 's/^/    /' "$RUN3/slurm-$id.out" >&2 || true
    if [ "$s" = COMPLETED ] && grep -q -- '--mpi=pmix .* --distributed mpi$' "$RUN3/train.sbatch" &&
       [ -s "$RUN3/checkpoint.pt" ] && [ -s "$RUN3/metrics.csv" ]; then
      pass "slurm-train --ntasks-per-node 2: job $id $s under srun --mpi=pmix, checkpoint.pt and metrics.csv"
    else
      fail "slurm-train --ntasks-per-node 2: job $id $s; run directory: $(ls "$RUN3" | tr '\n' ' ')"
    fi
  fi
fi

if [ "$FAILED" -eq 0 ]; then echo; echo "RESULT: PASS"; else echo; echo "RESULT: FAIL (logs kept in $T/log)"; KEEP=1; fi
summary="slurm: $PASSED passed, $FAILED failed"
[ "$SKIPPED" -gt 0 ] && summary+=", $SKIPPED skipped"
echo "$summary"
[ "$FAILED" -eq 0 ]
