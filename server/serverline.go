package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseServerLine parses one server.N line, of zoo.cfg or of the dynamic
// configuration (/zookeeper/config, reconfig's joining servers): key is
// "server.N" (N in 1..254) and value
// "host:peerPort:electionPort[:role][;[clientHost:]clientPort]", as
// ZooKeeper's QuorumServer reads it: a host in brackets is an IPv6
// address (server.1=[::1]:2888:3888;[::1]:2181), the role is participant
// (the default) or observer in any case, a client port alone listens on
// 0.0.0.0. hasClient says whether the value names a client address (a
// zoo.cfg line may leave it to clientPort; a dynamic one must not). A
// member has one address: ZooKeeper's multiAddress (a|b) is refused.
func ParseServerLine(key, value string) (m Member, hasClient bool, err error) {
	fail := func(why string) (Member, bool, error) {
		return Member{}, false, fmt.Errorf("%s=%s: %s", key, value, why)
	}
	idStr, ok := strings.CutPrefix(strings.TrimSpace(key), "server.")
	if !ok {
		return fail("not a server.N line")
	}
	id, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil || id == 0 || id > 254 {
		return fail("server id must be 1..254")
	}
	addrPart, clientPart, hasClient := strings.Cut(strings.TrimSpace(value), ";")
	if strings.Contains(addrPart, "|") {
		return fail("a zkraft member has one address (multiAddress is not supported)")
	}
	f, err := splitHostPorts(addrPart)
	if err != nil {
		return fail(err.Error())
	}
	if len(f) < 3 || len(f) > 4 {
		return fail("want host:peerPort:electionPort[:role]")
	}
	for _, p := range f[1:3] {
		if !validPort(p) {
			return fail(fmt.Sprintf("bad port %q", p))
		}
	}
	m = Member{ID: id, RaftAddr: net.JoinHostPort(f[0], f[1]), ElectionAddr: net.JoinHostPort(f[0], f[2])}
	if len(f) == 4 {
		switch strings.ToLower(f[3]) {
		case "participant":
		case "observer":
			m.Observer = true
		default:
			return fail("role must be participant or observer")
		}
	}
	if hasClient {
		c, err := splitHostPorts(strings.TrimSpace(clientPart))
		if err != nil {
			return fail(err.Error())
		}
		if len(c) == 1 {
			c = []string{"0.0.0.0", c[0]}
		}
		if len(c) != 2 || !validPort(c[1]) {
			return fail("bad client address: want [clientHost:]clientPort")
		}
		m.ClientAddr = net.JoinHostPort(c[0], c[1])
	}
	return m, hasClient, nil
}

// splitHostPorts splits host:port[:...] at its colons, a host in brackets
// (an IPv6 address) as one field without them (ConfigUtils.getHostAndPort).
func splitHostPorts(s string) ([]string, error) {
	rest, ok := strings.CutPrefix(s, "[")
	if !ok {
		return strings.Split(s, ":"), nil
	}
	host, after, ok := strings.Cut(rest, "]")
	if !ok {
		return nil, errors.New("starts with '[' but has no matching ']'")
	}
	if after == "" {
		return []string{host}, nil
	}
	ports, ok := strings.CutPrefix(after, ":")
	if !ok || ports == "" {
		return nil, errors.New("want ':' and a port after ']'")
	}
	return append([]string{host}, strings.Split(ports, ":")...), nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n <= 65535
}
