package supervise

import (
	"os"

	"golang.org/x/sys/unix"
)

// refuseSYN attaches a classic BPF socket filter to the listening TCP
// socket f that drops every segment with SYN set and ACK clear: from then
// on the kernel completes no new handshake on it, while handshakes
// already under way (their final ACK) and the connections in the accept
// queue are untouched.
//
// Why: at a full stop every worker takes what the kernel has queued on
// the shared socket before it closes its descriptor (server's gate
// drain), but a handshake that completes between the last worker's drain
// and its close lands in the queue of a socket about to close, and the
// kernel resets it — after the client has sent its request, which then
// fails with "connection reset by peer" (seen in CI: 5 of ~10,000
// requests in TestSupervise_SIGTERMUnderLoad). With the filter a client
// that connects during the stop has its SYN dropped; its retransmission
// (1 s later, RFC 6298 §2.1's initial RTO) finds the socket closed and is
// refused: the one failure a client can safely retry.
//
// The filter belongs to the socket, which the master and the workers
// share, so it is only for a full stop: a rolling restart keeps the
// socket accepting. The program runs on the segment from its TCP header
// (byte 13 holds the flags, RFC 9293 §3.1).
func refuseSYN(f *os.File) error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 13},           // A = TCP flags
		{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0x12},        // A &= SYN|ACK
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x02, Jf: 1}, // a bare SYN?
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},                          // drop it
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},                 // keep the rest whole
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.SetsockoptSockFprog(int(f.Fd()), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog)
}
