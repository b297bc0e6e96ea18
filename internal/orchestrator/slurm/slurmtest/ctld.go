package slurmtest

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// Ctld is a scripted Slurm for a whole cluster, for tests that run hale's Slurm orchestrator
// on machines without Slurm (the harness's): it answers the commands the orchestrator sends
// the machines' agents (Answer) as the agents and the Slurm daemons of a real cluster would.
//
//   - The files written (WriteFiles) stay on their instance, across its reboots.
//   - A daemon started (Daemon: munged, slurmctld, slurmd, mariadbd, slurmdbd) runs while its
//     instance is up; the agent supervises it, so it runs again after each boot and after a
//     crash (a slurmctld that could not read its configuration tries again).
//   - slurmctld reads the slurm.conf of the instance it runs on when it starts (its daemon
//     started, restarted, or its instance booted) and at `scontrol reconfigure`: its nodes are
//     the NodeName lines, its controller SlurmctldHost. It keeps each node's state across its
//     restarts (its StateSaveLocation), and drops the nodes its configuration no longer lists.
//   - A slurmd (`-N name`) registers with slurmctld when its slurm.conf and slurmctld's both
//     list the name, and again at each start of slurmctld, reconfigure and boot of its
//     instance; a node whose slurmd registers is IDLE (ReturnToService=2 ends a DOWN, a DRAIN
//     stays). A node without a running slurmd is NOT_RESPONDING, and DOWN (reason "Not
//     responding") after SlurmdTimeout (10 s, hale's slurm.conf).
//   - scontrol show node -o [NAME], update nodename=NAME state=drain|down|resume, reconfigure,
//     create and delete reservation answer as Slurm's do, unknown names refused ("Invalid node
//     name specified"); and so do the orchestrator's scripts around them (slurmconf: WaitUp,
//     WaitListed, WaitDbd, DbdListening, CheckConf, ReadConf, AccountingHealth, QuickAck, munge and unmunge).
//
// A command it does not know is recorded (Unexpected) and left to the caller (Answer returns
// nil), as are the commands that are not Slurm's (lifecycle scripts, checks, GPU resets). It is
// safe for concurrent use.
type Ctld struct {
	// Up says whether an instance runs with its agent up, and which boot of it this is (1, then
	// one more at each reboot). Set it before the first Answer; it is called from Answer and
	// the readers (Configured, Node), under whatever lock their callers hold.
	Up func(instanceID string) (boot int, up bool)
	// Now is the cluster's clock (SlurmdTimeout, the reasons' times); time.Now when nil.
	Now func() time.Time
	// Version is what `slurmctld -V` prints; "slurm 24.11.5" when "".
	Version string

	mu           sync.Mutex
	files        map[string]map[string][]byte // by instance, by path
	daemons      map[string]map[string]*daemon
	ctl          *ctld             // the slurmctld; nil before it first started
	reservations map[string]string // name → its nodes
	unexpected   []string
}

// SlurmdTimeout is how long slurmctld waits for a slurmd that no longer answers before it sets
// its node DOWN: hale's slurm.conf's SlurmdTimeout.
const SlurmdTimeout = 10 * time.Second

// daemon is a daemon an agent supervises.
type daemon struct {
	argv    []string
	boot    int // the boot of its instance it was started in
	enabled bool
}

// ctld is slurmctld.
type ctld struct {
	host  string // the instance it runs on
	boot  int    // the boot of that instance it started in
	up    bool   // it read its configuration and runs
	epoch int    // its starts and reconfigures: every slurmd registers again at each
	conf  []confNode
	nodes map[string]*nodeState // by name, the nodes of conf
}

// confNode is a NodeName line of slurm.conf.
type confNode struct {
	name, addr, cpus, memory string
	future                   bool
}

// nodeState is slurmctld's view of one node.
type nodeState struct {
	base          string // IDLE, DOWN or UNKNOWN
	drain         bool
	notResponding bool
	reason        string
	reasonAt      time.Time
	reg           registration // the registration slurmctld has from it; zero before any
	silentSince   time.Time    // since when no slurmd of it runs (zero while one does)
}

// registration is one registration of a node's slurmd: the slurmd of that boot of that
// instance, in that epoch of slurmctld.
type registration struct {
	instance    string
	boot, epoch int
}

func (c *Ctld) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Ctld) version() string {
	if c.Version != "" {
		return c.Version
	}
	return "slurm 24.11.5"
}

