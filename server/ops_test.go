package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/fourlw"
)

// startStandalone starts a one-member server on free loopback ports.
func startStandalone(t *testing.T, tweak func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		ClientAddr:      "127.0.0.1:0",
		RaftAddr:        freeAddr(t),
		DataDir:         t.TempDir(),
		TickTime:        200 * time.Millisecond,
		FourLetterWords: []string{"*"},
		Logger:          testLogger(t, 1),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fourLW sends a word and reads the reply until the server closes.
func fourLW(t *testing.T, addr, word string) string {
	t.Helper()
	out, err := fourlw.Ask(addr, word, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", word, err)
	}
	return out
}

// connectZK opens a go-zookeeper session and waits for it.
func connectZK(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	return connectZKDial(t, addr, nil)
}

// connectZKDial is connectZK through dial (nil: the default dialer).
func connectZKDial(t *testing.T, addr string, dial zk.Dialer) *zk.Conn {
	t.Helper()
	if dial == nil {
		dial = net.DialTimeout
	}
	c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithDialer(dial), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.State == zk.StateHasSession {
				go func() {
					for range ev {
					}
				}()
				return c
			}
		case <-deadline:
			t.Fatal("no session")
		}
	}
}

// parseSrvr reads srvr as zkServer.sh status and exporters do: "Key: value"
// lines.
func parseSrvr(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if ok {
			m[k] = v
		}
	}
	return m
}

