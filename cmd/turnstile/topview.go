package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// The full-screen view of `turnstile top` (Bubble Tea): the server line,
// the worker table (Enter drills into a worker's threads), a thread's
// stack on t (GET /debug/stacks: the watchdog's sampler), the last stalls
// and slow requests, sorting (s), pause (p), help (?). lipgloss drops the
// colours on a terminal without them; TERM=dumb gets topLive's plain text.

type statusMsg struct {
	st  *topStatus
	err error
	at  time.Time
}

type stacksMsg struct {
	text string
	err  error
}

type tickMsg time.Time

// sortKeys are the worker table's orders, cycled by s.
var sortKeys = []string{"worker", "rss", "req/s", "in flight", "queue"}

type topModel struct {
	admin   string
	st      *topStatus
	rates   map[int]float64 // requests/s by worker pid, over the last refresh
	prev    map[int]uint64
	prevAt  time.Time
	gone    error
	paused  bool
	help    bool
	sortBy  int
	cursor  int  // the selected worker row (sorted order)
	drilled bool // the selected worker's threads are shown
	stacks  string
	record  bool // l: the last stall's and slow request's full records
	width   int
	height  int
}

var (
	styleHead = lipgloss.NewStyle().Bold(true)
	styleSel  = lipgloss.NewStyle().Reverse(true)
	styleWarn = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	styleDim  = lipgloss.NewStyle().Faint(true)
)

func fetchCmd(admin string) tea.Cmd {
	return func() tea.Msg {
		st, _, err := fetchStatus(admin)
		return statusMsg{st: st, err: err, at: time.Now()}
	}
}

func tickCmd() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// stacksCmd samples the stacks of worker pid's threads.
func stacksCmd(admin string, pid int) tea.Cmd {
	return func() tea.Msg {
		b, err := adminDo(admin, http.MethodGet, "/debug/stacks")
		if err != nil {
			return stacksMsg{err: err}
		}
		var all []struct {
			PID   int `json:"pid"`
			Items []struct {
				Thread, Method, Target string
				Stack                  []string
			} `json:"items"`
		}
		if err := json.Unmarshal(b, &all); err != nil {
			return stacksMsg{err: err}
		}
		var out strings.Builder
		for _, w := range all {
			if w.PID != pid {
				continue
			}
			for _, it := range w.Items {
				fmt.Fprintf(&out, "%s  %s %s\n", it.Thread, it.Method, it.Target)
				for _, l := range it.Stack {
					fmt.Fprintf(&out, "    %s\n", l)
				}
			}
		}
		if out.Len() == 0 {
			out.WriteString("no thread of this worker runs Python code now\n")
		}
		return stacksMsg{text: out.String()}
	}
}

func (m *topModel) Init() tea.Cmd { return tea.Batch(fetchCmd(m.admin), tickCmd()) }

// workers returns the workers in the chosen order.
func (m *topModel) workers() []int {
	if m.st == nil {
		return nil
	}
	idx := make([]int, len(m.st.Workers))
	for i := range idx {
		idx[i] = i
	}
	ws := m.st.Workers
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := ws[idx[a]], ws[idx[b]]
		switch sortKeys[m.sortBy] {
		case "rss":
			return x.RSSBytes > y.RSSBytes
		case "req/s":
			return m.rates[x.PID] > m.rates[y.PID]
		case "in flight":
			return x.InFlight > y.InFlight
		case "queue":
			return x.Queued > y.Queued
		}
		return x.Worker < y.Worker
	})
	return idx
}

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		if m.paused {
			return m, tickCmd()
		}
		return m, tea.Batch(fetchCmd(m.admin), tickCmd())
	case statusMsg:
		if msg.err != nil {
			m.gone = msg.err
			return m, tea.Quit
		}
		if m.paused {
			return m, nil
		}
		dt := msg.at.Sub(m.prevAt).Seconds()
		m.rates = map[int]float64{}
		next := map[int]uint64{}
		for _, w := range msg.st.Workers {
			if p, ok := m.prev[w.PID]; ok && dt > 0 && w.Requests >= p {
				m.rates[w.PID] = float64(w.Requests-p) / dt
			}
			next[w.PID] = w.Requests
		}
		m.st, m.prev, m.prevAt = msg.st, next, msg.at
		if m.cursor >= len(m.st.Workers) {
			m.cursor = max(0, len(m.st.Workers)-1)
		}
	case stacksMsg:
		m.stacks = msg.text
		if msg.err != nil {
			m.stacks = "stacks: " + msg.err.Error()
		}
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c":
			return m, tea.Quit
		case "?":
			m.help = !m.help
		case "l":
			m.record = !m.record
		case "p", " ":
			m.paused = !m.paused
		case "s":
			m.sortBy = (m.sortBy + 1) % len(sortKeys)
		case "up", "k":
			m.cursor = max(0, m.cursor-1)
		case "down", "j":
			if m.st != nil {
				m.cursor = min(len(m.st.Workers)-1, m.cursor+1)
			}
		case "enter":
			m.drilled = true
		case "esc", "backspace", "left":
			if m.stacks != "" {
				m.stacks = ""
			} else {
				m.drilled = false
			}
		case "t":
			if idx := m.workers(); m.cursor < len(idx) {
				m.drilled = true
				return m, stacksCmd(m.admin, m.st.Workers[idx[m.cursor]].PID)
			}
		}
	}
	return m, nil
}

