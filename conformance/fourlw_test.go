package conformance

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Four-letter words over a raw socket, sent the ways operators send them:
// the bare word (zookeeper-facts.md §6), the word and a newline
// (`echo ruok | nc host 2181`, most runbooks and container probes), the word
// and CRLF (telnet), and each of those with the client half-closing its side
// after the word (`nc -N`, a probe that shuts down its output). Every one
// must get the word's full answer and then a normal end of stream: a FIN,
// never a reset, which can make a client lose an answer it has not read yet.

// fourLetterWords are ZooKeeper 3.8's words, all enabled for the suite
// (4lw.commands.whitelist=*).
var fourLetterWords = []string{
	"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok", "stmk",
	"srvr", "srst", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash",
}

// srvrTail is the part of srvr and stat after the version (and clients).
const srvrTail = `Latency min/avg/max: \d+/[\d.]+/\d+\nReceived: \d+\nSent: \d+\n` +
	`Connections: \d+\nOutstanding: \d+\nZxid: 0x[0-9a-f]+\nMode: [a-z-]+\n` +
	`(?:[^\n]+\n)*Node count: \d+\n(?:[^\n]+\n)*`

// fourLetterShapes is each word's whole answer on a standalone server, as
// ZooKeeper 3.8 prints it (the captures in zk-4lw-samples.txt). Each one is
// anchored at both ends so that a cut answer does not match.
var fourLetterShapes = map[string]*regexp.Regexp{
	// An ensemble member's (ZooKeeper's in quorum mode, and a zkraft cell's
	// on a fleet) has a "membership: " line before its server.N lines.
	"conf": regexp.MustCompile(`^(?:(?:[A-Za-z0-9_.]+=[^\n]*|membership: )\n)+$`),
	"cons": regexp.MustCompile(`^(?: /[^\n]+\n)+\n$`),
	"crst": regexp.MustCompile(`^Connection stats reset\.\n$`),
	"dirs": regexp.MustCompile(`^datadir_size: \d+\nlogdir_size: \d+\n$`),
	"dump": regexp.MustCompile(`(?s)^SessionTracker dump:\n.*ephemeral nodes dump:\n.*` +
		`Connections dump:\n.*\tip: /[^\n]+ sessionId: 0x[0-9a-f]+\n$`),
	"envi": regexp.MustCompile(`^Environment:\n(?:[A-Za-z0-9_.]+=[^\n]*\n)+$`),
	"gtmk": regexp.MustCompile(`^\d+$`),
	"ruok": regexp.MustCompile(`^imok$`),
	"stmk": regexp.MustCompile(`^\d+$`),
	"srvr": regexp.MustCompile(`^Zookeeper version: [^\n]+\n` + srvrTail + `$`),
	"srst": regexp.MustCompile(`^Server stats reset\.\n$`),
	"stat": regexp.MustCompile(`^Zookeeper version: [^\n]+\nClients:\n(?: /[^\n]+\n)+\n` + srvrTail + `$`),
	"wchc": regexp.MustCompile(`^(?:0x[0-9a-f]+\n(?:\t/[^\n]*\n)+)*\n$`),
	"wchp": regexp.MustCompile(`^(?:/[^\n]*\n(?:\t0x[0-9a-f]+\n)+)*\n$`),
	"wchs": regexp.MustCompile(`^\d+ connections watching \d+ paths\nTotal watches:\d+\n$`),
	"mntr": regexp.MustCompile(`^(?:zk_[A-Za-z0-9_.-]+\t[^\n]*\n)+$`),
	"isro": regexp.MustCompile(`^rw$`),
	"hash": regexp.MustCompile(`^(?:\d+: \d+\n)*$`),
}

// fourLetterVariant is one way of sending a word.
type fourLetterVariant struct {
	name      string
	suffix    string // sent right after the word (and stmk's mask)
	halfClose bool   // the client shuts down its output after sending
}

var fourLetterVariants = []fourLetterVariant{
	{"bare", "", false},
	{"newline", "\n", false},
	{"crlf", "\r\n", false},
	{"bare+halfclose", "", true},
	{"newline+halfclose", "\n", true},
	{"crlf+halfclose", "\r\n", true},
}