// Answer answers a command sent to the instance's agent, or returns nil for one it leaves to
// the caller (a command that is not Slurm's, or one it does not know: Unexpected).
func (c *Ctld) Answer(instanceID string, cmd *agentproto.Command) *agentproto.CommandResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files, c.daemons, c.reservations = map[string]map[string][]byte{}, map[string]map[string]*daemon{}, map[string]string{}
	}
	c.settle()
	switch k := cmd.Kind.(type) {
	case *agentproto.Command_WriteFiles:
		if c.files[instanceID] == nil {
			c.files[instanceID] = map[string][]byte{}
		}
		for _, f := range k.WriteFiles.GetFiles() {
			c.files[instanceID][f.Path] = slices.Clone(f.Content)
		}
		return &agentproto.CommandResult{DurationMs: 1}
	case *agentproto.Command_Daemon:
		d := k.Daemon
		if !slurmDaemon(d.GetName()) {
			return nil
		}
		boot, _ := c.Up(instanceID)
		if c.daemons[instanceID] == nil {
			c.daemons[instanceID] = map[string]*daemon{}
		}
		c.daemons[instanceID][d.GetName()] = &daemon{argv: slices.Clone(d.GetArgv()), boot: boot, enabled: d.GetEnabled()}
		c.settle() // slurmctld starts, a slurmd registers
		return &agentproto.CommandResult{DurationMs: 1}
	case *agentproto.Command_RestartDaemon:
		name := k.RestartDaemon.GetName()
		if !slurmDaemon(name) {
			return nil
		}
		if c.daemons[instanceID][name] == nil {
			return &agentproto.CommandResult{Error: "no daemon " + name + " is supervised here"}
		}
		if name == "slurmctld" && c.ctl != nil && c.ctl.host == instanceID {
			c.start(c.ctl.boot)
		}
		return &agentproto.CommandResult{DurationMs: 1}
	case *agentproto.Command_Run:
		if res := c.run(instanceID, k.Run.GetArgv()); res != nil {
			res.DurationMs = 1
			return res
		}
		c.unexpected = append(c.unexpected, instanceID+": "+strings.Join(k.Run.GetArgv(), " "))
	}
	return nil
}

func slurmDaemon(name string) bool {
	switch name {
	case "munged", "slurmctld", "slurmd", "mariadbd", "slurmdbd":
		return true
	}
	return false
}

// Unexpected are the commands Answer did not know, each "INSTANCE: ARGV".
func (c *Ctld) Unexpected() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.unexpected)
}

// Configured returns the instance slurmctld runs on and the nodes of the configuration it runs
// with (name → address, without FUTURE ones); "" and none when it does not run.
func (c *Ctld) Configured() (instanceID string, nodes map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settle()
	if c.ctl == nil || !c.ctl.up {
		return "", nil
	}
	nodes = map[string]string{}
	for _, cn := range c.ctl.conf {
		if !cn.future {
			nodes[cn.name] = cn.addr
		}
	}
	return c.ctl.host, nodes
}

// Node returns slurmctld's view of a node (false when it does not run or does not list it).
func (c *Ctld) Node(name string) (slurmconf.NodeState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settle()
	if c.ctl == nil || !c.ctl.up || c.ctl.nodes[name] == nil {
		return slurmconf.NodeState{}, false
	}
	n := c.ctl.nodes[name]
	return slurmconf.NodeState{Name: name, State: n.state(), Reason: n.reason}, true
}

// File returns a file written to an instance.
func (c *Ctld) File(instanceID, path string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.files[instanceID][path]
	return b, ok
}

// running reports whether the instance's daemon runs: the instance is up, and the daemon was
// started in this boot or is one its agent starts at each.
func (c *Ctld) running(instanceID, name string) bool {
	d := c.daemons[instanceID][name]
	if d == nil {
		return false
	}
	boot, up := c.Up(instanceID)
	return up && (d.enabled || d.boot == boot)
}

