// Package harness runs hale's controller through whole rounds without root and without
// machines: the real service and SQLite store, and in place of a provider and its agents a
// fake (Machines) whose agents answer every command at once, on a clock the test moves
// (Nomad's scheduler harness is the model).
//
// The controller's own tests use it for the generic reconciler; the orchestrator conformance
// suite (internal/orchestrator/orchestratortest) binds a real orchestrator to it and scripts
// the agents' answers to that orchestrator's commands with Machines.Script.
package harness
