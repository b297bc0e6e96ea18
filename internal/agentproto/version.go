// Package agentproto is the protocol between hale agents and the hale server: the protobuf
// messages and gRPC service in agent.proto, generated into agent.pb.go and agent_grpc.pb.go
// (committed; regenerate with `go generate ./internal/agentproto`, which needs protoc,
// protoc-gen-go and protoc-gen-go-grpc).
package agentproto

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative agent.proto

// CapabilityVersion is what this build of the protocol can do. An agent announces it in Hello
// and the server in Welcome; each side only uses what both know.
//
//	1: Hello/Welcome, heartbeats, inventory, RunLifecycle, WriteFiles, RunCommand, log lines;
//	   CommandResult carries duration_ms and replayed.
//	2: Daemon and RestartDaemon commands (supervised processes); Accelerator.device_path;
//	   ephemeral commands.
//	3: Finding messages (health monitors); RunChecks; CommandResult.findings.
//	4: the AutoResume call (srun --auto-resume=1).
//	5: Finding.pid, process, job and lines (episodes of a fault; application errors counted
//	   across processes).
//	6: LogLines.batch_id and LogAck: log lines are kept by the agent until the server stored
//	   them, and stored once.
//	7: Hello.boot_id (a reboot is told from an agent restart by the kernel's boot id); the
//	   agent says Goodbye when it stops cleanly.
//	8: the channel is TLS, and mutual after registration: Hello.csr, Welcome.certificate,
//	   RenewCertificate and Certificate (client certificates from the server's agent CA, see
//	   internal/agentca); the node secret is retired (AutoResume is authenticated by the
//	   client certificate).
//	9: the ResetGPU command (a GPU reset in place, before a reboot).
//	10: NodeMetrics (the agent samples the node's and its GPUs' metrics; a server takes none
//	    from an older agent and shows none for it); AutoResumeRequest kind "resumed" (an older
//	    server refuses it, so the agent sends it only to a server of 10 or later).
//	11: AutoResumeRequest kinds "implicate" and "hang" with rung, message and repair (a job's
//	    run policy: hang detection and the restart ladder, internal/runpolicy); an older
//	    server refuses them, so the agent sends them only to a server of 11 or later.
//	12: NodeMetrics carries the root file system's free bytes, device and fstype, and each
//	    GPU's aggregate ECC counts, clock violation times and NVLink error counters; its
//	    volatile ECC counts reset with the driver, as DCGM's do. A server shows those series
//	    only for agents of 12 or later (an older agent's zeros would read as "no errors").
const CapabilityVersion = 12

// MinAgentCapability is the oldest agent this server accepts: before 8 an agent has no client
// certificate (and before 6 it loses log lines whenever the server restarts). An older agent is
// refused at Hello with FailedPrecondition, naming both versions.
const MinAgentCapability = 8

// MinServerCapability is the oldest server this agent works with: before 8 a server issues no
// client certificates.
const MinServerCapability = 8