func (m *topModel) View() string {
	if m.st == nil {
		return "turnstile top: asking " + m.admin + " ...\n"
	}
	var b strings.Builder
	st := m.st
	var req, infl, queued, unavail uint64
	var rate float64
	for _, w := range st.Workers {
		req += w.Requests
		infl += uint64(w.InFlight)
		queued += uint64(w.Queued)
		unavail += w.Unavail
		rate += m.rates[w.PID]
	}
	var causes []string
	for c, n := range st.Restarts {
		if n > 0 {
			causes = append(causes, fmt.Sprintf("%s=%d", c, n))
		}
	}
	sort.Strings(causes)
	if len(causes) == 0 {
		causes = []string{"none"}
	}
	state := ""
	if m.paused {
		state = styleWarn.Render(" PAUSED")
	}
	b.WriteString(styleHead.Render(fmt.Sprintf("turnstile %s  up %s  workers %d/%d  req/s %.1f  requests %d  in flight %d  queued %d  503s %d  restarts %s",
		st.Phase, time.Duration(st.UptimeS*float64(time.Second)).Truncate(time.Second), len(st.Workers), st.WorkersDesired,
		rate, req, infl, queued, unavail, strings.Join(causes, ","))) + state + "\n\n")
	b.WriteString(styleHead.Render(fmt.Sprintf("%-6s %-8s %8s %7s %7s %5s %5s %4s %4s %4s %5s %4s %8s  %s",
		"WORKER", "PID", "RSS_MB", "REQ/S", "REQS", "INFL", "QUEUE", "RUN", "GIL", "IDLE", "503", "WS", "GILP99ms", "LOOPS lag p99 ms / stall s")) + "\n")
	idx := m.workers()
	for row, i := range idx {
		w := st.Workers[i]
		var line string
		if w.Error != "" || !w.Ready {
			line = fmt.Sprintf("%-6d %-8d %s", w.Worker, w.PID, workerDown(w.Ready, w.Error))
		} else {
			var loops []string
			for _, l := range w.Loops {
				s := fmt.Sprintf("#%d %.0f/%.1f", l.Loop, l.LagP99S*1000, l.StallS)
				if l.StalledS > 0 {
					s += styleWarn.Render(fmt.Sprintf(" STALLED %.1fs", l.StalledS))
				}
				loops = append(loops, s)
			}
			line = fmt.Sprintf("%-6d %-8d %8.1f %7.1f %7d %5d %5d %4d %4d %4d %5d %4d %8.2f  %s",
				w.Worker, w.PID, float64(w.RSSBytes)/(1<<20), m.rates[w.PID], w.Requests, w.InFlight, w.Queued,
				w.ThreadsJS["running"], w.ThreadsJS["waiting_for_gil"], w.ThreadsJS["idle"], w.Unavail, w.WS, w.GILWaitP*1000, strings.Join(loops, " "))
		}
		if row == m.cursor {
			line = styleSel.Render(line)
		}
		b.WriteString(line + "\n")
	}
	if m.drilled && m.cursor < len(idx) {
		w := st.Workers[idx[m.cursor]]
		b.WriteString("\n" + styleHead.Render(fmt.Sprintf("WORKER %d (pid %d): THREADS", w.Worker, w.PID)) + "\n")
		b.WriteString(styleHead.Render(fmt.Sprintf("%-14s %-7s %8s  %s", "THREAD", "METHOD", "AGE_S", "TARGET")) + "\n")
		if len(w.Running) == 0 {
			b.WriteString(styleDim.Render("(no request in flight)") + "\n")
		}
		for _, r := range w.Running {
			th := r.Thread
			if th == "" {
				th = "loop"
				if r.Queued {
					th = "(queued)"
				}
			}
			b.WriteString(fmt.Sprintf("%-14s %-7s %8.1f  %s\n", th, r.Method, r.AgeS, r.Target))
		}
		if m.stacks != "" {
			b.WriteString("\n" + styleHead.Render("STACKS (sampled)") + "\n" + m.stacks)
		}
	}
	b.WriteString("\n" + styleHead.Render("LAST STALLS") + "\n")
	for _, w := range st.Workers {
		for i := len(w.Stalls) - 1; i >= 0 && i >= len(w.Stalls)-3; i-- {
			s := w.Stalls[i]
			b.WriteString(fmt.Sprintf("worker %d loop %d  %.0f ms  %s\n", w.Worker, s.Loop, s.DurationMS, topFrame(s.Stack)))
		}
	}
	b.WriteString("\n" + styleHead.Render("LAST SLOW REQUESTS") + "\n")
	for _, w := range st.Workers {
		for i := len(w.Slow) - 1; i >= 0 && i >= len(w.Slow)-3; i-- {
			s := w.Slow[i]
			b.WriteString(fmt.Sprintf("worker %d %s %s  %.0f ms  %s\n", w.Worker, s.Method, s.Target, s.AgeMS, topFrame(s.Stack)))
		}
	}
	if m.record {
		b.WriteString(m.lastRecords())
	}
	foot := "\n"
	if m.help {
		foot += "↑/↓ or j/k select a worker · Enter its threads · t sample its threads' stacks · Esc back\n" +
			"l the last stall's and slow request's full records\n" +
			"s sort (now by " + sortKeys[m.sortBy] + ") · p pause · ? help · q quit\n"
	} else {
		foot += styleDim.Render("q quit · ? help · Enter threads · t stacks · l last records · s sort by "+sortKeys[m.sortBy]+" · p pause") + "\n"
	}
	return clipView(b.String(), foot, m.height)
}

