// Package slurmconf holds what hale writes and reads of Slurm itself: which node plays which Slurm role, the parts of
// slurm.conf and gres.conf hale owns, how they merge with the operator's part under each
// SlurmConfigStrategy, and reading Slurm's view of the nodes back.
//
// hale owns ClusterName, SlurmctldHost=<host>(<ip>) (one per controller node of a multi-head
// cluster, with its StateSaveLocation and SlurmctldTimeout), the NodeName lines, the partitions (dev
// with every compute node, Default=YES, and one per compute group) and gres.conf, as HyperPod
// does (research hyperpod-api-slurm.md §2.4), and the accounting storage lines, since hale
// runs slurmdbd on the controller (accounting.go); they live between the BEGIN and END marker
// lines. Everything else in slurm.conf is the operator's: hale writes working defaults there
// when it creates the file, and afterwards keeps, merges or overwrites it per
// SlurmConfigStrategy.
package slurmconf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Paths inside a node. /opt/slurm/etc is where HyperPod's scripts look; Debian's Slurm reads
// /etc/slurm; the local provider binds one directory over both.
const (
	ConfDir  = "/etc/slurm"
	ConfPath = ConfDir + "/slurm.conf"
	GresPath = ConfDir + "/gres.conf"
	// TopologyPath is topology.conf, beside slurm.conf (Slurm reads it from there);
	// TopologyYAMLPath is Slurm 25.05's topology.yaml, which takes precedence when it exists.
	TopologyPath = ConfDir + "/topology.conf"
	// TopologyConfUnused is topology.conf's content when topology.yaml holds the topology.
	TopologyConfUnused = "# Unused: this cluster's topology is in topology.yaml (Slurm 25.05 and newer), written by hale.\n"
	TopologyYAMLPath   = ConfDir + "/topology.yaml"
	MungeKey           = "/etc/munge/munge.key"
	BeginMark          = "# ---- BEGIN hale: ClusterName, SlurmctldHost, nodes and partitions; managed by hale ----"
	EndMark            = "# ---- END hale ----"
)

// Node is a Slurm node as slurm.conf describes it.
type Node struct {
	Name       string // ip-a-b-c-d, the node's hostname
	Addr       string
	CPUs       int
	RealMemory int64 // MiB
	GPUs       []string
	Group      string
	Partition  string // the compute group's partition
}

// Config is what hale renders.
type Config struct {
	ClusterName    string
	ControllerName string
	ControllerAddr string
	Nodes          []Node // compute nodes
	// TopologyPlugin (e.g. topology/tree) and TopologyHash (names topology.conf, so that a new
	// topology changes hale's block and slurmctld starts with it) when there is a topology.
	TopologyPlugin string
	TopologyHash   string
	// PartitionTopology names the topology.yaml topology of a partition (Slurm 25.05+:
	// PartitionName=... Topology=<name>); a partition not named uses the cluster default.
	PartitionTopology map[string]string
	// Accounting: slurmdbd runs on the controller (accounting.go), and slurm.conf says where,
	// with GPUs as a tracked resource (AccountingStorageTRES=gres/gpu, as HyperPod's sample
	// scripts set it) when the cluster has any.
	Accounting bool
	// Backups are the backup controllers of a multi-head cluster (HyperPod's multi-head: a
	// Controller group of several instances), in the order they take over: each gets a
	// SlurmctldHost line after the primary's (Controller). StateSave, the directory on the
	// cluster's shared file system that every slurmctld reads and writes (StateSaveLocation), and
	// CtldTimeout, how many seconds a backup waits for an unanswering primary before it takes
	// over (SlurmctldTimeout), go with them; all three are hale's in a multi-head cluster.
	Backups     []Controller
	StateSave   string
	CtldTimeout int
}

// Controller is a slurmctld host: the node's name and address.
type Controller struct{ Name, Addr string }

// multiHeadKeys are the operator's settings a multi-head cluster's block sets instead: the
// shared state directory and the takeover timeout cannot be a node's own.
var multiHeadKeys = []string{"statesavelocation", "slurmctldtimeout"}

