package server

import (
	"sort"
	"strings"
	"testing"
)

// wordText is a four-letter word's answer, as a serving member gives it.
func wordText(s *Server, w string) string {
	cmd, ok := commandByWord(w)
	if !ok {
		panic("no four-letter word " + w)
	}
	return cmd.text(s.view(), make([]byte, cmd.arg))
}

// TestCommandRegistry: every name a command answers to is unique, the
// words are ZooKeeper 3.8's, each word has a text answer and each command a
// JSON one, the AdminServer lists them sorted, and the commands that run
// without a serving member are ZooKeeper's (and envi, as zkraft has had it).
func TestCommandRegistry(t *testing.T) {
	names := map[string]string{}
	var words, primary, anyState, wordsAnyState, authed []string
	for _, c := range commands {
		for _, n := range append([]string{c.name, c.word}, c.aliases...) {
			if n == "" {
				continue
			}
			if prev, dup := names[n]; dup && prev != c.name {
				t.Errorf("%q names both %s and %s", n, prev, c.name)
			}
			names[n] = c.name
		}
		if n := btoi(c.json != nil) + btoi(c.get != nil) + btoi(c.post != nil); n != 1 {
			t.Errorf("%s has %d AdminServer answers (json, get, post), want one", c.name, n)
		}
		if c.word != "" {
			words = append(words, c.word)
			if len(c.word) != 4 || c.text == nil {
				t.Errorf("word %q: %d letters, text %v", c.word, len(c.word), c.text != nil)
			}
			if !c.needsServing(true) {
				wordsAnyState = append(wordsAnyState, c.word)
			}
		} else if c.text != nil || c.arg != 0 || c.wordServing {
			t.Errorf("%s has no word but word settings", c.name)
		}
		primary = append(primary, c.name)
		if c.super {
			authed = append(authed, c.name)
		} else if !c.needsServing(false) {
			anyState = append(anyState, c.name)
		}
	}
	if !sort.StringsAreSorted(primary) {
		t.Errorf("the AdminServer list is not sorted: %v", primary)
	}
	sort.Strings(words)
	if got, want := strings.Join(words, " "), "conf cons crst dirs dump envi gtmk hash isro mntr ruok srst srvr stat stmk wchc wchp wchs"; got != want {
		t.Errorf("words = %s, want %s", got, want)
	}
	if got, want := strings.Join(anyState, " "), "environment get_trace_mask is_read_only ruok set_trace_mask system_properties"; got != want {
		t.Errorf("AdminServer commands that need no serving member: %s, want %s", got, want)
	}
	// zkraft's own commands on the fleet's cells need the super user and
	// no serving default cell (they go to the system shard).
	if got, want := strings.Join(authed, " "), "cell_create cell_delete cell_limits cell_move cell_purge cell_release cell_show cells"; got != want {
		t.Errorf("AdminServer commands that need the super user: %s, want %s", got, want)
	}
	sort.Strings(wordsAnyState)
	if got, want := strings.Join(wordsAnyState, " "), "gtmk isro ruok stmk"; got != want {
		t.Errorf("words that need no serving member: %s, want %s", got, want)
	}
	for _, n := range []string{"conf", "config", "configuration", "mntr", "sysp", "env", "envi"} {
		if _, ok := commandByName(n); !ok {
			t.Errorf("AdminServer name %q unknown", n)
		}
	}
	for _, n := range []string{"", "abcd", "sysp"} {
		if _, ok := commandByWord(n); ok {
			t.Errorf("%q is a four-letter word", n)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCommandsWithoutLeader: without a serving member, a command that
// needs one answers ZooKeeper's sentence, as a word and through the
// AdminServer, and one that does not still runs.
func TestCommandsWithoutLeader(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.Admin = AdminConfig{Enabled: true, Addr: "127.0.0.1:0"} })
	id := s.cell.leaderID.Swap(0)
	defer s.cell.leaderID.Store(id)
	addr := s.Addr().String()
	for _, c := range commands {
		if c.word != "" && c.arg == 0 {
			got := fourLW(t, addr, c.word)
			if c.needsServing(true) != (got == notServing) {
				t.Errorf("%s without a leader: %q", c.word, got)
			}
		}
		_, _, body := httpGet(t, "http://"+s.AdminAddr().String()+"/commands/"+c.name)
		if refused := strings.Contains(body, `"error" : "This ZooKeeper instance is not currently serving requests"`); refused != c.needsServing(false) {
			t.Errorf("%s without a leader:\n%s", c.name, body)
		}
	}
}
