package config

import "os"

// Switches are the A/B switches of benchmarks and bisecting: environment
// variables outside the settings (not flags, not in the TOML file, not in
// `turnstile check`), read in one place, ReadSwitches, and passed down to
// the packages they switch (internal/python and internal/asgi are cgo
// packages run in a worker: they never read the environment themselves).
// Each is on unless its variable is exactly "0"; Gate is a mode.
type Switches struct {
	// PoolTurn: the turnstile's barrier in the WSGI pool
	// (TURNSTILE_POOL_TURN; README, "The thread pool and the GIL").
	PoolTurn bool
	// PoolBatch: pool threads run under SCHED_BATCH (TURNSTILE_POOL_BATCH).
	PoolBatch bool
	// LoopBatch: the ASGI loop thread runs under SCHED_BATCH
	// (TURNSTILE_LOOP_BATCH).
	LoopBatch bool
	// SysmonBatch: Go's sysmon thread runs under SCHED_BATCH
	// (TURNSTILE_SYSMON_BATCH; docs/design.md).
	SysmonBatch bool
	// Gate is the accept gate's mode: busy, queue or off; "" for the
	// default by the number of workers (TURNSTILE_GATE; another value is
	// "" too). GateDefer spreads bursts over the workers
	// (TURNSTILE_GATE_DEFER).
	Gate      string
	GateDefer bool
}

// SwitchVars are the switches' variables: TURNSTILE_* names that are not
// settings (internal/cliconf's Reserved).
var SwitchVars = []string{"TURNSTILE_POOL_TURN", "TURNSTILE_POOL_BATCH", "TURNSTILE_LOOP_BATCH", "TURNSTILE_SYSMON_BATCH", "TURNSTILE_GATE", "TURNSTILE_GATE_DEFER"}

// ReadSwitches reads the switches from the environment.
func ReadSwitches() Switches {
	on := func(k string) bool { return os.Getenv(k) != "0" }
	s := Switches{PoolTurn: on("TURNSTILE_POOL_TURN"), PoolBatch: on("TURNSTILE_POOL_BATCH"), LoopBatch: on("TURNSTILE_LOOP_BATCH"),
		SysmonBatch: on("TURNSTILE_SYSMON_BATCH"), GateDefer: on("TURNSTILE_GATE_DEFER")}
	switch m := os.Getenv("TURNSTILE_GATE"); m {
	case "busy", "queue", "off":
		s.Gate = m
	}
	return s
}
