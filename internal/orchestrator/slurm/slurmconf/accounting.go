package slurmconf

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Slurm accounting, as HyperPod's sample lifecycle scripts set it up
// (setup_mariadb_accounting.sh: MariaDB and slurmdbd on the controller node, slurm.conf's
// AccountingStorageType=accounting_storage/slurmdbd, AccountingStorageHost=<controller address>,
// AccountingStoragePort=6819), done by hale instead of a script: hale owns slurm.conf and
// starts the daemons, and slurmctld must not start before slurmdbd answers (see
// AccountingWait).
//
// Everything lives in the controller node's own directories: MariaDB's data directory, socket
// and pid file in /var/lib/mysql (a node directory of the local provider, so no cluster shares
// the host's), its log in /var/log/mysql, slurmdbd's log in /var/log/slurm and its pid file in
// /var/spool/slurmctld. MariaDB takes no TCP connections (--skip-networking): slurmdbd, running
// as root, reaches it over the socket as the database's root user (unix_socket
// authentication), so there is no password to keep. slurmctld registers the cluster with
// slurmdbd when it starts (Slurm 22.05 adds a cluster it does not know), so nothing runs
// sacctmgr.
const (
	DbdConfPath = ConfDir + "/slurmdbd.conf"
	// DbdPort is slurmdbd's port (DbdPort, AccountingStoragePort), the sample scripts' 6819.
	DbdPort = 6819
	// AccountingDB is the database slurmdbd keeps (StorageLoc); slurmdbd creates it.
	AccountingDB = "slurm_acct_db"
	MariaDBDir   = "/var/lib/mysql"
)

// Socket is MariaDB's socket in its data directory dir. The marker file .hale-initialized
// there says mariadb-install-db finished; a directory without it (an install interrupted by a
// reboot) is made again.
func Socket(dir string) string { return dir + "/mysql.sock" }

// AccountingWait is how long, in seconds, a controller's bring-up waits for slurmdbd before it
// starts slurmctld without accounting. slurmctld 22.05 started with accounting_storage/slurmdbd
// for the first time exits when slurmdbd does not answer ("You are running with a database but
// for some reason we have no TRES from it"); once it has run, its state files carry what it
// needs and it runs whether slurmdbd answers or not, sending the records when it does.
// MariaDB and slurmdbd are ready in about 1-2 s on a fresh node.
const AccountingWait = 30

// DbdConf is the controller's slurmdbd.conf. slurmdbd reads it only if SlurmUser owns it with
// mode 0600. DbdHost=localhost is the name slurmdbd accepts on any host.
const DbdConf = `# slurmdbd.conf written by hale: slurmdbd keeps Slurm's accounting in the controller node's
# own MariaDB (data directory ` + MariaDBDir + `), reached over its socket as root.
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/var/spool/slurmctld/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=` + AccountingDB + `
`

// mariadbOptions are MariaDB's settings. --no-defaults first: the host's /etc/mysql is not the
// node's. The sizes suit a database of a few thousand jobs (Slurm recommends more for large
// sites and says so in slurmdbd.log); a commit is flushed to the OS at once and to disk every
// second (innodb_flush_log_at_trx_commit=2), which halves slurmdbd's first start and loses
// nothing when a process is killed; innodb_lock_wait_timeout is Slurm's recommended 900.
// innodb_snapshot_isolation, on by default from MariaDB 11.6 (trixie's 11.8), makes slurmdbd
// fatal on a write conflict (slurmdbd.log: "not supported by Slurm ... Set
// innodb_snapshot_isolation=OFF"); loose- because bookworm's 10.11 has no such option.
var mariadbOptions = []string{"--no-defaults", "--user=root", "--loose-innodb-snapshot-isolation=OFF",
	"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2"}

// MariaDB is the controller's database server, its data directory dir (MariaDBDir, the
// node's own; in a multi-head cluster one on the shared file system, which a replacement of
// the primary finds again). On a node's first start it makes the data directory
// (mariadb-install-db: system tables, root by unix_socket, no test database).
func MariaDB(dir string) Daemon {
	opts := strings.Join(append(slices.Clip(mariadbOptions), "--datadir="+dir), " ")
	script := fmt.Sprintf(`set -e
mkdir -p %[2]s
if [ ! -e %[1]s ]; then
  find %[2]s -mindepth 1 -delete
  mariadb-install-db %[3]s --auth-root-authentication-method=socket --skip-test-db
  touch %[1]s
fi
exec mariadbd %[3]s --skip-networking --socket=%[4]s --pid-file=%[2]s/mariadbd.pid --innodb-lock-wait-timeout=900 --log-error=/var/log/mysql/error.log`,
		dir+"/.hale-initialized", dir, opts, Socket(dir))
	return Daemon{Name: "mariadbd", Log: "/var/log/mysql/mariadbd.out", Argv: []string{"/bin/sh", "-c", script}}
}

