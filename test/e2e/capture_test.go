//go:build e2e

package e2e

import (
	"encoding/binary"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// capture records the TCP payloads to and from one port on one interface, from an AF_PACKET
// socket (what tcpdump reads), until stop. Each connection's bytes are kept per direction.
type capture struct {
	fd   int
	port uint16
	mu   sync.Mutex
	// streams: "client→server" bytes and "server→client" bytes of each connection, keyed by
	// the client's address and port.
	toServer, toClient map[string][]byte
	done               chan struct{}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// startCapture opens the socket on the interface ifname and starts reading.
func startCapture(t testing.TB, ifname string, port uint16) *capture {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	// Only the port's segments are queued, in a large buffer: the bridge also carries the SSH
	// copies of the agent binary to the hosts, which overflowed the socket's default buffer
	// while this goroutine waited for a CPU, and the capture lost connections' first segments
	// (a parallel run saw a stream start at a ChangeCipherSpec record). dropped says whether
	// the kernel dropped any of the port's.
	if err := attachPortFilter(fd, port); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	tv := syscall.NsecToTimeval(int64(200 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	c := &capture{fd: fd, port: port, toServer: map[string][]byte{}, toClient: map[string][]byte{}, done: make(chan struct{})}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 65536)
		for {
			select {
			case <-c.done:
				return
			default:
			}
			n, _, err := syscall.Recvfrom(fd, buf, 0)
			if err != nil || n < 14 {
				continue
			}
			c.packet(buf[:n])
		}
	}()
	t.Cleanup(func() { c.stop(); <-stopped; syscall.Close(fd) })
	return c
}

// attachPortFilter gives the socket a classic BPF program that keeps the IPv4 TCP segments
// from or to port (not fragments) and drops the rest in the kernel.
func attachPortFilter(fd int, port uint16) error {
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},                                     // EtherType
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: syscall.ETH_P_IP, SkipTrue: 9}, // not IPv4
		bpf.LoadAbsolute{Off: 23, Size: 1},                                     // IP protocol
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: syscall.IPPROTO_TCP, SkipTrue: 7},
		bpf.LoadAbsolute{Off: 20, Size: 2}, // flags and fragment offset
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 5},
		bpf.LoadMemShift{Off: 14},          // X = the IP header's length
		bpf.LoadIndirect{Off: 14, Size: 2}, // source port
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipTrue: 3},
		bpf.LoadIndirect{Off: 16, Size: 2}, // destination port
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipTrue: 1},
		bpf.RetConstant{Val: 0},
		bpf.RetConstant{Val: 0x40000},
	})
	if err != nil {
		return err
	}
	f := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		f[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]})
}

// dropped is how many of the port's segments the kernel dropped for want of room in the
// socket's buffer since the last call (PACKET_STATISTICS): a capture with drops misses bytes.
func (c *capture) dropped() uint32 {
	st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0
	}
	return st.Drops
}

func (c *capture) stop() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// packet keeps the payload of an IPv4 TCP segment to or from the port. Retransmissions are
// kept twice, which only adds bytes to search.
func (c *capture) packet(f []byte) {
	if binary.BigEndian.Uint16(f[12:14]) != syscall.ETH_P_IP {
		return
	}
	ip := f[14:]
	if len(ip) < 20 || ip[9] != syscall.IPPROTO_TCP {
		return
	}
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if total > len(ip) || ihl+20 > total {
		return
	}
	tcp := ip[ihl:total]
	src, dst := binary.BigEndian.Uint16(tcp[0:2]), binary.BigEndian.Uint16(tcp[2:4])
	payload := tcp[int(tcp[12]>>4)*4:]
	if len(payload) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.port {
	case dst:
		k := net.JoinHostPort(net.IP(ip[12:16]).String(), itoa(src))
		c.toServer[k] = append(c.toServer[k], payload...)
	case src:
		k := net.JoinHostPort(net.IP(ip[16:20]).String(), itoa(dst))
		c.toClient[k] = append(c.toClient[k], payload...)
	}
}

func itoa(v uint16) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
		if v == 0 {
			return string(b)
		}
	}
}
