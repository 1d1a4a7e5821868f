package server

import (
	"reflect"
	"testing"
)

// TestParseServerLine: the one parser of server.N lines, with ZooKeeper's
// bracketed IPv6 hosts, and what it refuses.
func TestParseServerLine(t *testing.T) {
	for _, c := range []struct {
		key, value string
		want       Member
		hasClient  bool
	}{
		{"server.1", "zk1:2888:3888", Member{ID: 1, RaftAddr: "zk1:2888", ElectionAddr: "zk1:3888"}, false},
		{"server.2", "10.0.0.2:2888:3888:observer;2182", Member{ID: 2, RaftAddr: "10.0.0.2:2888", ElectionAddr: "10.0.0.2:3888", Observer: true, ClientAddr: "0.0.0.0:2182"}, true},
		{"server.3", "zk3:2888:3888:Participant; 127.0.0.1:2181 ", Member{ID: 3, RaftAddr: "zk3:2888", ElectionAddr: "zk3:3888", ClientAddr: "127.0.0.1:2181"}, true},
		{"server.1", "[::1]:2888:3888", Member{ID: 1, RaftAddr: "[::1]:2888", ElectionAddr: "[::1]:3888"}, false},
		{"server.4", "[fe80::1%eth0]:2888:3888:OBSERVER;[::1]:2181", Member{ID: 4, RaftAddr: "[fe80::1%eth0]:2888", ElectionAddr: "[fe80::1%eth0]:3888", Observer: true, ClientAddr: "[::1]:2181"}, true},
		{"server.5", "[2001:db8::5]:2888:3888;2181", Member{ID: 5, RaftAddr: "[2001:db8::5]:2888", ElectionAddr: "[2001:db8::5]:3888", ClientAddr: "0.0.0.0:2181"}, true},
	} {
		m, hasClient, err := ParseServerLine(c.key, c.value)
		if err != nil || m != c.want || hasClient != c.hasClient {
			t.Errorf("%s=%s: %+v %v %v, want %+v %v", c.key, c.value, m, hasClient, err, c.want, c.hasClient)
		}
	}
	for _, c := range [][2]string{
		{"server.0", "a:1:2"}, {"server.255", "a:1:2"}, {"server.x", "a:1:2"}, {"serverx.1", "a:1:2"},
		{"server.1", "a:1"}, {"server.1", "a:1:2:observer:x"}, {"server.1", "a:0:2"}, {"server.1", "a:1:65536"},
		{"server.1", "a:1:2:witness"}, {"server.1", "a:1:2|b:3:4"}, {"server.1", "a:1:2;"}, {"server.1", "a:1:2;h:"},
		{"server.1", "a:1:2;h:1:2"},
		// IPv6 without brackets, and brackets that do not close or are
		// not followed by a port.
		{"server.1", "::1:2888:3888"}, {"server.1", "[::1:2888:3888"}, {"server.1", "[::1]2888:3888"},
		{"server.1", "[::1]:"}, {"server.1", "[::1]"}, {"server.1", "a:1:2;[::1]2181"},
	} {
		if m, _, err := ParseServerLine(c[0], c[1]); err == nil {
			t.Errorf("%s=%s: %+v, want an error", c[0], c[1], m)
		}
	}
}

// TestConfigRoundTrip: /zookeeper/config as renderConfig writes it reads
// back as the same members, IPv6 hosts in brackets included, and a
// dynamic line must name its client address.
func TestConfigRoundTrip(t *testing.T) {
	members := []Member{
		{ID: 1, RaftAddr: "[::1]:2888", ElectionAddr: "[::1]:3888", ClientAddr: "[::1]:2181"},
		{ID: 2, RaftAddr: "zk2:2888", ElectionAddr: "zk2:3888", ClientAddr: "0.0.0.0:2182", Observer: true},
	}
	text := renderConfig(members)
	if want := "server.1=[::1]:2888:3888:participant;[::1]:2181\nserver.2=zk2:2888:3888:observer;0.0.0.0:2182"; text != want {
		t.Errorf("renderConfig = %q, want %q", text, want)
	}
	got, err := parseConfig(text + "\nversion=100000000")
	if err != nil || !reflect.DeepEqual(got, members) {
		t.Errorf("parseConfig(renderConfig(m)) = %+v %v, want %+v", got, err, members)
	}
	if _, err := parseConfig("server.1=[::1]:2888:3888"); err == nil {
		t.Error("a dynamic server line without a client address was accepted")
	}
}