// Slurmdbd is the accounting daemon. It waits (up to 10 s) for MariaDB's socket, since its
// MySQL plugin otherwise retries only every 5 s; MYSQL_UNIX_PORT tells MariaDB's client library
// where the socket is.
func Slurmdbd(dir string) Daemon {
	script := fmt.Sprintf("for i in $(seq 200); do [ -S %[1]s ] && break; sleep 0.05; done\nexec slurmdbd -D", Socket(dir))
	return Daemon{Name: "slurmdbd", Log: "/var/log/slurm/slurmdbd.out", Argv: []string{"/bin/sh", "-c", script},
		Env: map[string]string{"MYSQL_UNIX_PORT": Socket(dir)}}
}

// WaitDbd waits for slurmdbd to answer: up to seconds once MariaDB takes connections (its
// socket in its data directory dir exists), after at most MariaDBWait s for that; seconds 0
// checks once. It waits for a socket listening on slurmdbd's port first, then asks slurmdbd
// (sacctmgr, which only runs then): a listening port alone was not enough. Slurm 24.11 and
// newer listen before their database is checked, and a slurmdbd whose first query failed
// (MariaDB 11.8 refuses one just after it says it is ready: "_check_mysql_concat_is_sane: null
// result") exits a moment after it listened; slurmctld started in that moment found nothing on
// the port, and the agent's restart of slurmdbd a second later came too late for its first
// connection (TestSlurmVersions, sid and trixie, under the full suite's load).
//
// The wait is counted by the clock (/proc/uptime), not in loops: under the full suite's load
// MariaDB took 20-30 s to take connections, and each sacctmgr asking a slurmdbd that was
// still connecting to it took up to its 5 s, so a count of loops outlasted the agent's
// deadline for the command, which turned accounting off while slurmdbd was seconds from
// answering.
func WaitDbd(dir string, seconds int) []string {
	return waitPort(DbdPort, seconds, "timeout 5 sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1", Socket(dir))
}

// MariaDBWait is how long, in seconds, WaitDbd waits at most for MariaDB to take connections
// before it counts its own wait for slurmdbd: MariaDB 11.8's first start on a busy machine
// (InnoDB's files made, the buffer pool loaded) took up to 30 s.
const MariaDBWait = 90

// WaitDbdLimit is the longest a WaitDbd(dir, seconds) runs: both waits, and a last sacctmgr.
func WaitDbdLimit(seconds int) time.Duration {
	return time.Duration(MariaDBWait+seconds+10) * time.Second
}

// DbdListening checks once whether something listens on slurmdbd's port. It is what can be
// seen of slurmdbd while accounting is off: slurm.conf then names no slurmdbd, so sacctmgr
// cannot ask it (WaitDbd could never pass). slurmctld, restarted with accounting once it
// listens, has state files by then and retries a slurmdbd that is not quite there.
func DbdListening() []string { return waitPort(DbdPort, 0, "", "") }

// waitPort waits for a TCP socket of the node's network namespace to listen on port and then
// for confirm (a shell command; "" for none) to succeed: up to seconds by the clock, counted
// from when the path gate exists ("" counts at once), after at most MariaDBWait s for it;
// seconds 0 checks once. It looks for the listener without connecting (a bare connection is an
// error in slurmdbd's log), in /proc/net/tcp and tcp6 (state 0A is LISTEN), with the shell's
// own read, every 50 ms: ss and grep, run twenty times a second, were two process starts each
// time; the clock is /proc/uptime, read the same way. confirm runs only once something listens.
func waitPort(port, seconds int, confirm, gate string) []string {
	if confirm == "" {
		confirm = "true"
	}
	gated := "true"
	if gate != "" {
		gated = fmt.Sprintf("[ -e %s ]", gate)
	}
	return []string{"/bin/sh", "-c", fmt.Sprintf(`listening() { for f in /proc/net/tcp /proc/net/tcp6; do [ -r $f ] || continue
  while read -r _ l _ st _; do [ "$st" = 0A ] && case $l in *:%04X) return 0 ;; esac; done <$f; done; return 1; }
ready() { listening && %s; }
gated() { %s; }
now() { read -r up _ </proc/uptime; now=${up%%.*}; }
now; cap=$((now + %d)); end=$((now + %d))
gated && cap=$end
while ! ready; do
  now; [ $now -ge $end ] && exit 1
  if [ $cap -gt $end ] && ! gated; then end=$((now + %[5]d)); [ $end -gt $cap ] && end=$cap; fi
  sleep 0.05
done`, port, confirm, gated, MariaDBWait+seconds, seconds)}
}