// fourLetterExchange sends word (and, for stmk, its 8-byte mask) and suffix
// in one write, half-closes if asked, and reads until the server ends the
// stream. It returns what was read and how the stream ended: nil for a
// normal end (EOF), otherwise the read error (a reset, or a timeout when the
// server keeps the connection open).
func fourLetterExchange(t *testing.T, word string, mask int64, v fourLetterVariant) (string, error) {
	t.Helper()
	c := dialRaw(t)
	msg := []byte(word)
	if word == "stmk" {
		msg = binary.BigEndian.AppendUint64(msg, uint64(mask))
	}
	msg = append(msg, v.suffix...)
	if err := c.writeRaw(msg); err != nil {
		t.Fatalf("%s %s: write: %v", word, v.name, err)
	}
	if v.halfClose {
		if err := c.nc.(*net.TCPConn).CloseWrite(); err != nil {
			// The server was quicker: it has answered and closed already
			// (ZooKeeper sends its FIN, then a reset for the unread
			// suffix). What it sent is still read below, and how the
			// stream ends is still checked.
			t.Logf("%s %s: half-close: %v", word, v.name, err)
		}
	}
	c.nc.SetReadDeadline(time.Now().Add(rawIOTimeout))
	out, err := io.ReadAll(c.nc)
	return string(out), err
}

// keysOf returns the keys of "key<sep>value" lines.
func keysOf(answer, sep string) map[string]bool {
	keys := map[string]bool{}
	for _, line := range strings.Split(answer, "\n") {
		if k, _, ok := strings.Cut(line, sep); ok {
			keys[k] = true
		}
	}
	return keys
}

// missingKeys lists the keys of want that got lacks.
func missingKeys(want, got map[string]bool) []string {
	var out []string
	for k := range want {
		if !got[k] {
			out = append(out, k)
		}
	}
	return out
}

func TestFourLetterWordsEndOfStream(t *testing.T) {
	// A data watch, so that wchc and wchp have a line to show.
	p := uniquePath(t)
	watcher, _ := connect(t)
	watched := p + "/watched"
	if _, _, _, err := watcher.ExistsW(watched); err != nil {
		t.Fatal(err)
	}
	sid := "0x" + strconv.FormatInt(watcher.SessionID(), 16)
	_, port, _ := net.SplitHostPort(serverAddr)

	// stmk sets the server's trace mask: set it to what it already is.
	ref, err := fourLetterExchange(t, "gtmk", 0, fourLetterVariants[0])
	if err != nil {
		t.Fatalf("gtmk: %v", err)
	}
	mask, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		t.Fatalf("gtmk answered %q", ref)
	}

	// What a full answer contains besides its shape: the lines that name
	// this test's connection, watch and server, and the keys of the first
	// (bare) answer for the key=value words.
	refKeys := map[string]map[string]bool{}
	contains := map[string][]string{
		"conf": {"clientPort=" + port + "\n"},
		"cons": {"(queued=0,recved=1,sent=0"},
		"envi": {"zookeeper.version=", "\nos.memory.total="},
		"gtmk": {ref},
		"mntr": {"zk_version\t", "\nzk_server_state\t", "\nzk_znode_count\t"},
		"stat": {"(queued=0,recved=1,sent=0"},
		"stmk": {ref},
		"wchc": {sid + "\n", "\t" + watched + "\n"},
		"wchp": {watched + "\n\t" + sid + "\n"},
	}
	for _, word := range fourLetterWords {
		for _, v := range fourLetterVariants {
			answer, err := fourLetterExchange(t, word, mask, v)
			switch {
			case err == nil:
			case errors.Is(err, syscall.ECONNRESET):
				t.Errorf("%s %s: connection reset after %d bytes %q", word, v.name, len(answer), answer)
				continue
			default:
				t.Errorf("%s %s: the stream did not end normally after %d bytes: %v", word, v.name, len(answer), err)
				continue
			}
			if !fourLetterShapes[word].MatchString(answer) {
				t.Errorf("%s %s: answer %q does not have ZooKeeper's shape", word, v.name, answer)
				continue
			}
			for _, s := range contains[word] {
				if !strings.Contains(answer, s) {
					t.Errorf("%s %s: answer %q lacks %q", word, v.name, answer, s)
				}
			}
			sep := map[string]string{"conf": "=", "envi": "=", "mntr": "\t"}[word]
			if sep == "" {
				continue
			}
			keys := keysOf(answer, sep)
			if refKeys[word] == nil {
				refKeys[word] = keys
			} else if m := missingKeys(refKeys[word], keys); len(m) > 0 {
				t.Errorf("%s %s: answer lacks keys of the bare answer: %v", word, v.name, m)
			}
		}
	}
}

// TestFourLetterWordClientReadsLate: a client that sends a word and a
// newline and reads only half a second later, the server's answer long
// sent, still gets all of it and then a normal end of the stream.
func TestFourLetterWordClientReadsLate(t *testing.T) {
	c := dialRaw(t)
	if err := c.writeRaw([]byte("srvr\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the server answers meanwhile
	c.nc.SetReadDeadline(time.Now().Add(rawIOTimeout))
	out, err := io.ReadAll(c.nc)
	if err != nil {
		t.Fatalf("srvr: read %d bytes, then %v", len(out), err)
	}
	if !fourLetterShapes["srvr"].Match(out) {
		t.Fatalf("srvr answered %q", out)
	}
}
