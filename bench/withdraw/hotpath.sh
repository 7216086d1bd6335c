#!/bin/bash
# Issue 29 hot-path check: server CPU per request and req/s on WSGI hello
# (one worker, 4 threads), wrk -t2 -c64 -d8s after a 2 s warm-up.
# usage: bench/withdraw/hotpath.sh BIN LABEL PORT   (from the repository root)
BIN=$1; LABEL=$2; PORT=$3
cd "$(dirname "$0")/../.."
$BIN --app-dir testapps --host 127.0.0.1 --port $PORT --admin-bind off --venv .venv-3.11 --workers 1 hello:app >bench/work/hotpath-$LABEL.log 2>&1 &
M=$!
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$PORT/ && break; sleep 0.1; done
W=$(pgrep -P $M | head -1)
wrk -t2 -c64 -d2s http://127.0.0.1:$PORT/ >/dev/null
t0=$(awk '{print $14+$15}' /proc/$W/stat)
out=$(wrk -t2 -c64 -d8s http://127.0.0.1:$PORT/)
t1=$(awk '{print $14+$15}' /proc/$W/stat)
reqs=$(echo "$out" | awk '/requests in/{print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
python3 -c "print('$LABEL', 'req/s', $rps, 'server_cpu_us_per_req', round(($t1-$t0)*10000/$reqs, 2))"
kill $M; wait $M 2>/dev/null