// QuickAck turns delayed ACKs off for TCP connections a node makes to its own address (the
// local route's quickack attribute). Slurm sends a message's length and its body in two
// writes, so each RPC between slurmctld and slurmdbd on the controller waited for delayed ACKs,
// about 90 ms a round trip: slurmctld spent 0.5 s of them registering with slurmdbd at every
// start, and 0.8 s at its first. addr is the node's address (digits and dots).
func QuickAck(addr string) []string {
	return []string{"/bin/sh", "-c", fmt.Sprintf(`dev=$(ip -o addr show to %[1]s | awk '{print $2; exit}') && [ -n "$dev" ] && `+
		`ip route change table local local %[1]s dev "$dev" proto kernel scope host src %[1]s quickack 1`, addr)}
}

// accountingLines are slurm.conf's accounting settings: slurmctld and the client commands
// (sacct, sacctmgr) on every node reach slurmdbd at the controller's address.
func (c *Config) accountingLines() string {
	if !c.Accounting {
		return ""
	}
	return fmt.Sprintf("AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=%s\nAccountingStoragePort=%d\n", c.ControllerAddr, DbdPort)
}

// HasAccounting says whether slurm.conf text conf has hale's accounting lines.
func HasAccounting(conf string) bool {
	return strings.Contains(conf, "\nAccountingStorageType=accounting_storage/slurmdbd\n") ||
		strings.HasPrefix(conf, "AccountingStorageType=accounting_storage/slurmdbd\n")
}

// DbdAnswerWait is how long, in seconds, AccountingHealth gives slurmdbd to answer a query: a
// slurmdbd that is alive but wedged (its database locked, its disk full, the process stopped)
// accepts the connection and answers nothing.
const DbdAnswerWait = 10

// AccountingHealth reads, on the controller, what says whether accounting keeps up, one
// key=value line each: running (slurmdbd's process is there), answers (sacctmgr got an answer
// from slurmdbd within DbdAnswerWait s), queue (slurmctld's DBD Agent queue: records it holds
// for slurmdbd, from sdiag), max (MaxDBDMsgs: past it slurmctld drops records), disk (per cent
// of MariaDB's file system used) and diskerror (the newest line of slurmdbd's or MariaDB's log
// that says the disk or a table is full).
func AccountingHealth() []string {
	script := fmt.Sprintf(`p=$(cat /var/spool/slurmctld/slurmdbd.pid 2>/dev/null) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo running=yes || echo running=no
if timeout %[1]d sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; then echo answers=yes; else echo answers=no; fi
sdiag 2>/dev/null | sed -n 's/^ *DBD Agent queue size: *\([0-9]*\).*/queue=\1/p'
scontrol show config 2>/dev/null | sed -n 's/^MaxDBDMsgs *= *\([0-9]*\).*/max=\1/p'
df -P %[2]s 2>/dev/null | awk 'NR==2 {sub(/%%/, "", $5); print "disk=" $5}'
l=$(tail -q -n 200 /var/log/slurm/slurmdbd.log /var/log/mysql/error.log 2>/dev/null | grep -E -i 'disk full|no space left|errno: ?28|is full' | tail -n 1)
[ -z "$l" ] || echo "diskerror=$l"
exit 0`, DbdAnswerWait, MariaDBDir)
	return []string{"/bin/sh", "-c", script}
}

// AccountingState is AccountingHealth's answer. Queue and Max are -1 when slurmctld did not
// say (it is down, or restarting).
type AccountingState struct {
	Running, Answers bool
	Queue, Max       int
	Disk             int // per cent used; -1 unknown
	DiskError        string
}

// ParseAccountingHealth reads AccountingHealth's output.
func ParseAccountingHealth(out string) AccountingState {
	a := AccountingState{Queue: -1, Max: -1, Disk: -1}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		switch {
		case k == "running":
			a.Running = v == "yes"
		case k == "answers":
			a.Answers = v == "yes"
		case k == "queue" && err == nil:
			a.Queue = n
		case k == "max" && err == nil:
			a.Max = n
		case k == "disk" && err == nil:
			a.Disk = n
		case k == "diskerror":
			a.DiskError = v
		}
	}
	return a
}
