#!/usr/bin/env bash
# netns.sh up|down [TAG] [NET] [HOSTS]: the cluster's hosts on one
# machine, each in its own network namespace (root only).
#
#   TAG    names everything (default tsc): namespaces TAGh1..TAGhN, a
#          bridge TAGb, veth pairs TAGv1..TAGvN (the root side; the
#          namespace side is eth0). At most 9 characters (IFNAMSIZ).
#   NET    the first three octets of a /24 (default 10.231.0)
#   HOSTS  the number of hosts (default 3)
#
# Addresses: NET.1 the balancer and Redis and NET.2 the clients, both on
# the bridge in the root namespace; host i is NET.(10+i) in TAGhi. Run a
# host with `ip netns exec TAGhi turnstile ...`. Each namespace also gets
# its loopback. `down` removes what `up` made (deleting a namespace
# deletes its veth pair) and is safe to run twice.
#
# Used by tests/cluster_test.go (a TAG and NET of its own per run) and
# examples/cluster/README.md; a bench can use it the same way.
set -eu
cmd=${1:-}
tag=${2:-tsc}
net=${3:-10.231.0}
n=${4:-3}

case "$cmd" in
up)
  ip link add "${tag}b" type bridge
  ip addr add "$net.1/24" dev "${tag}b"
  ip addr add "$net.2/24" dev "${tag}b"
  ip link set "${tag}b" up
  for i in $(seq 1 "$n"); do
    ns="${tag}h$i"
    ip netns add "$ns"
    ip link add "${tag}v$i" type veth peer name "${tag}p$i"
    ip link set "${tag}v$i" master "${tag}b" up
    ip link set "${tag}p$i" netns "$ns"
    ip -n "$ns" link set "${tag}p$i" name eth0
    ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  ;;
down)
  for i in $(seq 1 "$n"); do
    ip netns del "${tag}h$i" 2>/dev/null || true
    ip link del "${tag}v$i" 2>/dev/null || true
  done
  ip link del "${tag}b" 2>/dev/null || true
  ;;
*)
  echo "usage: $0 up|down [TAG] [NET] [HOSTS]" >&2
  exit 2
  ;;
esac
