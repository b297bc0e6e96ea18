package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
)

// The InstanceConnectivity deep health check: every agent runs a bandwidth sink (DHCPort); a
// node under test sends a block of data to each peer it is given (the next nodes of a ring, as
// a collective's all-reduce moves data) and measures the rate. Below the threshold is the
// dhc.connectivity finding ("Bandwidth has less than threshold", as HyperPod reports it).

// DefaultDHCPort is the port of the agents' bandwidth sinks (agentproto.DHCPort: the server
// names it too).
const DefaultDHCPort = agentproto.DHCPort

// serveBandwidth accepts test streams until ctx ends: it reads each to its end and answers
// with the number of bytes it read.
func (a *Agent) serveBandwidth(ctx context.Context) {
	port := a.cfg.DHCPort
	if port == 0 {
		port = DefaultDHCPort
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		a.log.Warn("bandwidth sink", "error", err)
		return
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(2 * time.Minute))
			n, _ := io.Copy(io.Discard, conn)
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(n))
			conn.Write(b[:])
		}()
	}
}

// sendBandwidth sends size bytes to peer and returns the rate in MB/s (10^6 bytes a second),
// counted once the peer confirms it received them all.
func sendBandwidth(ctx context.Context, peer string, size uint64) (float64, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", peer)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	buf := make([]byte, 1<<20)
	start := time.Now()
	for sent := uint64(0); sent < size; {
		chunk := min(uint64(len(buf)), size-sent)
		n, err := conn.Write(buf[:chunk])
		if err != nil {
			return 0, err
		}
		sent += uint64(n)
	}
	conn.(*net.TCPConn).CloseWrite()
	var ack [8]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil {
		return 0, fmt.Errorf("no confirmation from %s: %w", peer, err)
	}
	took := time.Since(start)
	if got := binary.BigEndian.Uint64(ack[:]); got != size {
		return 0, fmt.Errorf("%s received %d of %d bytes", peer, got, size)
	}
	return float64(size) / took.Seconds() / 1e6, nil
}

// connectivity tests the bandwidth to each peer against the threshold.
func (a *Agent) connectivity(ctx context.Context, peers []string, size uint64, minMBps float64, say func(string, ...any)) []health.Finding {
	if size == 0 {
		size = 64 << 20
	}
	cat := health.Default()
	var out []health.Finding
	for _, p := range peers {
		rate, err := sendBandwidth(ctx, p, size)
		switch {
		case err != nil:
			say("InstanceConnectivity to %s: FAILED: %v", p, err)
			out = append(out, cat.FaultFinding("dhc.connectivity", fmt.Sprintf("Encountered FaultyInstance. Replace the Instance. ERROR: no data path to %s: %v", p, err)))
		case rate < minMBps:
			say("InstanceConnectivity to %s: %.0f MB/s, below the threshold of %.0f MB/s", p, rate, minMBps)
			out = append(out, cat.FaultFinding("dhc.connectivity", fmt.Sprintf("Encountered FaultyInstance. Replace the Instance. ERROR:Bandwidth has less than threshold: Expected minimum threshold :%.0f,Test output Bw: %.0f (MB/s, to %s)", minMBps, rate, p)))
		default:
			say("InstanceConnectivity to %s: %.0f MB/s (%d MiB; threshold %.0f MB/s): passed", p, rate, size>>20, minMBps)
		}
	}
	return out
}
