package ettr

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/haleproject/hale/internal/runpolicy"
)

// Config is one simulated run. Durations are simulated time; zero values take the defaults
// named on each field.
type Config struct {
	// Nodes is the job's size (and the cluster's, with Spares); Days how long it runs.
	Nodes int
	Days  float64
	// Spares are idle nodes of the same group: a job whose node failed starts again on a spare
	// at once, and the repaired node becomes a spare. 0: the job waits for its node's repair.
	Spares int
	// Seed draws the interruptions (the same seed, the same run).
	Seed uint64
	// Causes are the interruptions by cause over CauseNodeHours (Llama3 over Llama3NodeHours
	// when nil); RateScale multiplies their rates (1 when 0).
	Causes         []Cause
	CauseNodeHours float64
	RateScale      float64

	// Checkpoint is how often the job writes a durable checkpoint to shared storage (1 h), and
	// CheckpointStall how long the job stops for each (0: an asynchronous write).
	Checkpoint      time.Duration
	CheckpointStall time.Duration
	// MemoryCheckpoint is how often the job keeps a checkpoint in host memory that a restart
	// in place finds, and that peers hold a copy of for a replaced node (HyperPod's tiered
	// checkpointing); 0: none, a restart loads the durable one.
	MemoryCheckpoint time.Duration

	// Detect is how long a node fault takes to be found (the agent: 0.1 s); HangDetect how
	// long a hang takes to be found (the run policy rule's expectedRecurringFrequencyInSeconds:
	// 300 s, HyperPod's example).
	Detect     time.Duration
	HangDetect time.Duration
	// Provision is how long a new instance takes to be ready for hale (a replacement's boot;
	// the harness's instances boot at once): 5 min.
	Provision time.Duration
	// RestartInPlace is what a restart of the job's processes costs (processes start, the
	// rendezvous, a checkpoint loads): 60 s. RestartJob a whole-job restart (a requeue: Slurm's
	// requeue delay and a new allocation besides): 120 s.
	RestartInPlace time.Duration
	RestartJob     time.Duration
	// Policy is the job's run policy (its budgets; the ladder's defaults when nil).
	Policy *runpolicy.Policy
	// Manual is how long a job whose ladder gave up waits for a person to start it again: 1 h.
	Manual time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Checkpoint, time.Hour)
	def(&c.Detect, 100*time.Millisecond)
	def(&c.HangDetect, 300*time.Second)
	def(&c.Provision, 5*time.Minute)
	def(&c.RestartInPlace, 60*time.Second)
	def(&c.RestartJob, 120*time.Second)
	def(&c.Manual, time.Hour)
	if c.Causes == nil {
		c.Causes, c.CauseNodeHours = Llama3, Llama3NodeHours
	}
	if c.RateScale == 0 {
		c.RateScale = 1
	}
	if c.Policy == nil {
		c.Policy = &runpolicy.Policy{}
	}
	return c
}

// Repairer is the control plane a node fault goes to: hale's controller, its policy and its
// provider, on a clock of its own that Fault moves on.
type Repairer interface {
	// Fault lets a failure of cause c happen to the job's node at the given index (0 to
	// Nodes+Spares-1) at time at (since the run's start; never earlier than the last call's),
	// and returns once the node is back in service: how long that took and what hale did
	// ("Replace", "Reboot", ...). A node hale quarantined instead of repairing comes back
	// never: back is false.
	Fault(node int, at time.Duration, c Cause) (took time.Duration, action string, back bool, err error)
}

// Lost is where the time that made no kept progress went.
type Lost struct {
	Recomputed  time.Duration // progress made since the last checkpoint a restart could load
	Detecting   time.Duration // from the failure to its detection (hangs: the rule's interval)
	Repairing   time.Duration // waiting for a node's repair (and its new instance)
	Restarting  time.Duration // the restarts themselves
	Checkpoints time.Duration // the job stopped to write checkpoints
	Manual      time.Duration // waiting for a person after the ladder gave up
}

// Total is the whole time lost.
func (l Lost) Total() time.Duration {
	return l.Recomputed + l.Detecting + l.Repairing + l.Restarting + l.Checkpoints + l.Manual
}

// Result is one run's outcome.
type Result struct {
	Config Config
	// Wall is the run's length and Useful the progress it kept; ETTR is Useful/Wall.
	Wall, Useful time.Duration
	ETTR         float64
	Lost         Lost
	// Interruptions by cause, the time each cause cost, the repairs by hale's action, the
	// restarts by rung, and the nodes quarantined.
	ByCause     map[string]int
	CostByCause map[string]time.Duration
	Repairs     map[string]int
	Rungs       map[runpolicy.Rung]int
	Quarantined int
}