// clipView fits body and then foot into height rows (0: unknown, no
// clipping). The terminal would scroll the top off a taller view (the
// server's line and the workers, the rows that matter), so the body's
// end is cut instead, with a line saying how much, and the keys stay.
func clipView(body, foot string, height int) string {
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	// Rows: the body's lines, the foot's (a blank one and the keys), and
	// the empty one after the view's last newline.
	footN := strings.Count(foot, "\n")
	if height <= 0 || len(lines)+footN+1 <= height {
		return body + foot
	}
	keep := height - footN - 1 // the "more" line takes the blank row before the keys
	if keep < 1 {
		// Not even that: the server's line alone, cut to the rows there are.
		return lines[0]
	}
	more := styleDim.Render(fmt.Sprintf("... %d more lines: enlarge the terminal", len(lines)-keep))
	return strings.Join(lines[:keep], "\n") + "\n" + more + foot
}

// lastRecords renders the newest stall and the newest slow request of
// any worker in full: every frame with its source line.
func (m *topModel) lastRecords() string {
	var stall, slow string
	var stallAt, slowAt time.Time
	for _, w := range m.st.Workers {
		if n := len(w.Stalls); n > 0 && !w.Stalls[n-1].Start.Before(stallAt) {
			s := w.Stalls[n-1]
			stallAt = s.Start
			stall = fmt.Sprintf("worker %d loop %d stalled %.0f ms at %s\n    %s\n", w.Worker, s.Loop, s.DurationMS,
				s.Start.Local().Format("15:04:05"), strings.Join(s.Stack, "\n    "))
		}
		if n := len(w.Slow); n > 0 && !w.Slow[n-1].Start.Before(slowAt) {
			s := w.Slow[n-1]
			slowAt = s.Start
			slow = fmt.Sprintf("worker %d %s %s slow at %.0f ms (arrived %s)\n    %s\n", w.Worker, s.Method, s.Target, s.AgeMS,
				s.Start.Local().Format("15:04:05"), strings.Join(s.Stack, "\n    "))
		}
	}
	none := styleDim.Render("(none)") + "\n"
	if stall == "" {
		stall = none
	}
	if slow == "" {
		slow = none
	}
	return "\n" + styleHead.Render("LAST STALL") + "\n" + stall + styleHead.Render("LAST SLOW REQUEST") + "\n" + slow
}

// topTUI runs the full-screen view until q; a server that goes away
// ends it with one line and exit status 1.
func topTUI(admin string, code *int) error {
	m := &topModel{admin: admin, prev: map[int]uint64{}, rates: map[int]float64{}}
	if _, err := tea.NewProgram(m, tea.WithAltScreen()).Run(); err != nil {
		return fail(code, fmt.Errorf("turnstile top: %w", err))
	}
	if m.gone != nil {
		return fail(code, fmt.Errorf("turnstile top: the server at %s went away: %v", admin, m.gone))
	}
	return nil
}
