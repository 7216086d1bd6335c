#!/usr/bin/env bash
# Install everything bench/run.py needs. Idempotent: re-running does only
# what is missing or out of date.
#
#   bash bench/setup.sh                    # python3 (pyenv 3.11 here)
#   PYTHON=~/.pyenv/versions/3.12.1/bin/python3 bash bench/setup.sh
#
# Installs:
#   apt:   wrk, nghttp2-client (h2load), curl, util-linux (taskset),
#          build-essential (uWSGI compiles from source), postgresql
#          (bench/rooms starts its own throwaway cluster: bench/rooms/pg.sh),
#          redis-server (bench/rooms starts its own on a unix socket, issue 21)
#   go:    vegeta, pinned, into bench/work/bin
#   venv:  bench/work/venv-<pyver> from $PYTHON with bench/requirements.txt
#          (granian, gunicorn, uWSGI, uvicorn[standard], hypercorn, daphne,
#          Django, Flask). Every server runs this same Python.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$HERE/work"
PYTHON="${PYTHON:-python3}"
VEGETA_VERSION="${VEGETA_VERSION:-v12.13.0}"

say() { printf 'setup: %s\n' "$*"; }

# --- apt ---------------------------------------------------------------
need=()
for pkg in wrk nghttp2-client curl util-linux build-essential nginx postgresql redis-server; do  # nginx: bench/static (run from its own config, not the service)
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || need+=("$pkg")
done
if ((${#need[@]})); then
	say "apt-get install ${need[*]}"
	SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
else
	say "apt packages present"
fi

# --- vegeta (open-loop client) -----------------------------------------
mkdir -p "$WORK/bin" "$WORK/logs"
have=""
if [ -x "$WORK/bin/vegeta" ]; then
	have="$(go version -m "$WORK/bin/vegeta" 2>/dev/null | awk '$1=="mod"{print $3}')"
fi
if [ "$have" != "$VEGETA_VERSION" ]; then
	say "go install vegeta@$VEGETA_VERSION"
	GOBIN="$WORK/bin" GOFLAGS=-mod=mod go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
else
	say "vegeta $have present"
fi

# --- virtualenv ------------------------------------------------------------
"$PYTHON" -c 'import sys' 2>/dev/null || { say "PYTHON=$PYTHON does not run"; exit 1; }
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
PYREAL="$("$PYTHON" -c 'import sys; print(sys.executable)')"
INCLUDEPY="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("INCLUDEPY"))')"
[ -f "$INCLUDEPY/Python.h" ] || { say "no Python.h in $INCLUDEPY: uWSGI cannot build (install the -dev headers for $PYREAL)"; exit 1; }
VENV="$WORK/venv-$PYVER"
STAMP="$VENV/.bench-installed"
REQ_SUM="$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1) $PYREAL"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$REQ_SUM" ]; then
	say "venv $VENV up to date"
else
	[ -x "$VENV/bin/python" ] || { say "python -m venv $VENV ($PYREAL)"; "$PYTHON" -m venv "$VENV"; }
	say "pip install -r bench/requirements.txt (uWSGI compiles: a minute or two)"
	"$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
	printf '%s' "$REQ_SUM" >"$STAMP"
fi

# Check the result: every server answers --version and uWSGI runs this Python.
"$VENV/bin/granian" --version >/dev/null
"$VENV/bin/gunicorn" --version >/dev/null
"$VENV/bin/uwsgi" --version >/dev/null
"$VENV/bin/uvicorn" --version >/dev/null
"$VENV/bin/python" -c "import hypercorn"
"$VENV/bin/python" -c 'import daphne, django, flask, uvloop, httptools, channels, psycopg'
say "ready: venv=$VENV vegeta=$WORK/bin/vegeta wrk=$(command -v wrk)"
if [ ! -x "$HERE/../bin/turnstile" ]; then
	say "note: $HERE/../bin/turnstile is missing (cd $(dirname "$HERE") && make build); run.py will skip it"
fi
