#!/bin/sh
# top-picture.sh: regenerate the README's capture of `turnstile top`
# (docs/top.txt, the pane as text; docs/top.png, rendered). Starts a server
# on scripts/top-demo/demo_app.py (2 workers: a loop stalled by /stall, a
# sync view /slow, a stream of / requests), runs `turnstile top` in a
# 120x32 tmux pane, sorts it by in flight, opens the first worker's
# threads, waits for a moment with a loop stalled and /slow running,
# captures the pane with its colours (tmux capture-pane -e), turns that
# into HTML (scripts/pane2html.py) and renders it with headless Chromium.
# Needs tmux, chromium, curl and a built bin/turnstile; ports 18426 and
# 19426 free.
#   scripts/top-picture.sh [VENV]     (VENV: a virtualenv with asgiref)
set -eu
cd "$(dirname "$0")/.."
BIN=$PWD/bin/turnstile VENV=${1:-$PWD/.venv-3.11}
PORT=18426 ADMIN=127.0.0.1:19426 S=ts-top-picture TMP=$(mktemp -d)
"$BIN" --app-dir scripts/top-demo --venv "$VENV" --port $PORT --admin-bind $ADMIN \
	--workers 2 --slow-request-threshold 1s demo_app:app >"$TMP/server.log" 2>&1 &
SERVER=$!
LOAD=
trap 'kill $SERVER $LOAD 2>/dev/null || :; tmux kill-session -t $S 2>/dev/null || :; rm -rf "$TMP"' EXIT
until curl -sf http://127.0.0.1:$PORT/ >/dev/null; do
	kill -0 $SERVER 2>/dev/null || { cat "$TMP/server.log"; exit 1; }
	sleep 0.2
done
# load: a steady stream on /, the slow view, the loops stalled now and then
( while :; do curl -s "http://127.0.0.1:$PORT/?[1-20]" >/dev/null; sleep 0.1; done ) &
LOAD="$LOAD $!"
( while :; do curl -s http://127.0.0.1:$PORT/slow >/dev/null; done ) &
LOAD="$LOAD $!"
( while :; do curl -s http://127.0.0.1:$PORT/stall >/dev/null; sleep 0.3; done ) &
LOAD="$LOAD $!"
tmux new-session -d -s $S -x 120 -y 32 "TERM=xterm-256color $BIN top --admin $ADMIN"
sleep 7
for k in s s s; do tmux send-keys -t $S $k; sleep 0.3; done # sort by in flight
sleep 1.5
tmux send-keys -t $S Enter # the selected worker's threads
for i in $(seq 40); do
	tmux capture-pane -e -p -t $S >"$TMP/pane.ansi"
	grep -q STALLED "$TMP/pane.ansi" && grep -q 'ts-http-0 .* /slow' "$TMP/pane.ansi" &&
		grep -q 'GET /slow .* in slow_view' "$TMP/pane.ansi" && break
	sleep 0.5
done
# the text without its colours, and without the pane's empty rows below
sed 's/\x1b\[[0-9;]*m//g' "$TMP/pane.ansi" | awk '{ l[NR] = $0 } NF { n = NR } END { for (i = 1; i <= n; i++) print l[i] }' >docs/top.txt
python3 scripts/pane2html.py <"$TMP/pane.ansi" >"$TMP/top.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
	--window-size=1000,$(($(wc -l <docs/top.txt) * 16 + 24)) \
	--screenshot="$PWD/docs/top.png" "file://$TMP/top.html" 2>/dev/null
ls -l docs/top.png docs/top.txt
