#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for bench/rooms (Debian's server):
#
#   bash bench/rooms/pg.sh start DIR   # initdb DIR/data, start, createdb rooms; prints the socket dir
#   bash bench/rooms/pg.sh stop DIR
#
# The newest /usr/lib/postgresql/*/bin (apt-get install postgresql if none).
# initdb refuses root: the cluster runs as user postgres, trust auth, unix
# socket only (DIR/sock), synchronous_commit=on and fsync=on: DIR must be on
# a real disk (on tmpfs a commit's wait, the thing pools overlap, vanishes).
set -euo pipefail
cmd="${1:?start|stop}"; dir="${2:?DIR}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
if [ -z "$bin" ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
fi
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
start)
	mkdir -p "$dir/sock"
	[ "$(id -u)" = 0 ] && chown postgres "$dir" "$dir/sock"
	chmod 0777 "$dir/sock"
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		as_pg "$bin/initdb" -A trust -U postgres -D "$dir/data" >"$dir/initdb.log"
	fi
	as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
		-o "-c listen_addresses='' -c unix_socket_directories='$dir/sock' -c synchronous_commit=on -c fsync=on -c max_connections=300 -c shared_buffers=128MB" >/dev/null
	as_pg "$bin/psql" -h "$dir/sock" -U postgres -qAtc "SELECT 1 FROM pg_database WHERE datname='rooms'" | grep -q 1 ||
		as_pg "$bin/createdb" -h "$dir/sock" -U postgres rooms
	as_pg "$bin/psql" -h "$dir/sock" -U postgres -d rooms -qc "CREATE TABLE IF NOT EXISTS rooms_move (id bigserial PRIMARY KEY, room integer NOT NULL, player varchar(64) NOT NULL, key varchar(1) NOT NULL, sent_ns bigint NOT NULL, at timestamp NOT NULL)"
	echo "$dir/sock"
	;;
stop)
	as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
	;;
*) echo "pg.sh: start|stop DIR" >&2; exit 2 ;;
esac
