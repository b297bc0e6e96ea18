package slurmconf

import (
	"fmt"
	"time"
)

// The daemons and commands hale runs on the nodes. munged runs on its default socket path
// (/run/munge/munge.socket.2, private to each node): slurmctld 22.05 briefly falls back to
// that path around `scontrol reconfigure` whatever AuthInfo says (research
// slurm-local-cluster.md §4, trap 2). Daemons run in the foreground (-D, -F) so the agent
// supervises them and keeps their output.

// Daemon is a long-running process of a Slurm node.
type Daemon struct {
	Name string
	Argv []string
	Env  map[string]string // added to the agent's environment
	Log  string            // where the agent appends the daemon's own output
	// ConfigCheck, when set, tells a configuration the daemon cannot read from a fault of the
	// machine after the daemon exits (agentproto.Daemon.config_check; CheckConf).
	ConfigCheck []string
}

// Munged is the node's munge daemon, with the cluster's key. Its socket directory is made
// first, as munge.service's RuntimeDirectory=munge does: /run is empty after a boot of a host
// where no munge unit ran (the static provider's hosts; the local provider binds its own).
func Munged() Daemon {
	return Daemon{Name: "munged", Log: "/var/log/munge/munged.out", Argv: []string{"sh", "-c", `install -d -m 0755 /run/munge && exec "$0" "$@"`, "munged", "--foreground", "--force",
		"--key-file=" + MungeKey, "--socket=/run/munge/munge.socket.2", "--pid-file=/run/munge/munged.pid",
		"--log-file=/var/log/munge/munged.log", "--seed-file=/var/lib/munge/munge.seed"}}
}

// Slurmctld is the controller daemon. Without -c it recovers the state it saved, so a restart
// (after the node set changed) keeps the queue.
func Slurmctld() Daemon {
	return Daemon{Name: "slurmctld", Log: "/var/log/slurm/slurmctld.out", Argv: []string{"slurmctld", "-D", "-f", ConfPath}, ConfigCheck: CheckConf(ConfPath)}
}

// ShowVersion prints the node's Slurm version ("slurm 22.05.8").
func ShowVersion() []string { return []string{"slurmctld", "-V"} }

// Slurmd is a compute node's daemon, named as slurm.conf names the node.
//
// A lifecycle script may have started slurmd itself, as HyperPod's sample start_slurm.sh does
// with `slurmd --conf-server <controller>` (configless: slurmd fetches slurm.conf, gres.conf
// and the topology from slurmctld, which DefaultOperatorPart's enable_configless allows). hale
// keeps that slurmd rather than start a second one (which would kill it through the pid file,
// or fail on its port): while a slurmd of this node runs, the supervised process waits on it
// and passes SIGTERM on; when it is gone, it exits and the agent starts hale's own slurmd in its
// place. The slurmd is found in /proc, not through its pid file: a configless slurmd writes
// that only once it has its configuration, and it retries every 10 s while slurmctld is not up
// yet, so at first there is a slurmd without a pid file. A slurmd is known by its executable
// (/proc/<pid>/exe), slurmd or Debian's slurmd-wlm (/usr/sbin/slurmd is an alternatives link to
// it). Its process name (/proc/<pid>/comm, the executed file's name) only sorts out the other
// processes first, with the shell's own read, so that a scan of a host with many processes (the
// static provider's, or a test's) forks readlink for few: it is slurmd, slurmd-wlm, or exe when
// run through /proc/self/exe. It must be this node's: its mount and network namespaces are this
// shell's (on the local provider, where nodes share a host), and a zombie, which an agent that
// reaps no orphans may hold, does not count.
//
// slurmd 24.11 and later reconfigure (scontrol reconfigure, which hale runs after every
// membership change) by executing their binary again ("Relinquishing control to new slurmd
// process"), under a new pid and with the name slurmd-wlm. So when the slurmd it waits on is
// gone, the supervised process looks again (at once and a second later) and follows the new
// one: a reconfigure is not a slurmd crash to the agent (which counts crashes towards a Reboot).
//
// While the slurmd lives, `tail --pid` waits on it, checking once a second without forking;
// every 30 s the wait ends and the full check (namespaces, zombie) runs again. Checking all of it
// every second cost six processes a second per node (a profile of the test suite counted 12,730
// sleeps among its 63,000 processes, on a machine where each process start is expensive).
func Slurmd(node string) Daemon {
	adopt := `mine() { { read -r c < /proc/$1/comm; } 2>/dev/null || return 1; case $c in slurmd* | exe) ;; *) return 1 ;; esac
  case "$(readlink /proc/$1/exe 2>/dev/null)" in */slurmd | */slurmd-wlm | */slurmd" (deleted)" | */slurmd-wlm" (deleted)") ;; *) return 1 ;; esac
  ! grep -q '^State:[[:space:]]*Z' /proc/$1/status 2>/dev/null &&
  [ "$(readlink /proc/$1/ns/mnt)" = "$(readlink /proc/self/ns/mnt)" ] && [ "$(readlink /proc/$1/ns/net)" = "$(readlink /proc/self/ns/net)" ]; }
find() { for d in /proc/[0-9]*; do if mine "${d#/proc/}"; then echo "${d#/proc/}"; return; fi; done; }
p=$(find)
if [ -n "$p" ]; then
  echo "hale: keeping slurmd $p, started by the node's lifecycle scripts: $(tr '\0' ' ' < /proc/$p/cmdline)"
  trap 'kill -TERM $p; exit 0' TERM
  while [ -n "$p" ]; do
    while mine "$p"; do timeout 30 tail -s 1 --pid="$p" -f /dev/null & wait $!; done
    q=$(find); [ -n "$q" ] || { sleep 1 & wait $!; q=$(find); }
    [ -n "$q" ] && echo "hale: slurmd $p handed over to $q (a reconfigure); keeping it"
    [ -n "$q" ] || echo "hale: slurmd $p exited; starting hale's own"
    p=$q
  done
  exit 1
fi
exec "$0" "$@"`
	return Daemon{Name: "slurmd", Log: "/var/log/slurm/slurmd.out", Argv: []string{"sh", "-c", adopt, "slurmd", "-D", "-f", ConfPath, "-N", node},
		ConfigCheck: CheckConf(ConfPath)}
}

