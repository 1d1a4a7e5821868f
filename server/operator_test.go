package server

import (
	"strings"
	"testing"

	"github.com/zkraft/zkraft/operator"
)

// wordText is a four-letter word's answer, as a serving member gives it.
func wordText(s *Server, w string) string {
	cmd, ok := s.ops.commands.ByWord(w)
	if !ok {
		panic("no four-letter word " + w)
	}
	return cmd.Text(s.view(), make([]byte, cmd.Arg))
}

// TestMemberCommands: the member's registry holds ZooKeeper's commands
// and its own (the fleet's cells for the super user, ZooKeeper 3.9's
// shed_connections and snapshot behind an AuthRequest).
func TestMemberCommands(t *testing.T) {
	s := startStandalone(t, nil)
	var super, authed []string
	for _, c := range s.ops.commands.Commands() {
		switch c.Auth {
		case operator.AuthSuper:
			super = append(super, c.Name)
		case operator.AuthAllOnRoot:
			authed = append(authed, c.Name)
		}
	}
	// zkraft's own commands on the fleet's cells need the super user and
	// no serving default cell (they go to the system shard).
	if got, want := strings.Join(super, " "), "cell_abort cell_create cell_delete cell_limits cell_move cell_purge cell_release cell_show cells member_leave member_promote member_remove"; got != want {
		t.Errorf("AdminServer commands that need the super user: %s, want %s", got, want)
	}
	if got, want := strings.Join(authed, " "), "shed_connections snapshot"; got != want {
		t.Errorf("AdminServer commands that need ALL on /: %s, want %s", got, want)
	}
}

// TestCommandsWithoutLeader: without a serving member, a command that
// needs one answers ZooKeeper's sentence, as a word and through the
// AdminServer, and one that does not still runs.
func TestCommandsWithoutLeader(t *testing.T) {
	s := startStandalone(t, func(c *Config) { c.Admin = AdminConfig{Enabled: true, Addr: "127.0.0.1:0"} })
	id := s.cell.leaderID.Swap(0)
	defer s.cell.leaderID.Store(id)
	addr := s.Addr().String()
	for _, c := range s.ops.commands.Commands() {
		if c.Word != "" && c.Arg == 0 {
			got := fourLW(t, addr, c.Word)
			if c.NeedsServing(true) != (got == notServing) {
				t.Errorf("%s without a leader: %q", c.Word, got)
			}
		}
		_, _, body := httpGet(t, "http://"+s.AdminAddr().String()+"/commands/"+c.Name)
		if refused := strings.Contains(body, `"error" : "This ZooKeeper instance is not currently serving requests"`); refused != c.NeedsServing(false) {
			t.Errorf("%s without a leader:\n%s", c.Name, body)
		}
	}
}
