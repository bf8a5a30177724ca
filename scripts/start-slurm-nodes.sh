#!/usr/bin/env bash
# Make sure a real multi-node Slurm cluster answers on this one machine: Debian's slurmctld here and one
# slurmd per node, each node in its own network and UTS namespace (its own host name and address on a
# bridge this script makes), authenticated by munge as on any site. The real daemons schedule.
#
# It is a cluster of its own beside the single-node one of scripts/start-slurm.sh, which it never touches:
# its own configuration (/etc/slurm-nodes/slurm.conf: clients reach it with SLURM_CONF set to that file),
# ports (slurmctld 6837, slurmd 6838), state, logs and cluster name (reprobox-nodes).
#
#   bridge rbx-nodes-br   10.239.0.1/24, the controller's address (slurmctld listens here)
#   node rbx-node1        network namespace rbx-node1, address 10.239.0.11, host name rbx-node1
#   node rbx-node2        ... 10.239.0.12, and so on; NodeName=rbx-nodeN NodeAddr=10.239.0.1N in slurm.conf
# Each node's slurmd sees /etc/netns/<node>/hosts as its /etc/hosts (a mount namespace of its own), so node
# names resolve on the nodes as a site's DNS would make them; nothing outside 10.239.0.0/24 is reached.
#
# Idempotent: a node whose namespace or slurmd is missing (stopped, or torn down by a test) is made and
# started again, a node Slurm marked down is resumed, and nothing else is restarted. SlurmdTimeout=10 so a
# lost node is declared down (its jobs NODE_FAIL) within seconds.
#
# Usage: scripts/start-slurm-nodes.sh [--nodes N] [--timeout SECONDS]   (as root; N from 2 to 9)
#        scripts/start-slurm-nodes.sh --stop     (stops this cluster's daemons, removes its namespaces)
# Logs: /var/log/slurm/nodes-slurmctld.log and /var/log/slurm/nodes-slurmd-<node>.log
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"

nodes=2
timeout=60
stop=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --stop) stop=1; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "start-slurm-nodes.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
if ! [[ "${nodes}" =~ ^[2-9]$ ]]; then
    echo "start-slurm-nodes.sh: --nodes is '${nodes}'; give a number of nodes from 2 to 9" >&2
    exit 2
fi

confdir=/etc/slurm-nodes
conf="${confdir}/slurm.conf"
marker="# written by reprobox scripts/start-slurm-nodes.sh"
bridge=rbx-nodes-br
subnet=10.239.0
head_addr="${subnet}.1"
run=/run/slurm-nodes
export SLURM_CONF="${conf}"
names=()
for ((i = 1; i <= nodes; i++)); do names+=("rbx-node${i}"); done
node_list="rbx-node[1-${nodes}]"

node_addr() { echo "${subnet}.1${1#rbx-node}"; }
running() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
has_netns() { [[ -e "/var/run/netns/$1" ]]; }
slurmd_pid_file() { echo "${run}/slurmd-$1.pid"; }

all_idle() {
    local states
    states="$(sinfo -h -N -n "${node_list}" -o '%t' 2>/dev/null)" || return 1
    [[ $(grep -cE '^(idle|mix|alloc)' <<<"${states}") -eq ${nodes} ]]
}

stop_node() {  # every process in the node's namespace (its slurmd and jobs), then the namespace
    local name="$1"
    if has_netns "${name}"; then
        ip netns pids "${name}" | xargs -r kill -9 2>/dev/null || true
        ip netns delete "${name}"
    fi
    ip link delete "veth-${name}" 2>/dev/null || true
    rm -f "$(slurmd_pid_file "${name}")"
}

as_root "starting a multi-node Slurm cluster in network namespaces"

if [[ ${stop} -eq 1 ]]; then
    for name in /var/run/netns/rbx-node*; do [[ -e "${name}" ]] && stop_node "$(basename "${name}")"; done
    running "${run}/slurmctld.pid" && kill "$(cat "${run}/slurmctld.pid")"
    ip link delete "${bridge}" 2>/dev/null || true
    iptables -D FORWARD -i "${bridge}" -o "${bridge}" -j ACCEPT 2>/dev/null || true
    echo "start-slurm-nodes.sh: stopped."
    exit 0
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 ||
    ! command -v munged >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "start-slurm-nodes.sh: installing slurm-wlm, munge and iproute2 from Debian ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge iproute2 >/dev/null
fi

# Node to node across the bridge: where bridged frames pass iptables (br_netfilter) and FORWARD drops by
# default (as Docker sets it), this one rule lets the nodes reach each other and nothing else.
if command -v iptables >/dev/null 2>&1 &&
    ! iptables -C FORWARD -i "${bridge}" -o "${bridge}" -j ACCEPT 2>/dev/null; then
    iptables -I FORWARD -i "${bridge}" -o "${bridge}" -j ACCEPT
fi

nodes_alive() {  # each node's namespace and slurmd still there (Slurm notices a lost node only later)
    local name
    for name in "${names[@]}"; do
        has_netns "${name}" && running "$(slurmd_pid_file "${name}")" || return 1
    done
}