// ReadConf prints slurm.conf as one line of base64: the agent answers with the last lines of a
// command's output (each up to 1 MiB), and a long slurm.conf must arrive whole.
func ReadConf() []string { return []string{"base64", "-w0", ConfPath} }

// ShowNodes reads every node's state in one line each (scontrol has no --json in 22.05).
func ShowNodes() []string { return []string{"scontrol", "show", "node", "-o"} }

// Reconfigure makes slurmctld and every slurmd read slurm.conf again.
func Reconfigure() []string { return []string{"scontrol", "reconfigure"} }

// StartWait is how long WaitUp and WaitListed wait for slurmctld's start: a minute. slurmctld
// 26.05 on a loaded 2-core machine took more than the 15 s they once waited (full87), which
// failed the whole cluster's creation; a slurmctld that does not start is still found, a
// minute later. A command that runs them needs StartWait and a margin (scontrol's own time).
const StartWait = 60 * time.Second

// untilStarted is a shell loop that runs its body every 0.1 s until StartWait has passed. It
// reads the clock from /proc/uptime with the shell's own read: date, forked twice a second per
// waiting node, was a process start each time.
var untilStarted = fmt.Sprintf(`read -r up _ </proc/uptime; end=$((${up%%.*} + %d)); while read -r up _ </proc/uptime && [ "${up%%.*}" -lt "$end" ]; do`, int(StartWait.Seconds()))

// WaitUp waits up to StartWait for slurmctld to answer (after a start or restart).
func WaitUp() []string {
	return []string{"/bin/sh", "-c", untilStarted + " scontrol ping 2>/dev/null | grep -q 'is UP' && exit 0; sleep 0.1; done; scontrol ping; exit 1"}
}

// WaitListed waits up to StartWait for slurmctld to list every node of nodes (names of its
// slurm.conf): it has read its configuration, so its start is over. Slurm 24.11 answers a ping
// from before it reads it (its listening ports open first): a reconfigure it gets then can kill
// it ("fatal: slurmscriptd_init: ... Interrupted system call"), and a configless slurmd that
// asks it then for its files gets none and exits.
func WaitListed(nodes ...string) []string {
	return append([]string{"/bin/sh", "-c", untilStarted + `
  if out=$(scontrol show node -o 2>/dev/null); then
    ok=1
    for n in "$@"; do case "$out" in *"NodeName=$n "*) ;; *) ok= ;; esac; done
    [ -n "$ok" ] && exit 0
  fi
  sleep 0.1
done
echo "slurmctld does not list every node of: $*" >&2
exit 1`, "sh"}, nodes...)
}

// Drain stops new jobs on a node; its running jobs finish.
func Drain(node, reason string) []string {
	return []string{"scontrol", "update", "nodename=" + node, "state=drain", "reason=" + reason}
}

// Down takes a node out at once: its jobs are requeued (or fail) now rather than after
// SlurmdTimeout. With ReturnToService=2 it returns when its slurmd registers again.
func Down(node, reason string) []string {
	return []string{"scontrol", "update", "nodename=" + node, "state=down", "reason=" + reason}
}

// Resume returns a drained or down node to service.
func Resume(node string) []string {
	return []string{"scontrol", "update", "nodename=" + node, "state=resume"}
}

// HaleReason prefixes the reasons hale itself sets, so it resumes only the nodes it took out.
const HaleReason = "hale: "

// Reserve puts a node in a maintenance reservation: no job starts on it while hale runs deep
// health checks (HyperPod's mechanism).
func Reserve(reservation, node string) []string {
	return []string{"scontrol", "create", "reservation", "ReservationName=" + reservation, "Nodes=" + node,
		"StartTime=now", "Duration=infinite", "Users=root", "Flags=maint,ignore_jobs"}
}

// Unreserve deletes a reservation.
func Unreserve(reservation string) []string {
	return []string{"scontrol", "delete", "ReservationName=" + reservation}
}
