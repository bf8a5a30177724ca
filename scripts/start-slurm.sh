#!/usr/bin/env bash
# Make sure a real single-node Slurm cluster answers on this machine, for `reprobox --runtime slurm` and
# its tests: Debian's slurm-wlm and munge, slurmctld and slurmd both here, one node, two partitions.
#
# Idempotent and quick when Slurm already runs: it only asks `sinfo`. Otherwise (as root) it installs
# slurm-wlm and munge from Debian if missing, writes /etc/slurm/slurm.conf for this host (never over a
# slurm.conf it did not write), starts munged, slurmctld and slurmd, and waits until the node is idle.
#
# Choices, so that the cluster works in a VM or container without systemd or cgroup delegation:
#   proctrack/linuxproc + task/none  processes are tracked by parentage; no cgroup setup needed
#   select/cons_tres, CR_CPU         jobs share the node by CPUs, so runs can go side by side
#   accounting_storage/none          no slurmdbd; finished jobs stay in slurmctld for MinJobAge=3600 s,
#                                    so `scontrol show job` gives their final state (sacct does not work)
#   partitions `debug` (default) and `urgent`: a job in `urgent` preempts (cancels) jobs in `debug`,
#                                    so preemption can be tested for real
#   KillWait=5                       scancel escalates from SIGTERM to SIGKILL after 5 s
#
# Usage: scripts/start-slurm.sh [--timeout SECONDS]   (as root, or as a user who may sudo)
#        scripts/start-slurm.sh --nodes N [--timeout SECONDS]   (N from 2 to 9: a cluster of N nodes, each
#        in its own network and UTS namespace, beside this one; clients reach it with
#        SLURM_CONF=/etc/slurm-nodes/slurm.conf; see scripts/start-slurm-nodes.sh)
# Logs: /var/log/slurm/slurmctld.log and /var/log/slurm/slurmd.log
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"

timeout=60
nodes=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --timeout) timeout="$2"; shift 2 ;;
        --nodes) nodes="$2"; shift 2 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "start-slurm.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

if [[ "${nodes}" != 1 ]]; then
    exec "$(dirname "${BASH_SOURCE[0]}")/start-slurm-nodes.sh" --nodes "${nodes}" --timeout "${timeout}"
fi

conf=/etc/slurm/slurm.conf
export SLURM_CONF="${conf}"  # this cluster's, even where SLURM_CONF names another (the multi-node one)
marker="# written by reprobox scripts/start-slurm.sh"
node="$(hostname -s)"

node_idle() {
    command -v sinfo >/dev/null 2>&1 &&
        [[ "$(sinfo -h -n "${node}" -o '%t' 2>/dev/null | sort -u | head -n1)" =~ ^(idle|mix|alloc) ]]
}

if node_idle; then
    echo "start-slurm.sh: Slurm answers; node ${node} is $(sinfo -h -n "${node}" -o '%t' | head -n1)."
    exit 0
fi

as_root "no Slurm node is idle here, and installing or starting Slurm"

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 ||
    ! command -v munged >/dev/null 2>&1; then
    echo "start-slurm.sh: installing slurm-wlm and munge from Debian ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

if [[ -f "${conf}" ]] && ! grep -qF "${marker}" "${conf}"; then
    echo "start-slurm.sh: ${conf} exists and was not written by this script; it is left alone." >&2
    echo "start-slurm.sh: start that cluster's daemons yourself, or move ${conf} away to get a test cluster." >&2
    exit 4
fi

# The node's real shape, as slurmd detects it, so the node never drains for a mismatch.
shape="$(slurmd -C | head -n1 | sed -e 's/^NodeName=[^ ]* //')"
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
cat >"${conf}.tmp" <<EOF
${marker}; rewritten on every start
ClusterName=reprobox
SlurmctldHost=${node}
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=5
InactiveLimit=0
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
NodeName=${node} ${shape} State=UNKNOWN
PartitionName=debug Nodes=${node} Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=${node} MaxTime=INFINITE State=UP PriorityTier=2
EOF
mv "${conf}.tmp" "${conf}"

if ! pgrep -x munged >/dev/null 2>&1; then
    echo "start-slurm.sh: starting munged ..."
    [[ -s /etc/munge/munge.key ]] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged
fi

# By pid file: the daemons of a multi-node cluster (start-slurm-nodes.sh) may run beside these.
running() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
if running /run/slurm/slurmctld.pid; then
    scontrol reconfigure >/dev/null 2>&1 || true
else
    echo "start-slurm.sh: starting slurmctld ..."
    slurmctld
fi
if ! running /run/slurm/slurmd.pid; then
    echo "start-slurm.sh: starting slurmd ..."
    slurmd
fi

deadline=$((SECONDS + timeout))
until node_idle; do
    state="$(sinfo -h -n "${node}" -o '%t' 2>/dev/null | head -n1 || true)"
    if [[ "${state}" =~ ^(down|drain|drng|fail) ]]; then
        scontrol update NodeName="${node}" State=RESUME >/dev/null 2>&1 || true
    fi
    if ((SECONDS >= deadline)); then
        echo "start-slurm.sh: node ${node} is not idle within ${timeout}s (state: ${state:-unknown});" \
            "see /var/log/slurm/slurmctld.log and slurmd.log:" >&2
        tail -n 10 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
        exit 4
    fi
    sleep 0.5
done
echo "start-slurm.sh: Slurm answers; node ${node} is $(sinfo -h -n "${node}" -o '%t' | head -n1)."
