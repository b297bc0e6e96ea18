package agentproto

// DHCPort is the port on which every agent runs the bandwidth sink of the deep health checks'
// connectivity test: the server tells each node its peers' addresses at this port (an agent's
// Config.DHCPort changes it, for tests that run agents side by side).
const DHCPort = 7072
