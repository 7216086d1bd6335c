package supervise

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"turnstile/internal/workerctl"
)

// procState is where a worker process is in its life. Owned by the loop.
type procState int

const (
	stateStarting procState = iota // spawned, app loading; not yet "ready"
	stateReady                     // serving
	stateDraining                  // told to stop (SIGTERM); finishing in-flight work
)

func (s procState) String() string {
	return [...]string{"starting", "ready", "draining"}[s]
}

// tailLines is how many of a worker's last stderr lines the master keeps,
// for the record it logs when the worker dies (stderr_tail). A line that
// is one of the worker's log records is kept as its level and the first
// line of its message ("ERROR wsgi: app raised"): the record itself, with
// its fields and any traceback, is in the log just above, and is not
// repeated, escaped a second time, inside another record. Raw output (a C
// library's message, "Fatal Python error" and faulthandler's stacks on
// fd 2) is kept as it is.
const tailLines = 20

// maxLineBytes bounds one forwarded log line; longer lines are forwarded
// in pieces.
const maxLineBytes = 1 << 20

// proc is one worker process. The loop owns every field but the ones the
// reader goroutines touch (tail, guarded by its own lock).
type proc struct {
	id      int    // slot, 1..Workers: the worker="<id>" label
	seq     int    // spawn counter: unique per process
	pid     int    //
	admin   string // Unix socket of its admin handler, "" when off
	cmd     *exec.Cmd
	cause   string // why it was started: start, respawn, hup, reload, max-requests, ...
	state   procState
	started time.Time
	readyAt time.Time

	replaces     *proc       // the worker this one replaces, if it is a replacement
	gen          int         // the rolling restart it was started for (replaceReq.gen)
	failMsg      string      // from its "failed <reason>" line
	recycleAsked bool        // a replacement is queued or running for it
	retry        *replaceReq // a replacement that failed to start, retried at retryAt
	retryAt      time.Time
	timers       []*time.Timer

	tail    ring
	killed  atomic.Bool   // the master sent it SIGKILL (not the OOM killer)
	ctlDone chan struct{} // the control pipe reached EOF
	errDone chan struct{} // stderr reached EOF
}

// signal sends sig; a process that has exited already is not an error.
// A SIGKILL is remembered (killed): that death is the master's doing.
// Timers call it from their own goroutines.
func (p *proc) signal(sig syscall.Signal) {
	if p.cmd.Process != nil {
		if sig == syscall.SIGKILL {
			p.killed.Store(true)
		}
		_ = p.cmd.Process.Signal(sig)
	}
}

// after arms a timer owned by p, stopped when p exits.
func (p *proc) after(d time.Duration, f func()) {
	p.timers = append(p.timers, time.AfterFunc(d, f))
}

func (p *proc) stopTimers() {
	for _, t := range p.timers {
		t.Stop()
	}
	p.timers = nil
}

// ring keeps the last tailLines lines.
type ring struct {
	mu    sync.Mutex
	lines [tailLines]string
	n     int
}

func (r *ring) add(line string) {
	r.mu.Lock()
	r.lines[r.n%tailLines] = line
	r.n++
	r.mu.Unlock()
}

// text returns the kept lines, oldest first, one per line.
func (r *ring) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	start := max(0, r.n-tailLines)
	for i := start; i < r.n; i++ {
		b.WriteString(r.lines[i%tailLines])
		if i < r.n-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// attr is the stderr_tail field of a record about the worker's end: the
// kept lines, or nothing when there are none.
func (r *ring) attr() slog.Attr {
	t := r.text()
	if t == "" {
		return slog.Attr{} // slog drops the zero Attr
	}
	return slog.String("stderr_tail", t)
}

// tailLine is what the tail keeps of one line of a worker's output: for
// a log record the worker formatted (--log-format text or json), its
// level and the first line of its message; anything else as it is.
func tailLine(line []byte) string {
	switch {
	case bytes.HasPrefix(line, []byte(`{"time":`)):
		var rec struct{ Level, Msg string }
		if json.Unmarshal(line, &rec) == nil {
			return summary(rec.Level, rec.Msg)
		}
	case bytes.HasPrefix(line, []byte("time=")):
		if level, msg, ok := textFields(string(line)); ok {
			return summary(level, msg)
		}
	}
	return string(line)
}

func summary(level, msg string) string {
	first, _, _ := strings.Cut(msg, "\n")
	return level + " " + first
}

// textFields returns the level and msg of a record in slog's text format.
func textFields(line string) (level, msg string, ok bool) {
	_, rest, found := strings.Cut(line, " level=")
	if !found {
		return "", "", false
	}
	level, rest, _ = strings.Cut(rest, " ")
	rest, found = strings.CutPrefix(rest, "msg=")
	if !found {
		return "", "", false
	}
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", "", false
		}
		msg, err = strconv.Unquote(q)
		return level, msg, err == nil
	}
	msg, _, _ = strings.Cut(rest, " ")
	return level, msg, true
}

// spawner starts processes from one goroutine locked to its OS thread for
// the life of the master. A worker's parent-death signal (Pdeathsig) fires
// when the *thread* that forked it exits, and Go may end a thread whose
// goroutine exits while locked: this thread never exits.
type spawner struct{ req chan spawnReq }

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{req: make(chan spawnReq)}
	go func() {
		runtime.LockOSThread() // never unlocked: see spawner
		for r := range s.req {
			r.done <- r.cmd.Start()
		}
		select {} // s.req is never closed; keep the thread if it were
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	s.req <- spawnReq{cmd, done}
	return <-done
}