if nodes_alive && all_idle && [[ -f "${conf}" ]] && grep -q "^NodeName=rbx-node${nodes} " "${conf}" &&
    ! grep -q "^NodeName=rbx-node$((nodes + 1)) " "${conf}"; then
    echo "start-slurm-nodes.sh: Slurm answers (SLURM_CONF=${conf}); nodes ${node_list} are up."
    exit 0
fi

if [[ -f "${conf}" ]] && ! grep -qF "${marker}" "${conf}"; then
    echo "start-slurm-nodes.sh: ${conf} exists and was not written by this script; it is left alone." >&2
    exit 4
fi

# The bridge, with the controller's address on it.
if ! ip link show "${bridge}" >/dev/null 2>&1; then
    ip link add "${bridge}" type bridge
fi
ip link set "${bridge}" up
# Read whole before matching: under pipefail, `ip ... | grep -q` fails when grep stops reading early and
# ip dies of SIGPIPE, and the address would be added twice ("Address already assigned").
[[ "$(ip -o -4 addr show dev "${bridge}")" == *" ${head_addr}/24 "* ]] || ip addr add "${head_addr}/24" dev "${bridge}"

# slurm.conf: what a site writes for its nodes (NodeName with NodeAddr), one file for every daemon.
controller="$(hostname -s)"
shape="$(slurmd -C | head -n1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ UpTime=.*//')"
mkdir -p "${confdir}" /var/spool/slurmctld-nodes /var/log/slurm "${run}"
{
    echo "${marker}; rewritten on every start"
    cat <<EOF
ClusterName=reprobox-nodes
SlurmctldHost=${controller}(${head_addr})
SlurmctldPort=6837
SlurmdPort=6838
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPidFile=${run}/slurmctld.pid
SlurmdPidFile=${run}/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/nodes-slurmctld.log
SlurmdLogFile=/var/log/slurm/nodes-slurmd-%n.log
StateSaveLocation=/var/spool/slurmctld-nodes
SlurmdSpoolDir=/var/spool/slurmd-nodes/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=5
InactiveLimit=0
EOF
    for name in "${names[@]}"; do echo "NodeName=${name} NodeAddr=$(node_addr "${name}") ${shape} State=UNKNOWN"; done
    echo "PartitionName=debug Nodes=${node_list} Default=YES MaxTime=INFINITE State=UP"
} >"${conf}.tmp"
mv "${conf}.tmp" "${conf}"

if ! pgrep -x munged >/dev/null 2>&1; then
    echo "start-slurm-nodes.sh: starting munged ..."
    [[ -s /etc/munge/munge.key ]] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged
fi

if running "${run}/slurmctld.pid"; then
    scontrol reconfigure >/dev/null 2>&1 || true
else
    echo "start-slurm-nodes.sh: starting slurmctld (port 6837 on ${head_addr}) ..."
    slurmctld -f "${conf}"
fi

hosts="127.0.0.1 localhost"$'\n'"${head_addr} ${controller}"
for name in "${names[@]}"; do hosts+=$'\n'"$(node_addr "${name}") ${name}"; done
for name in "${names[@]}"; do
    if running "$(slurmd_pid_file "${name}")" && has_netns "${name}"; then
        continue
    fi
    stop_node "${name}"  # whatever is left of it
    echo "start-slurm-nodes.sh: starting node ${name} ($(node_addr "${name}")) ..."
    mkdir -p "/etc/netns/${name}" "/var/spool/slurmd-nodes/${name}"
    printf '%s\n' "${hosts}" >"/etc/netns/${name}/hosts"
    ip netns add "${name}"
    ip link add "veth-${name}" type veth peer name eth0 netns "${name}"
    ip link set "veth-${name}" master "${bridge}" up
    ip -n "${name}" addr add "$(node_addr "${name}")/24" dev eth0
    ip -n "${name}" link set eth0 up
    ip -n "${name}" link set lo up
    # Into the node's network namespace, with a UTS namespace (its host name) and a mount namespace of
    # its own (its /etc/hosts); the rest of the file system, /sys/fs/cgroup included, stays the machine's.
    nsenter --net="/var/run/netns/${name}" unshare --uts --mount --propagation private -- sh -c \
        "mount --bind /etc/netns/${name}/hosts /etc/hosts && hostname ${name} && exec slurmd -f ${conf}"
done

deadline=$((SECONDS + timeout))
until all_idle; do
    for name in "${names[@]}"; do
        state="$(sinfo -h -n "${name}" -o '%t' 2>/dev/null | head -n1 || true)"
        if [[ "${state}" =~ ^(down|drain|drng|fail) ]]; then
            scontrol update NodeName="${name}" State=RESUME >/dev/null 2>&1 || true
        fi
    done
    if ((SECONDS >= deadline)); then
        echo "start-slurm-nodes.sh: nodes ${node_list} are not all idle within ${timeout}s" \
            "($(sinfo -h -N -o '%N=%t' 2>/dev/null | tr '\n' ' '));" \
            "see /var/log/slurm/nodes-slurmctld.log and nodes-slurmd-*.log:" >&2
        tail -n 10 /var/log/slurm/nodes-slurm*.log >&2 || true
        exit 4
    fi
    sleep 0.5
done
echo "start-slurm-nodes.sh: Slurm answers (SLURM_CONF=${conf}); nodes ${node_list} are up:"
sinfo -N -o '%N %t %o' | sed 's/^/  /'