func TestFourLetterWords(t *testing.T) {
	s := startStandalone(t, nil)
	addr := s.Addr().String()
	c := connectZK(t, addr)
	if _, err := c.Create("/app", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Create("/app/e", []byte("x"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := c.GetW("/app"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.ChildrenW("/app"); err != nil {
		t.Fatal(err)
	}

	if got := fourLW(t, addr, "ruok"); got != "imok" {
		t.Errorf("ruok = %q", got)
	}
	if got := fourLW(t, addr, "isro"); got != "rw" {
		t.Errorf("isro = %q", got)
	}
	srvr := fourLW(t, addr, "srvr")
	m := parseSrvr(t, srvr)
	if m["Mode"] != "standalone" || !strings.HasPrefix(m["Zookeeper version"], "3.") {
		t.Errorf("srvr:\n%s", srvr)
	}
	// 6 nodes of an empty tree (root twice, as ZooKeeper counts it, /zookeeper,
	// quota, config and zkraft's feature node) + /app + 3 ephemerals.
	if m["Node count"] != "10" {
		t.Errorf("node count %q, want 10:\n%s", m["Node count"], srvr)
	}
	if !regexp.MustCompile(`(?m)^Latency min/avg/max: \d+/\d+\.\d+/\d+$`).MatchString(srvr) {
		t.Errorf("latency line:\n%s", srvr)
	}
	if n, _ := strconv.Atoi(m["Received"]); n < 6 {
		t.Errorf("received %q", m["Received"])
	}
	stat := fourLW(t, addr, "stat")
	if !strings.Contains(stat, "Clients:\n /127.0.0.1:") || !strings.Contains(stat, "[1](queued=0,recved=") {
		t.Errorf("stat:\n%s", stat)
	}
	cons := fourLW(t, addr, "cons")
	if !regexp.MustCompile(`(?m)^ /127\.0\.0\.1:\d+\[1\]\(queued=0,recved=\d+,sent=\d+,sid=0x[0-9a-f]+,lop=\w+,est=\d+,to=\d+,lcxid=0x[0-9a-f]+,lzxid=0x[0-9a-f]+,lresp=\d+,llat=\d+,minlat=\d+,avglat=\d+,maxlat=\d+\)$`).MatchString(cons) {
		t.Errorf("cons:\n%s", cons)
	}
	mntr := fourLW(t, addr, "mntr")
	vals := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(mntr, "\n"), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok || !strings.HasPrefix(k, "zk_") {
			t.Fatalf("mntr line %q", line)
		}
		vals[k] = v
	}
	want := map[string]string{"zk_server_state": "standalone", "zk_znode_count": "10", "zk_ephemerals_count": "3",
		"zk_watch_count": "2", "zk_outstanding_requests": "0"}
	for k, v := range want {
		if vals[k] != v {
			t.Errorf("%s = %q, want %q", k, vals[k], v)
		}
	}
	for _, k := range []string{"zk_version", "zk_approximate_data_size", "zk_num_alive_connections", "zk_avg_latency",
		"zk_min_latency", "zk_max_latency", "zk_packets_sent", "zk_packets_received", "zk_open_file_descriptor_count",
		"zk_max_file_descriptor_count", "zk_global_sessions", "zk_uptime"} {
		if _, ok := vals[k]; !ok {
			t.Errorf("mntr lacks %s", k)
		}
	}
	if wchs := fourLW(t, addr, "wchs"); wchs != "1 connections watching 1 paths\nTotal watches:1\n" {
		t.Errorf("wchs = %q", wchs)
	}
	if wchc := fourLW(t, addr, "wchc"); !regexp.MustCompile(`^0x[0-9a-f]+\n\t/app\n\n$`).MatchString(wchc) {
		t.Errorf("wchc = %q", wchc)
	}
	if wchp := fourLW(t, addr, "wchp"); !regexp.MustCompile(`^/app\n\t0x[0-9a-f]+\n\n$`).MatchString(wchp) {
		t.Errorf("wchp = %q", wchp)
	}
	dump := fourLW(t, addr, "dump")
	if !strings.Contains(dump, "SessionTracker dump:\nSession Sets (1)/(1):\n1 expire at ") ||
		!strings.Contains(dump, "Sessions with Ephemerals (1):\n") || !strings.Contains(dump, "\t/app/e0000000002\n") {
		t.Errorf("dump:\n%s", dump)
	}
	conf := fourLW(t, addr, "conf")
	if !strings.Contains(conf, "clientPort="+strconv.Itoa(portOf(addr))+"\nsecureClientPort=-1\n") || !strings.Contains(conf, "tickTime=200\n") {
		t.Errorf("conf:\n%s", conf)
	}
	if envi := fourLW(t, addr, "envi"); !strings.HasPrefix(envi, "Environment:\nzookeeper.version=") {
		t.Errorf("envi:\n%s", envi)
	}
	if dirs := fourLW(t, addr, "dirs"); !regexp.MustCompile(`^datadir_size: \d+\nlogdir_size: \d+\n$`).MatchString(dirs) {
		t.Errorf("dirs = %q", dirs)
	}
	if got := fourLW(t, addr, "gtmk"); got != "306" {
		t.Errorf("gtmk = %q", got)
	}
	if got := fourLW(t, addr, "crst"); got != "Connection stats reset.\n" {
		t.Errorf("crst = %q", got)
	}
	if cons := fourLW(t, addr, "cons"); !strings.Contains(cons, ",lop=NA,") || !strings.Contains(cons, "lzxid=0xffffffffffffffff") {
		t.Errorf("cons after crst:\n%s", cons)
	}
	if got := fourLW(t, addr, "srst"); got != "Server stats reset.\n" {
		t.Errorf("srst = %q", got)
	}
	if m := parseSrvr(t, fourLW(t, addr, "srvr")); m["Latency min/avg/max"] != "0/0.0/0" || m["Received"] != "1" {
		t.Errorf("srvr after srst: %v", m)
	}
	// Counters follow deletes and the ephemerals' session closing.
	if err := c.Delete("/app/e0000000000", -1); err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, e, _ := s.cell.treeCounts()
		if e == 0 && n == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts %d nodes, %d ephemerals; want 6 and 0", n, e)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFourLetterWordBadInput: a word off the whitelist is refused with
// ZooKeeper's sentence; an unknown word is a frame length too large, and
// the connection is closed with no reply; the server goes on.
func TestFourLetterWordBadInput(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.FourLetterWords = nil })
	addr := s.Addr().String()
	if got := fourLW(t, addr, "mntr"); got != "mntr is not executed because it is not in the whitelist.\n" {
		t.Errorf("mntr = %q", got)
	}
	if got := fourLW(t, addr, "abcd"); got != "" {
		t.Errorf("abcd = %q", got)
	}
	if got := fourLW(t, addr, "\x00\x00\x00\x02xx"); got != "" {
		t.Errorf("short garbage = %q", got)
	}
	if m := parseSrvr(t, fourLW(t, addr, "srvr")); m["Mode"] != "standalone" {
		t.Errorf("srvr after garbage: %v", m)
	}
	c := connectZK(t, addr)
	if _, err := c.Create("/ok", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) (int, string, string) {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestAdminServer(t *testing.T) {
	s := startStandalone(t, func(c *Config) {
		c.Admin = AdminConfig{Enabled: true, Addr: "127.0.0.1:0"}
	})
	c := connectZK(t, s.Addr().String())
	if _, _, _, err := c.GetW("/zookeeper"); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.AdminAddr().String() + "/commands"
	code, _, body := httpGet(t, base)
	if code != 200 || !strings.Contains(body, `<a href="/commands/monitor">monitor</a>`) {
		t.Errorf("list: %d %s", code, body)
	}
	code, ctype, body := httpGet(t, base+"/ruok")
	if code != 200 || ctype != "application/json" || body != "{\n  \"command\" : \"ruok\",\n  \"error\" : null\n}\n" {
		t.Errorf("ruok: %d %s %q", code, ctype, body)
	}
	_, _, body = httpGet(t, base+"/mntr")
	for _, want := range []string{"\"server_state\" : \"standalone\",\n", "\"znode_count\" : 6,\n", "\"avg_latency\" : ",
		"\"command\" : \"monitor\",\n  \"error\" : null\n}"} {
		if !strings.Contains(body, want) {
			t.Errorf("monitor lacks %q:\n%s", want, body)
		}
	}
	_, _, body = httpGet(t, base+"/connections")
	if !strings.Contains(body, "\"connections\" : [ {\n    \"remote_socket_address\" : \"127.0.0.1:") ||
		!strings.Contains(body, "\"secure_connections\" : [ ],\n") || !strings.Contains(body, "\"last_operation\" : \"") {
		t.Errorf("connections:\n%s", body)
	}
	_, _, body = httpGet(t, base+"/watches_by_path")
	if !regexp.MustCompile(`"path_to_session_ids" : \{\n    "/zookeeper" : \[ \d+ \]\n  \},`).MatchString(body) {
		t.Errorf("watches_by_path:\n%s", body)
	}
	_, _, body = httpGet(t, base+"/srvr")
	if !strings.Contains(body, "\"command\" : \"server_stats\"") || !strings.Contains(body, "\"node_count\" : 6,") {
		t.Errorf("server_stats:\n%s", body)
	}
	_, _, body = httpGet(t, base+"/nope")
	if !strings.Contains(body, "\"error\" : \"Unknown command: nope\"") {
		t.Errorf("unknown:\n%s", body)
	}
}