// spawn starts worker id as a re-exec of this binary with the master's
// arguments, the listener and a control pipe at the descriptors of
// internal/workerctl, and starts the goroutines that read its control
// pipe and stderr and wait for it.
func (m *Master) spawn(id int, cause string) (*proc, error) {
	m.seq++
	p := &proc{id: id, seq: m.seq, cause: cause, state: stateStarting,
		ctlDone: make(chan struct{}), errDone: make(chan struct{})}
	if m.dir != "" {
		p.admin = fmt.Sprintf("%s/w%d-%d.sock", m.dir, id, p.seq)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("supervise: control pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("supervise: stderr pipe: %w", err)
	}
	cmd := exec.Command(m.exe, m.args...)
	// ps -f shows argv: a title as gunicorn's setproctitle gives one
	// ("gunicorn: worker [app]"), the master's arguments after it. The
	// worker sets its short name (comm) itself (server.setProcessName).
	cmd.Args[0] = fmt.Sprintf("turnstile: worker %d [%s]", id, m.cfg.App)
	cmd.Env = append(childEnv(workerEnv()), workerctl.Env(id, p.admin)...)
	quic, err := m.quicFile(id)
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}
	layerM, layerW, err := layerPair()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}
	cmd.ExtraFiles = workerctl.ExtraFiles(m.lnFile, ctlW, quic, layerW)
	cmd.Stdout, cmd.Stderr = errW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C in a terminal reaches the
		// master only, which then stops the workers once, gracefully.
		Setpgid: true,
		// A master that dies (even by SIGKILL) takes its workers with it.
		Pdeathsig: syscall.SIGTERM,
		// --user/--group (deploy.go); nil: the master's own.
		Credential: m.cred,
	}
	p.cmd = cmd
	err = m.spawner.start(cmd)
	ctlW.Close()
	errW.Close()
	layerW.Close()
	if err != nil {
		ctlR.Close()
		errR.Close()
		layerM.Close()
		return nil, fmt.Errorf("supervise: starting worker %d: %w", id, err)
	}
	p.pid = cmd.Process.Pid
	go layerHub.Serve(p.pid, layerM, layerMaxFrame(m.cfg))
	p.started = time.Now()
	go m.readControl(p, ctlR)
	go m.readStderr(p, errR)
	go func() {
		err := cmd.Wait()
		// Let the readers drain what the worker wrote last (a grandchild
		// that inherited stderr could hold it open: bounded).
		deadline := time.Now().Add(500 * time.Millisecond)
		for _, c := range []chan struct{}{p.ctlDone, p.errDone} {
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-c:
			case <-t.C:
			}
			t.Stop()
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			m.log.Warn("waiting for a worker", "worker", id, "pid", p.pid, "err", err)
		}
		m.events <- event{kind: evExit, p: p, ps: cmd.ProcessState}
	}()
	return p, nil
}

// workerEnv is the master's environment without worker variables.
func workerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if workerctl.IsEnv(kv) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// readControl turns the worker's control messages (workerctl.Msg, one a
// line) into events.
func (m *Master) readControl(p *proc, r *os.File) {
	defer close(p.ctlDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), workerctl.MaxLineBytes)
	for sc.Scan() {
		msg, err := workerctl.Parse(sc.Text())
		if err != nil {
			m.log.Warn("unknown line on a worker's control pipe", "worker", p.id, "pid", p.pid, "line", sc.Text(), "err", err)
			continue
		}
		switch msg.Kind {
		case workerctl.Ready:
			m.events <- event{kind: evReady, p: p}
		case workerctl.Failed:
			m.events <- event{kind: evFailed, p: p, msg: msg}
		case workerctl.Recycle:
			m.events <- event{kind: evRecycle, p: p, msg: msg}
		}
	}
}

// readStderr forwards the worker's output to the master's log output,
// line by line (the worker formats its own records), and keeps the tail.
func (m *Master) readStderr(p *proc, r *os.File) {
	defer close(p.errDone)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < maxLineBytes {
				long = append(long, chunk...)
			}
			continue
		}
		line := append(long, chunk...) // a copy: chunk is the reader's buffer
		long = nil
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			m.out.Write(line)
			p.tail.add(tailLine(bytes.TrimRight(line, "\n")))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				m.log.Debug("reading a worker's stderr", "worker", p.id, "pid", p.pid, "err", err)
			}
			return
		}
	}
}

// exitCause describes how a process ended: "exit status 3", or "killed
// by SIGKILL" (with possibleOOM for a SIGKILL the master did not send
// itself, byMaster false: the kernel's OOM killer sends one), and the
// signal name when there is one.
func exitCause(ps *os.ProcessState, byMaster bool) (cause, sig string, possibleOOM bool) {
	if ps == nil {
		return "unknown", "", false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.String(), "", false
	}
	switch {
	case ws.Signaled():
		s := ws.Signal()
		sig = unix.SignalName(s)
		if sig == "" {
			sig = "signal " + strconv.Itoa(int(s))
		}
		cause = fmt.Sprintf("killed by %s (signal %d)", sig, int(s))
		if ws.CoreDump() {
			cause += ", core dumped"
		}
		if s == syscall.SIGKILL && byMaster {
			cause += "; sent by the master"
		} else if s == syscall.SIGKILL {
			possibleOOM = true
			cause += "; possibly the kernel's OOM killer"
		}
		return cause, sig, possibleOOM
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus()), "", false
	}
	return ps.String(), "", false
}

// rssBytes reads the resident set size of pid from /proc/<pid>/statm.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("supervise: /proc/%d/statm: %q", pid, b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}