// Block renders hale's part of slurm.conf, between the markers.
func (c *Config) Block() string {
	var b strings.Builder
	b.WriteString(BeginMark + "\n")
	fmt.Fprintf(&b, "ClusterName=%s\n", c.ClusterName)
	fmt.Fprintf(&b, "SlurmctldHost=%s(%s)\n", c.ControllerName, c.ControllerAddr)
	for _, bk := range c.Backups {
		fmt.Fprintf(&b, "SlurmctldHost=%s(%s)\n", bk.Name, bk.Addr)
	}
	if c.StateSave != "" {
		fmt.Fprintf(&b, "StateSaveLocation=%s\n", c.StateSave)
	}
	if c.CtldTimeout > 0 {
		fmt.Fprintf(&b, "SlurmctldTimeout=%d\n", c.CtldTimeout)
	}
	b.WriteString(c.accountingLines())
	if c.TopologyPlugin != "" {
		fmt.Fprintf(&b, "TopologyPlugin=%s\n", c.TopologyPlugin)
	}
	if c.TopologyHash != "" {
		fmt.Fprintf(&b, "# topology.conf %s\n", c.TopologyHash)
	}
	nodes := append([]Node(nil), c.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	if anyGPU(nodes) {
		b.WriteString("GresTypes=gpu\n")
		if c.Accounting {
			b.WriteString("AccountingStorageTRES=gres/gpu\n")
		}
	}
	byPart := map[string][]string{}
	var parts []string
	var all []string
	for _, n := range nodes {
		line := fmt.Sprintf("NodeName=%s NodeHostname=%s NodeAddr=%s CPUs=%d RealMemory=%d", n.Name, n.Name, n.Addr, n.CPUs, n.RealMemory)
		if len(n.GPUs) > 0 {
			line += fmt.Sprintf(" Gres=gpu:%d", len(n.GPUs))
		}
		b.WriteString(line + "\n")
		all = append(all, n.Name)
		if _, ok := byPart[n.Partition]; !ok {
			parts = append(parts, n.Partition)
		}
		byPart[n.Partition] = append(byPart[n.Partition], n.Name)
	}
	sort.Strings(parts)
	// slurmctld refuses to start without a partition ("No PartitionName information
	// available!") and a partition without nodes ("no nodes configured"), and restarting it is
	// how a change of nodes takes effect: a cluster whose compute groups are all gone would
	// leave its controller crash-looping. It gets a placeholder node that never exists
	// (State=FUTURE, which slurmctld accepts without a slurmd) in the default partition.
	if len(all) == 0 {
		fmt.Fprintf(&b, "NodeName=%s State=FUTURE\nPartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", NoComputeNodes, DefaultPartition, NoComputeNodes)
	}
	if len(all) > 0 {
		fmt.Fprintf(&b, "PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP%s\n", DefaultPartition, Hostlist(all), c.partTopology(DefaultPartition))
		for _, p := range parts {
			if p == DefaultPartition {
				continue
			}
			fmt.Fprintf(&b, "PartitionName=%s Nodes=%s MaxTime=INFINITE State=UP%s\n", p, Hostlist(byPart[p]), c.partTopology(p))
		}
	}
	b.WriteString(EndMark + "\n")
	return b.String()
}

// NoComputeNodes names the placeholder node of a cluster without compute nodes: State=FUTURE,
// never a real host, there only because slurmctld will not start without a node.
const NoComputeNodes = "hale-no-compute-nodes"

func (c *Config) partTopology(p string) string {
	if t := c.PartitionTopology[p]; t != "" {
		return " Topology=" + t
	}
	return ""
}

// Gres renders gres.conf: one line per simulated or real GPU device of each node.
func (c *Config) Gres() string {
	var b strings.Builder
	b.WriteString("# gres.conf written by hale: the GPUs of the cluster's compute nodes.\n")
	nodes := append([]Node(nil), c.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		for _, f := range n.GPUs {
			fmt.Fprintf(&b, "NodeName=%s Name=gpu File=%s\n", n.Name, f)
		}
	}
	return b.String()
}

func anyGPU(nodes []Node) bool {
	for _, n := range nodes {
		if len(n.GPUs) > 0 {
			return true
		}
	}
	return false
}

// DefaultOperatorPart is the operator's part of a new slurm.conf: settings that work on hale's
// nodes (root daemons, no cgroup-based task containment, per-node spool, log and pid paths),
// with the scheduler settings HyperPod's auto-resume relies on (permit_job_expansion), a
// short cred_expire so a requeued job starts again in seconds (research slurm-local-cluster.md
// §3.2), and the job accounting HyperPod's sample scripts configure (jobacct_gather/linux every
// 30 s; where records go is hale's block). enable_configless lets a lifecycle script start
// slurmd with --conf-server <controller>, as HyperPod's sample start_slurm.sh does (hale's
// supervised slurmd then keeps that slurmd: Slurmd in commands.go). MailProg is
// /bin/true since nodes have no mail program: slurmctld 24.11 and newer log "error: Configured
// MailProg is invalid" at every start without one.
const DefaultOperatorPart = `# slurm.conf of a hale cluster. The block hale manages (cluster name, controller, accounting
# storage, nodes, partitions) is marked below; the rest is yours, kept, merged or overwritten per the
# cluster's SlurmConfigStrategy (Managed, Merge, Overwrite).
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=cred_expire=10
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/var/spool/slurmctld/slurmctld.pid
SlurmdPidFile=/var/spool/slurmd/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=permit_job_expansion,sched_interval=5,bf_interval=5
SlurmctldParameters=enable_configless
ReturnToService=2
SlurmdTimeout=10
MessageTimeout=10
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
MpiDefault=none
MailProg=/bin/true
`

// hale owns these keys wherever they appear: an operator line that sets one is dropped when
// hale merges (it would fight hale's own).
var haleKeys = []string{"clustername", "slurmctldhost", "nodename", "partitionname", "grestypes", "topologyplugin",
	"accountingstoragetype", "accountingstoragehost", "accountingstorageport", "accountingstoragetres"}

// OperatorPart returns a slurm.conf's lines outside hale's block.
func OperatorPart(conf string) string {
	var out []string
	in := false
	for _, line := range strings.Split(conf, "\n") {
		switch strings.TrimSpace(line) {
		case BeginMark:
			in = true
			continue
		case EndMark:
			in = false
			continue
		}
		if !in {
			out = append(out, line)
		}
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n") + "\n"
}

// withoutHaleKeys drops operator lines that set a key hale owns.
func withoutHaleKeys(part string) string { return withoutKeys(part, haleKeys) }

// withoutKeys drops the lines that set one of keys (lower case).
func withoutKeys(part string, keys []string) string {
	var out []string
	for _, line := range strings.Split(part, "\n") {
		key, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		if slicesContains(keys, strings.ToLower(key)) {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Conf is the slurm.conf hale writes: the operator's part (DefaultOperatorPart for a new
// cluster) followed by hale's block.
func Conf(operator string, cfg *Config) string {
	if strings.TrimSpace(operator) == "" {
		operator = DefaultOperatorPart
	}
	if cfg.StateSave != "" {
		operator = withoutKeys(operator, multiHeadKeys)
	}
	return strings.TrimRight(operator, "\n") + "\n" + cfg.Block()
}

// Merged is the operator part a Merge keeps from the live file: its lines outside hale's block,
// less any that set a key hale owns (they would fight hale's own).
func Merged(live string) string {
	return withoutHaleKeys(OperatorPart(live))
}

// MergeInto is the slurm.conf a Merge makes of the live file and hale's rendering conf: the
// operator's part kept (Merged), then hale's block as conf has it.
func MergeInto(live, conf string) string {
	return strings.TrimRight(Merged(live), "\n") + "\n" + BlockOf(conf)
}

// OperatorDrift lists how the operator's part of the live file differs from the one hale
// wrote ("+ line" added, "- line" removed or changed); hale's block is left out, since it
// changes with the membership.
func OperatorDrift(written, live string) []string {
	return Drift(OperatorPart(written), OperatorPart(live))
}

// Hash names a rendering, to tell whether nodes have the latest one.
func Hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Drift lists how live differs from what hale wrote: lines only in live with "+", lines only
// in want with "-", in file order.
func Drift(want, live string) []string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
			m[strings.TrimRight(l, " \t")]++
		}
		return m
	}
	w, l := count(want), count(live)
	var out []string
	for _, line := range strings.Split(strings.TrimRight(want, "\n"), "\n") {
		line = strings.TrimRight(line, " \t")
		if l[line] < w[line] {
			out = append(out, "- "+line)
			l[line]++
		}
	}
	w2 := count(want)
	for _, line := range strings.Split(strings.TrimRight(live, "\n"), "\n") {
		line = strings.TrimRight(line, " \t")
		if w2[line] > 0 {
			w2[line]--
			continue
		}
		out = append(out, "+ "+line)
	}
	return out
}

// BlockOf returns hale's block of a slurm.conf, markers included ("" when it has none).
func BlockOf(conf string) string {
	i := strings.Index(conf, BeginMark)
	if i < 0 {
		return ""
	}
	j := strings.Index(conf[i:], EndMark)
	if j < 0 {
		return conf[i:]
	}
	return conf[i:i+j+len(EndMark)] + "\n"
}