// settle brings slurmctld and the nodes' states to what the daemons running now make of them.
func (c *Ctld) settle() {
	host, boot := "", 0
	for _, inst := range sortedKeys(c.daemons) {
		if c.running(inst, "slurmctld") {
			host = inst
			boot, _ = c.Up(inst)
			break
		}
	}
	switch {
	case host == "":
		if c.ctl != nil {
			c.ctl.up = false
		}
		return
	case c.ctl == nil || c.ctl.host != host:
		c.ctl = &ctld{host: host, nodes: map[string]*nodeState{}} // another machine: a new StateSaveLocation
		c.start(boot)
	case c.ctl.boot != boot || !c.ctl.up:
		c.start(boot) // its agent starts it again after a boot, or after it exited
	}
	if !c.ctl.up {
		return
	}
	now := c.now()
	for _, cn := range c.ctl.conf {
		n := c.ctl.nodes[cn.name]
		if cn.future {
			continue
		}
		if inst, boot := c.slurmd(cn.name); inst != "" {
			if r := (registration{instance: inst, boot: boot, epoch: c.ctl.epoch}); n.reg != r {
				n.register(r)
			}
			continue
		}
		if n.silentSince.IsZero() {
			n.silentSince = now
		}
		n.notResponding = true
		if now.Sub(n.silentSince) >= SlurmdTimeout && n.base != "DOWN" {
			n.base = "DOWN"
			if n.reason == "" {
				n.reason, n.reasonAt = "Not responding", now
			}
		}
	}
}

// register is a registration of the node's slurmd: ReturnToService=2 makes a DOWN node IDLE,
// and a node not drained loses its reason.
func (n *nodeState) register(r registration) {
	n.reg, n.notResponding, n.silentSince = r, false, time.Time{}
	if n.base == "DOWN" || n.base == "UNKNOWN" {
		n.base = "IDLE"
	}
	if !n.drain {
		n.reason = ""
	}
}

// state is the node's State as scontrol prints it.
func (n *nodeState) state() string {
	s := n.base
	if n.drain {
		s += "+DRAIN"
	}
	if n.notResponding {
		s += "+NOT_RESPONDING"
	}
	return s
}

// slurmd finds the running slurmd of a node (its instance and that instance's boot): one
// started as that node whose own slurm.conf lists it (else it exits at its start).
func (c *Ctld) slurmd(name string) (instanceID string, boot int) {
	for _, inst := range sortedKeys(c.daemons) {
		d := c.daemons[inst]["slurmd"]
		if d == nil || slurmdName(d.argv) != name || !c.running(inst, "slurmd") {
			continue
		}
		conf, err := c.conf(inst, slurmconf.ConfPath)
		if err != nil || !slices.ContainsFunc(conf.nodes, func(cn confNode) bool { return cn.name == name }) {
			continue
		}
		boot, _ = c.Up(inst)
		return inst, boot
	}
	return "", 0
}