// Run simulates the job. Interruptions come as a Poisson process at the causes' rates scaled
// to the job's nodes; each is handled to the end (detection, repair, restart) before the next
// is drawn, which undercounts those that would land during a recovery by its share of the
// time (well under 1 % here).
func Run(cfg Config, r Repairer) (*Result, error) {
	cfg = cfg.withDefaults()
	res := &Result{Config: cfg, ByCause: map[string]int{}, CostByCause: map[string]time.Duration{}, Repairs: map[string]int{},
		Rungs: map[runpolicy.Rung]int{}}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	total := 0
	for _, c := range cfg.Causes {
		total += c.Count
	}
	perHour := float64(total) / cfg.CauseNodeHours * float64(cfg.Nodes) * cfg.RateScale
	end := time.Duration(cfg.Days * 24 * float64(time.Hour))
	ladder := runpolicy.NewLadder(cfg.Policy, 0)

	var now time.Duration
	// The nodes the job runs on and the spares, by index; a quarantined node is neither.
	placed := make([]int, cfg.Nodes)
	for i := range placed {
		placed[i] = i
	}
	var spares []int
	for i := cfg.Nodes; i < cfg.Nodes+cfg.Spares; i++ {
		spares = append(spares, i)
	}
	type pending struct {
		node int
		at   time.Duration
	}
	var repairing []pending         // nodes being repaired while the job runs on a spare: spares again at at
	var work, memWork time.Duration // progress since the last durable and in-memory checkpoints
	for now < end {
		run := end - now
		if gap := rng.ExpFloat64() / perHour * float64(time.Hour); gap < float64(run) {
			run = time.Duration(gap)
		}
		kept, stalls := progress(run, cfg, &work)
		if cfg.MemoryCheckpoint > 0 {
			memWork = (memWork + kept) % cfg.MemoryCheckpoint
		}
		now += run
		res.Useful += kept
		res.Lost.Checkpoints += stalls
		if now >= end {
			break
		}
		for i := 0; i < len(repairing); i++ {
			if repairing[i].at <= now {
				spares = append(spares, repairing[i].node)
				repairing = append(repairing[:i], repairing[i+1:]...)
				i--
			}
		}
		c := draw(rng, cfg.Causes, total)
		res.ByCause[c.Name]++
		before := res.Lost.Total()

		// The progress since the last checkpoint a restart can load is lost; the job goes on
		// from that checkpoint.
		lost := work
		if cfg.MemoryCheckpoint > 0 && memWork < work {
			lost = memWork
		}
		work, memWork = work-lost, 0
		if c.Kind == Planned {
			lost, work = 0, 0 // checkpointed on notice
			res.Lost.Checkpoints += cfg.CheckpointStall
			now += cfg.CheckpointStall
		}
		res.Useful -= lost
		res.Lost.Recomputed += lost

		detect := cfg.Detect
		if c.Kind == Hang {
			detect = cfg.HangDetect
		}
		now += detect
		res.Lost.Detecting += detect

		restart := cfg.RestartInPlace
		switch c.Kind {
		case NodeFault, NodeLost:
			slot := rng.IntN(len(placed))
			took, action, back, err := r.Fault(placed[slot], now, c)
			if err != nil {
				return nil, fmt.Errorf("%s at %s: %w", c.Name, now.Round(time.Second), err)
			}
			res.Repairs[action]++
			if action == "Replace" {
				took += cfg.Provision
			}
			if !back {
				res.Quarantined++
			}
			ladder.Repair(epoch.Add(now), []string{fmt.Sprint(placed[slot])})
			switch {
			case len(spares) > 0:
				// The job moves to a spare at once; the node repairs meanwhile.
				if back {
					repairing = append(repairing, pending{node: placed[slot], at: now + took})
				}
				placed[slot], spares = spares[0], spares[1:]
			case back:
				now += took
				res.Lost.Repairing += took
			default:
				// Quarantined and no spare: the job cannot have its size back until a person
				// adds a node.
				now += cfg.Manual
				res.Lost.Manual += cfg.Manual
			}
			res.Rungs[runpolicy.RepairNode]++
		case AppCrash, Hang:
			d := ladder.Next(epoch.Add(now), nil)
			res.Rungs[d.Rung]++
			switch d.Rung {
			case runpolicy.WholeJob:
				restart = cfg.RestartJob
			case runpolicy.GiveUp:
				now += cfg.Manual
				res.Lost.Manual += cfg.Manual
				restart = cfg.RestartJob
				ladder = runpolicy.NewLadder(cfg.Policy, 0) // a new submission
			}
		case Planned:
			restart = cfg.RestartJob
			res.Rungs[runpolicy.WholeJob]++
		}
		now += restart
		res.Lost.Restarting += restart
		res.CostByCause[c.Name] += res.Lost.Total() - before
	}
	if now > end {
		// The last recovery ran past the end: the run is as long as it took.
		end = now
	}
	res.Wall = end
	res.ETTR = float64(res.Useful) / float64(res.Wall)
	return res, nil
}

// progress is what d of running keeps, and the checkpoint stalls within it: the job stops
// for CheckpointStall each time its progress since the last durable checkpoint (*work) reaches
// Checkpoint.
func progress(d time.Duration, cfg Config, work *time.Duration) (kept, stalls time.Duration) {
	for d > 0 {
		toCheckpoint := cfg.Checkpoint - *work
		if d < toCheckpoint {
			*work += d
			return kept + d, stalls
		}
		kept += toCheckpoint
		d -= toCheckpoint
		*work = 0
		stall := min(cfg.CheckpointStall, d)
		stalls += stall
		d -= stall
	}
	return kept, stalls
}

// epoch is the simulated run's start, for the ladder's clock.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func draw(rng *rand.Rand, causes []Cause, total int) Cause {
	n := rng.IntN(total)
	for _, c := range causes {
		if n < c.Count {
			return c
		}
		n -= c.Count
	}
	return causes[len(causes)-1]
}
