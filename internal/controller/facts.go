package controller

import "github.com/haleproject/hale/internal/store"

// facts are what several steps of a round must agree on, read once when the round begins and
// changed by no step. The agents' state moves under the round (sessions come and go while it
// runs); a step that asked the agents itself could see a node silent where an earlier step saw
// it speak, and the heartbeat outage, which decides whether any silent node is judged at all,
// must be known before the first step that judges one (it once was set by a later step than the
// one that read it).
type facts struct {
	// serving counts the cluster's Ready nodes, silentServing those of them whose agent is
	// silent.
	serving, silentServing int
	// outage: the heartbeats of most serving nodes (more than half, two at least) are missing at
	// once: the cause is between them and the server (a server restart, a network partition),
	// not many machines dying in the same moment, and no node is judged unreachable while it
	// lasts.
	outage bool
	// agents is each node's agent as the server saw it when the round began, by instance id.
	agents map[string]agentFact
}

// agentFact is one agent as Agents reports it (Connected, Silent, Reachable).
type agentFact struct{ connected, silent, reachable bool }

// readFacts reads the round's facts about nodes.
func (c *Controller) readFacts(nodes []*store.Node) facts {
	f := facts{agents: make(map[string]agentFact, len(nodes))}
	for _, n := range nodes {
		if n.InstanceID == "" {
			continue
		}
		a := agentFact{connected: c.cfg.Agents.Connected(n.InstanceID), silent: c.cfg.Agents.Silent(n.InstanceID),
			reachable: c.cfg.Agents.Reachable(n.InstanceID)}
		f.agents[n.InstanceID] = a
		if n.Details.Phase == store.PhaseReady {
			f.serving++
			if a.silent {
				f.silentServing++
			}
		}
	}
	f.outage = f.silentServing >= 2 && 2*f.silentServing > f.serving
	return f
}

// agent is the instance's agent as the round began; an instance launched by this round, which
// the facts do not know, is asked about now.
func (r *round) agent(instanceID string) agentFact {
	if a, ok := r.facts.agents[instanceID]; ok {
		return a
	}
	ag := r.c.cfg.Agents
	return agentFact{connected: ag.Connected(instanceID), silent: ag.Silent(instanceID), reachable: ag.Reachable(instanceID)}
}