// slurmdName is the node name a slurmd was started as (its -N).
func slurmdName(argv []string) string {
	for i, a := range argv {
		if a == "-N" && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// start (re)starts slurmctld on its host: it reads its configuration, keeps the state of the
// nodes it still lists, and every slurmd registers again.
func (c *Ctld) start(boot int) {
	k := c.ctl
	k.boot, k.up = boot, false
	conf, err := c.conf(k.host, slurmconf.ConfPath)
	if err != nil {
		return // it exits; its agent starts it again
	}
	k.up = true
	c.configure(conf)
}

// configure has slurmctld run with conf: a new epoch, in which every slurmd registers again.
func (c *Ctld) configure(conf *parsedConf) {
	k, now := c.ctl, c.now()
	k.epoch++
	k.conf = conf.nodes
	listed := map[string]bool{}
	for _, cn := range conf.nodes {
		listed[cn.name] = true
		if k.nodes[cn.name] == nil {
			k.nodes[cn.name] = &nodeState{base: "UNKNOWN", silentSince: now}
		}
	}
	for name := range k.nodes {
		if !listed[name] {
			delete(k.nodes, name)
		}
	}
	for _, r := range sortedKeys(c.reservations) {
		if !listed[c.reservations[r]] {
			delete(c.reservations, r)
		}
	}
}

// parsedConf is what slurmctld reads of a slurm.conf.
type parsedConf struct {
	ctlName, ctlAddr string
	nodes            []confNode
}

// conf reads and parses a slurm.conf on an instance, as Slurm does far enough to find its
// nodes: every line a key=value setting (or a comment), a SlurmctldHost, a partition and a node.
func (c *Ctld) conf(instanceID, path string) (*parsedConf, error) {
	b, ok := c.files[instanceID][path]
	if !ok {
		return nil, fmt.Errorf("error: s_p_parse_file: unable to status file %s: No such file or directory", path)
	}
	p, partitions := &parsedConf{}, 0
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kv := map[string]string{}
		fields := strings.Fields(line)
		for _, f := range fields {
			k, v, ok := strings.Cut(f, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("error: Parse error in file %s line %d: %q", path, i+1, line)
			}
			kv[strings.ToLower(k)] = v
		}
		first, _, _ := strings.Cut(fields[0], "=")
		switch strings.ToLower(first) {
		case "slurmctldhost":
			name, addr, _ := strings.Cut(strings.TrimSuffix(kv["slurmctldhost"], ")"), "(")
			p.ctlName, p.ctlAddr = name, addr
		case "partitionname":
			partitions++
		case "nodename":
			p.nodes = append(p.nodes, confNode{name: kv["nodename"], addr: cmpOr(kv["nodeaddr"], kv["nodename"]), cpus: cmpOr(kv["cpus"], "1"),
				memory: cmpOr(kv["realmemory"], "1"), future: strings.EqualFold(kv["state"], "FUTURE")})
		}
	}
	switch {
	case p.ctlName == "":
		return nil, fmt.Errorf("fatal: No SlurmctldHost defined in %s", path)
	case partitions == 0:
		return nil, fmt.Errorf("fatal: No PartitionName information available!")
	case len(p.nodes) == 0:
		return nil, fmt.Errorf("fatal: No NodeName information available!")
	}
	sort.Slice(p.nodes, func(i, j int) bool { return p.nodes[i].name < p.nodes[j].name })
	return p, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Results.

func ok(out string) *agentproto.CommandResult {
	return &agentproto.CommandResult{StdoutTail: []byte(out), OutputTail: []byte(out)}
}

func exit(code int32, stdout, stderr string) *agentproto.CommandResult {
	return &agentproto.CommandResult{ExitCode: code, StdoutTail: []byte(stdout), StderrTail: []byte(stderr), OutputTail: []byte(stdout + stderr)}
}

// noCtld is scontrol's answer when slurmctld does not run.
func noCtld(what string) *agentproto.CommandResult {
	return exit(1, "", what+" error: Unable to contact slurm controller (connect failure)\n")
}

// run answers a command line on an instance; nil when it does not know it.
func (c *Ctld) run(instanceID string, argv []string) *agentproto.CommandResult {
	up := c.ctl != nil && c.ctl.up
	switch {
	case len(argv) == 0:
		return nil
	case argv[0] == "scontrol":
		return c.scontrol(argv[1:])
	case slices.Equal(argv, slurmconf.ShowVersion()):
		return ok(c.version() + "\n")
	case slices.Equal(argv, slurmconf.WaitUp()):
		if !up {
			return exit(1, "Slurmctld(primary) at "+c.ctlName()+" is DOWN\n", "")
		}
		return ok("")
	case len(argv) >= 4 && slices.Equal(argv[:4], slurmconf.WaitListed()):
		for _, name := range argv[4:] {
			if !up || c.ctl.nodes[name] == nil {
				return exit(1, "", "slurmctld does not list every node of: "+strings.Join(argv[4:], " ")+"\n")
			}
		}
		return ok("")
	case slices.Equal(argv, slurmconf.ReadConf()):
		b, found := c.files[instanceID][slurmconf.ConfPath]
		if !found {
			return exit(1, "", "base64: "+slurmconf.ConfPath+": No such file or directory\n")
		}
		return ok(base64.StdEncoding.EncodeToString(b))
	case len(argv) == 5 && slices.Equal(argv[:4], slurmconf.CheckConf("")[:4]):
		if _, found := c.files[instanceID][argv[4]]; !found {
			return ok(slurmconf.NoVerdict + "\n")
		}
		if _, err := c.conf(instanceID, argv[4]); err != nil {
			return exit(1, "sinfo: "+err.Error()+"\n", "")
		}
		return ok("")
	case isDbdWait(argv), slices.Equal(argv, slurmconf.DbdListening()):
		if !c.running(instanceID, "slurmdbd") || !c.running(instanceID, "mariadbd") {
			return exit(1, "", "")
		}
		return ok("")
	case len(argv) == 3 && slices.Equal(argv, slurmconf.QuickAck(quickAckAddr(argv[2]))):
		return ok("")
	case slices.Equal(argv, slurmconf.AccountingHealth()):
		return c.accountingHealth(instanceID)
	case slices.Equal(argv, []string{"munge", "-n"}):
		if !c.running(instanceID, "munged") {
			return exit(1, "", "munge: Error: Unable to access \"/run/munge/munge.socket.2\": No such file or directory\n")
		}
		return ok(fmt.Sprintf("MUNGE:%s:\n", base64.StdEncoding.EncodeToString([]byte(strconv.FormatInt(c.now().Unix(), 10)))))
	case len(argv) == 5 && argv[0] == "sh" && argv[3] == "unmunge":
		return c.unmunge(instanceID, argv[4])
	case len(argv) == 4 && argv[0] == "cp" && argv[1] == "-p":
		b, found := c.files[instanceID][argv[2]]
		if !found {
			return exit(1, "", "cp: cannot stat '"+argv[2]+"': No such file or directory\n")
		}
		c.files[instanceID][argv[3]] = slices.Clone(b)
		return ok("")
	}
	return nil
}

// quickAckAddr is the address a QuickAck command line is for.
func quickAckAddr(script string) string {
	_, rest, _ := strings.Cut(script, "ip -o addr show to ")
	addr, _, _ := strings.Cut(rest, " ")
	return addr
}

func (c *Ctld) ctlName() string {
	if c.ctl == nil {
		return "(none)"
	}
	if conf, err := c.conf(c.ctl.host, slurmconf.ConfPath); err == nil {
		return conf.ctlName
	}
	return c.ctl.host
}

// accountingHealth answers slurmconf.AccountingHealth: slurmdbd answers while it and MariaDB
// run; slurmctld's queue for it is empty.
func (c *Ctld) accountingHealth(instanceID string) *agentproto.CommandResult {
	dbd := c.running(instanceID, "slurmdbd")
	answers := dbd && c.running(instanceID, "mariadbd")
	var b strings.Builder
	fmt.Fprintf(&b, "running=%s\nanswers=%s\n", yesNo(dbd), yesNo(answers))
	if c.ctl != nil && c.ctl.up {
		b.WriteString("queue=0\nmax=10000\n")
	}
	b.WriteString("disk=12\n")
	return ok(b.String())
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// unmunge decodes a credential of munge -n, whose time is the encoding host's clock (the
// cluster's clock: no skew).
func (c *Ctld) unmunge(instanceID, cred string) *agentproto.CommandResult {
	if !c.running(instanceID, "munged") {
		return exit(1, "", "unmunge: Error: Unable to access \"/run/munge/munge.socket.2\": No such file or directory\n")
	}
	body := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(cred), "MUNGE:"), ":")
	raw, err := base64.StdEncoding.DecodeString(body)
	sec, perr := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || perr != nil {
		return ok("STATUS:          Invalid credential format (8)\n")
	}
	at := func(t time.Time) string {
		return fmt.Sprintf("%s (%d)", t.UTC().Format("2006-01-02 15:04:05 -0700"), t.Unix())
	}
	return ok(fmt.Sprintf("STATUS:          Success (0)\nENCODE_TIME:     %s\nDECODE_TIME:     %s\nTTL:             300\n",
		at(time.Unix(sec, 0)), at(c.now())))
}

// scontrol answers scontrol's commands (args after "scontrol").
func (c *Ctld) scontrol(args []string) *agentproto.CommandResult {
	up := c.ctl != nil && c.ctl.up
	switch {
	case len(args) >= 3 && args[0] == "show" && args[1] == "node" && args[2] == "-o":
		if !up {
			return noCtld("slurm_load_node")
		}
		if len(args) == 4 {
			if c.ctl.nodes[args[3]] == nil || c.future(args[3]) {
				return exit(1, "Node "+args[3]+" not found\n", "")
			}
			return ok(c.showNode(args[3]))
		}
		var b strings.Builder
		for _, cn := range c.ctl.conf {
			if !cn.future {
				b.WriteString(c.showNode(cn.name))
			}
		}
		return ok(b.String())
	case len(args) == 1 && args[0] == "reconfigure":
		if !up {
			return noCtld("slurm_reconfigure")
		}
		conf, err := c.conf(c.ctl.host, slurmconf.ConfPath)
		if err != nil {
			return exit(1, "", "slurm_reconfigure error: "+err.Error()+"\n")
		}
		c.configure(conf)
		return ok("")
	case len(args) == 1 && args[0] == "ping":
		if !up {
			return exit(1, "Slurmctld(primary) at "+c.ctlName()+" is DOWN\n", "")
		}
		return ok("Slurmctld(primary) at " + c.ctlName() + " is UP\n")
	case len(args) >= 1 && args[0] == "update":
		if !up {
			return noCtld("slurm_update")
		}
		return c.update(keyValues(args[1:]))
	case len(args) >= 2 && args[0] == "create" && args[1] == "reservation":
		if !up {
			return noCtld("slurm_create_reservation")
		}
		kv := keyValues(args[2:])
		name, node := kv["reservationname"], kv["nodes"]
		switch {
		case c.ctl.nodes[node] == nil:
			return exit(1, "", "Error creating the reservation: Invalid node name specified\n")
		case c.reservations[name] != "":
			return exit(1, "", "Error creating the reservation: Reservation "+name+" already exists\n")
		}
		c.reservations[name] = node
		return ok("Reservation created: " + name + "\n")
	case len(args) == 2 && args[0] == "delete":
		if !up {
			return noCtld("slurm_delete_reservation")
		}
		name := keyValues(args[1:])["reservationname"]
		if c.reservations[name] == "" {
			return exit(1, "", "Error deleting the reservation: Invalid reservation name specified\n")
		}
		delete(c.reservations, name)
		return ok("")
	}
	return nil
}

func (c *Ctld) future(name string) bool {
	return slices.ContainsFunc(c.ctl.conf, func(cn confNode) bool { return cn.name == name && cn.future })
}

// keyValues reads scontrol's key=value arguments, the keys in lower case.
func keyValues(args []string) map[string]string {
	kv := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		kv[strings.ToLower(k)] = v
	}
	return kv
}

