package operator

import (
	"sort"
	"strings"
	"testing"
)

// TestCommandRegistry: every name a command answers to is unique, the
// words are ZooKeeper 3.8's, each word has a text answer and each command a
// JSON one, the AdminServer lists them sorted, the commands that run
// without a serving member are ZooKeeper's (and envi, as zkraft has had it),
// and an implementer's own commands join them in order.
func TestCommandRegistry(t *testing.T) {
	own := Command{Name: "cells", Auth: AuthSuper, JSON: emptyJSON}
	reg := NewRegistry(own)
	names := map[string]string{}
	var words, primary, anyState, wordsAnyState, authed []string
	for _, c := range reg.Commands() {
		for _, n := range append([]string{c.Name, c.Word}, c.Aliases...) {
			if n == "" {
				continue
			}
			if prev, dup := names[n]; dup && prev != c.Name {
				t.Errorf("%q names both %s and %s", n, prev, c.Name)
			}
			names[n] = c.Name
		}
		if n := btoi(c.JSON != nil) + btoi(c.Get != nil) + btoi(c.Post != nil); n != 1 {
			t.Errorf("%s has %d AdminServer answers (json, get, post), want one", c.Name, n)
		}
		if c.Word != "" {
			words = append(words, c.Word)
			if len(c.Word) != 4 || c.Text == nil {
				t.Errorf("word %q: %d letters, text %v", c.Word, len(c.Word), c.Text != nil)
			}
			if !c.NeedsServing(true) {
				wordsAnyState = append(wordsAnyState, c.Word)
			}
		} else if c.Text != nil || c.Arg != 0 || c.WordServing {
			t.Errorf("%s has no word but word settings", c.Name)
		}
		primary = append(primary, c.Name)
		if c.Auth == AuthSuper {
			authed = append(authed, c.Name)
		} else if !c.NeedsServing(false) {
			anyState = append(anyState, c.Name)
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
	if got, want := strings.Join(authed, " "), "cells"; got != want {
		t.Errorf("AdminServer commands that need the super user: %s, want %s", got, want)
	}
	sort.Strings(wordsAnyState)
	if got, want := strings.Join(wordsAnyState, " "), "gtmk isro ruok stmk"; got != want {
		t.Errorf("words that need no serving member: %s, want %s", got, want)
	}
	for _, n := range []string{"conf", "config", "configuration", "mntr", "sysp", "env", "envi"} {
		if _, ok := reg.ByName(n); !ok {
			t.Errorf("AdminServer name %q unknown", n)
		}
	}
	for _, n := range []string{"", "abcd", "sysp"} {
		if _, ok := reg.ByWord(n); ok {
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

// TestRegistryRefusesDuplicates: an implementer's command cannot take a
// name ZooKeeper's already answer to, nor a word of other than four
// letters.
func TestRegistryRefusesDuplicates(t *testing.T) {
	for _, c := range []Command{
		{Name: "mntr", JSON: emptyJSON},
		{Name: "x", Aliases: []string{"conf"}, JSON: emptyJSON},
		{Name: "y", Word: "ruok", Text: func(Member, []byte) string { return "" }, JSON: emptyJSON},
		{Name: "z", Word: "longer", JSON: emptyJSON, Text: func(Member, []byte) string { return "" }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewRegistry took %+v", c)
				}
			}()
			NewRegistry(c)
		}()
	}
}
