// Package supervise is turnstile's master: a pure-Go process that never
// initialises Python. It binds the listener, runs --workers worker
// processes (re-execs of its own binary), replaces the ones that die or
// ask to be recycled, restarts them one by one on SIGHUP or --reload,
// owns the admin listener, and stops them gracefully.
//
// The life of a master:
//
//  1. cmd/turnstile sees no TURNSTILE_WORKER in the environment and calls
//     Run. The master never initialises CPython, so a Python
//     os.waitpid(-1) can never reap its children, and a crash in a C
//     extension never takes it down. It does not even link it: no package
//     it imports, directly or not, has cgo outside the standard library.
//     It takes the contract with a worker from internal/workerctl, and
//     listening and logging from internal/listen and internal/logs, not
//     from internal/server (TestMasterLinksNoCgo).
//  2. Start binds the admin listener (unless off) and the listener
//     (listen.Bind; or takes the socket systemd passed, deploy.go), then
//     spawns --workers workers: /proc/self/exe with the master's arguments
//     and the settings it read from the environment and the --config file
//     (TURNSTILE_WORKER_SETTINGS, internal/cliconf), --user/--group
//     credentials, TURNSTILE_WORKER=<id>, the listener as fd 3,
//     the write end of a control pipe as fd 4, under --http3 its slot's
//     UDP socket as fd 5 (quic.go) and its end of the channel layer's
//     relay socketpair as fd 6 (layer.go) (workerctl.Env,
//     workerctl.ExtraFiles), stdout and stderr on a pipe,
//     its own process group (a terminal's Ctrl-C reaches the master only)
//     and SIGTERM as parent-death signal.
//  3. Each worker (internal/server, RunWorker) imports the app, starts
//     serving on the inherited socket and writes "ready" on its control
//     pipe, or "failed <reason>" and exits (workerctl.Msg). When every worker is ready the
//     master logs "listening". At first start a worker that fails, exits
//     or passes --startup-timeout before "ready" stops the server with exit
//     status 1: never a respawn loop (under --reload the master logs it
//     once and starts the worker again at the next change). A worker that was ready already
//     serves (the socket is shared) while the others start: if it dies,
//     it is respawned as in service (6), and if it asks to be replaced,
//     it is once every worker is ready.
//  4. All workers accept on the one socket: the kernel's accept queue is
//     shared, and a worker that cannot take more work stops accepting
//     (internal/server/gate.go), so the next idle worker takes the
//     connection.
//  5. The loop (one goroutine owns all state) handles events: a worker's
//     control lines, its exit (reaped by its cmd.Wait goroutine: no
//     zombie), timers, signals and file changes.
//  6. A serving worker that dies is logged once with pid, cause (exit
//     status or signal name; a SIGKILL the master did not send itself
//     flagged as a possible OOM kill) and
//     the last 20 lines of its stderr, and respawned at once, then with a
//     back-off (0.5 s doubling to 30 s) while it keeps dying within 30 s
//     of becoming ready.
//  7. A graceful replacement starts the new worker first and, only once
//     it is ready, sends the old one SIGTERM: it stops accepting, finishes
//     its in-flight requests within --graceful-timeout, and is killed
//     three seconds after that if still there (killGrace: the worker's own
//     workerctl.StopGrace for its pool or event loop, then 2 s for atexit
//     handlers and its exit). One replacement runs at a time.
//     SIGHUP and --reload replace every worker, one by one (SIGHUP first
//     has the running workers re-read the TLS certificate files in place,
//     and replaces none when they do not load: certs.go); a worker asks
//     for its own replacement ("recycle") past --max-requests or when a
//     request runs past --timeout; the master checks --workers-lifetime
//     and --workers-max-rss every second. A replacement that fails to
//     start leaves the old worker serving and cancels the rest of its
//     rolling restart (a SIGHUP or file change that came meanwhile still
//     runs). SIGTTIN adds a worker, SIGTTOU stops the last one.
//  8. SIGTERM or SIGINT: the master closes its listener and sends SIGTERM
//     to every worker; each closes its copy (new connections are refused
//     from then on) and drains. The master exits 0 when all are gone, or
//     kills them --graceful-timeout + 3 s later. A request still running
//     at --graceful-timeout is cut off: the worker closes its connection
//     (no response), waits workerctl.StopGrace (1 s) for the Python thread,
//     logs the requests still running and exits without them (a Python
//     thread cannot be stopped). The master exits 0 then too, as it does
//     after killing a worker: the stop was asked for and ended within its
//     bound. A second SIGTERM/SIGINT kills the workers at once (exit
//     status 1).
//
// The admin listener (admin.go) answers /livez itself, and /readyz,
// /metrics and /debug/* (/debug/status is what `turnstile top` reads) by
// asking each worker's own admin handler on a Unix socket in a private
// temporary directory; POST /ctl/* (`turnstile ctl`) acts as the signals
// do, and /ctl/reload-certs reloads the certificates only (certs.go).
//
// The master also holds what must outlive a worker: HTTP/3's UDP socket
// per worker slot (quic.go) and the channel layer's Hub, which relays
// group sends between the workers (layer.go, internal/chlayer relay.go).
package supervise
