// Package proxy answers "who is the client?" for a server behind a proxy or
// a TCP load balancer, in Go, before the app runs:
//
//   - AllowList is --forwarded-allow-ips: the peers (and forwarding hops)
//     trusted to say where a request came from.
//   - Headers is an http1.Handler wrapper that applies X-Forwarded-For,
//     -Proto, -Host, -Port and RFC 7239 Forwarded from a trusted peer to
//     the request (RemoteAddr, Scheme, Host), once per request.
//   - Listen wraps a net.Listener for the PROXY protocol v1/v2 (HAProxy's
//     spec), read lazily on each connection's first read.
//
// See README.md, "Behind a proxy", for the policy and its reasons.
package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultAllowIPs is --forwarded-allow-ips when neither the flag nor
// FORWARDED_ALLOW_IPS is set: the loopback addresses, as uvicorn trusts
// 127.0.0.1 by default (a proxy on the same host).
const DefaultAllowIPs = "127.0.0.1,::1"

// AllowList is a set of trusted addresses: single IPs, CIDR prefixes, or
// everything ("*"). The zero value trusts nobody but Unix-socket peers.
type AllowList struct {
	all      bool
	prefixes []netip.Prefix // IPv4 prefixes hold unmapped IPv4 addresses
}

// ParseAllowList parses a comma-separated list of IP addresses and CIDR
// prefixes ("10.0.0.0/8, 192.168.1.7, ::1, fd00::/8"), or "*" for all.
// Empty items are ignored. Items that are neither an address nor a prefix
// are an error naming every one of them. An IPv4-mapped IPv6 address means its IPv4 one.
func ParseAllowList(s string) (*AllowList, error) {
	a := &AllowList{}
	var bad []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			continue
		case item == "*":
			a.all = true
			continue
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				bad = append(bad, strconv.Quote(item))
				continue
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			a.prefixes = append(a.prefixes, p.Masked())
		default:
			ip, err := netip.ParseAddr(item)
			if err != nil || ip.Zone() != "" {
				bad = append(bad, strconv.Quote(item))
				continue
			}
			ip = ip.Unmap()
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	switch len(bad) {
	case 0:
		return a, nil
	case 1:
		return nil, fmt.Errorf("%s is not an IP address or CIDR prefix", bad[0])
	}
	return nil, fmt.Errorf("%s are not IP addresses or CIDR prefixes", strings.Join(bad, ", "))
}

// All reports whether every address is trusted ("*").
func (a *AllowList) All() bool { return a != nil && a.all }

// Contains reports whether ip is trusted.
func (a *AllowList) Contains(ip netip.Addr) bool {
	if a == nil || !ip.IsValid() {
		return false
	}
	if a.all {
		return true
	}
	ip = ip.Unmap().WithZone("")
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Peer reports whether the connection peer addr is trusted. A Unix-socket
// peer is trusted, as gunicorn does: only a process allowed by the
// socket file's permissions can connect, and that is the reverse proxy.
func (a *AllowList) Peer(addr net.Addr) bool {
	switch t := addr.(type) {
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(t.IP)
		return ok && a.Contains(ip)
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	return err == nil && a.Contains(ap.Addr())
}

// String is the list as parsed, for logs.
func (a *AllowList) String() string {
	if a == nil {
		return ""
	}
	var parts []string
	if a.all {
		parts = append(parts, "*")
	}
	for _, p := range a.prefixes {
		if p.IsSingleIP() {
			parts = append(parts, p.Addr().String())
		} else {
			parts = append(parts, p.String())
		}
	}
	return strings.Join(parts, ",")
}