// update answers `scontrol update nodename=NAME state=...`.
func (c *Ctld) update(kv map[string]string) *agentproto.CommandResult {
	name, state, reason := kv["nodename"], strings.ToLower(kv["state"]), kv["reason"]
	n := c.ctl.nodes[name]
	if n == nil || c.future(name) {
		return exit(1, "", "slurm_update error: Invalid node name specified\n")
	}
	now := c.now()
	switch state {
	case "drain", "down":
		if reason == "" {
			return exit(1, "", "You must specify a reason when DOWNING or DRAINING a node. Request denied\n")
		}
		if state == "drain" {
			n.drain = true
		} else {
			n.base = "DOWN"
		}
		n.reason, n.reasonAt = reason, now
	case "resume":
		if n.base != "DOWN" && !n.drain {
			return exit(1, "", "slurm_update error: Invalid node state specified\n")
		}
		if n.base == "DOWN" {
			n.base = "IDLE" // NOT_RESPONDING, if it is, stays: DOWN again after SlurmdTimeout
			if n.notResponding {
				n.silentSince = now
			}
		}
		n.drain, n.reason = false, ""
	default:
		return exit(1, "", "slurm_update error: Invalid node state specified\n")
	}
	return ok("")
}

// showNode is a node's line of `scontrol show node -o`.
func (c *Ctld) showNode(name string) string {
	n := c.ctl.nodes[name]
	var cn confNode
	for _, x := range c.ctl.conf {
		if x.name == name {
			cn = x
		}
	}
	line := fmt.Sprintf("NodeName=%s Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=%s CPUTot=%s CPULoad=0.00 AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) "+
		"NodeAddr=%s NodeHostName=%s Version=%s OS=Linux RealMemory=%s AllocMem=0 FreeMem=N/A Sockets=%s Boards=1 State=%s ThreadsPerCore=1 TmpDisk=0 Weight=1 "+
		"Owner=N/A MCS_label=N/A Partitions=dev", cn.name, cn.cpus, cn.cpus, cn.addr, cn.name, strings.TrimPrefix(c.version(), "slurm "), cn.memory, cn.cpus, n.state())
	if n.reason != "" {
		line += fmt.Sprintf(" Reason=%s [root@%s]", n.reason, n.reasonAt.UTC().Format("2006-01-02T15:04:05"))
	}
	return line + "\n"
}

// isDbdWait says whether argv is a slurmconf.WaitDbd, for any data directory (the one its
// script names) and the waits hale uses.
func isDbdWait(argv []string) bool {
	if len(argv) != 3 {
		return false
	}
	_, rest, found := strings.Cut(argv[2], "[ -e ")
	sock, _, _ := strings.Cut(rest, " ]")
	dir, isSock := strings.CutSuffix(sock, "/mysql.sock")
	if !found || !isSock || slurmconf.Socket(dir) != sock {
		return false
	}
	return slices.Equal(argv, slurmconf.WaitDbd(dir, slurmconf.AccountingWait)) || slices.Equal(argv, slurmconf.WaitDbd(dir, 0))
}
