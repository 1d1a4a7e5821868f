package server

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The operator commands: ZooKeeper's four-letter words and its AdminServer
// commands, one registry for both. ZooKeeper keeps them apart (the words in
// server/command, the AdminServer's in admin/Commands.java, each with its
// names and a "needs a running server" flag); ClickHouse Keeper keeps one
// factory of words with a whitelist. Here each command is one entry: its
// AdminServer names, its word (the name 4lw.commands.whitelist lists), what
// it answers as text to the word and as JSON to the AdminServer, and
// whether it needs a serving member. fourlw.go and admin.go are transports
// over this table.

// cellView is the member as an operator command sees it: the member, and
// the cell the command answers for (the cell of the client port a
// four-letter word came in on; for the AdminServer the cell its ?cell=
// names, the default cell without one). Its cell field hides the
// Server's, so a command's s.cell is the cell it answers for.
type cellView struct {
	*Server
	cell *cell
}

// cellMode is the cell's replica's role here, srvr's Mode: the default
// cell's as the ensemble's; another cell's as its placement has it (a cell
// of one voter is standalone).
func (s *cellView) cellMode() string {
	if s.cell == s.Server.cell {
		return s.mode()
	}
	spec, _, _, ok := s.fleet.hostedState(s.cell.name)
	switch {
	case ok && slices.Contains(spec.Placement.Observers, s.cfg.ReplicaID):
		return "observer"
	case ok && len(spec.Placement.Voters) == 1 && len(spec.Placement.Observers) == 0:
		return "standalone"
	case s.cell.leader.Load():
		return "leader"
	}
	return "follower"
}

// cellAddr is the address of the cell's client listener here.
func (s *cellView) cellAddr() net.Addr {
	if s.cell != s.Server.cell {
		if _, addr, _, _ := s.fleet.hostedState(s.cell.name); addr != nil {
			return addr
		}
	}
	return s.ln.Addr()
}

// view is the member as it answers for its default cell.
func (s *Server) view() *cellView { return &cellView{Server: s, cell: s.cell} }

// command is one operator command.
type command struct {
	name    string   // the AdminServer's primary name, listed at its command URL
	aliases []string // other AdminServer names, besides the word
	// word is the four-letter word ("" for an AdminServer command only);
	// it is also an AdminServer name.
	word string
	// serving: without a serving member (a known leader) the command
	// answers notServing instead of running, as ZooKeeper's
	// CommandBase.serverRequired.
	serving bool
	// wordServing: the word needs a serving member though the AdminServer
	// command does not. Only envi: zkraft has answered it so, while
	// ZooKeeper's EnvCommand answers regardless.
	wordServing bool
	// arg is how many bytes the word takes after it (stmk's mask).
	arg int
	// text is the word's answer, given its argument bytes.
	text func(s *cellView, arg []byte) string
	// json is the AdminServer's answer, given the request's query: the
	// fields, and an error sentence ("" for none).
	json func(s *cellView, query url.Values) (jobj, string)
	// get and post, instead of json, answer the AdminServer with more
	// than fields: a status code, headers, a streamed body (ZooKeeper
	// 3.9's snapshot), a request body (shed_connections). A command with
	// post answers POST requests only, the others GET only.
	get, post func(s *Server, r *http.Request) adminReply
	// auth: the AdminServer runs the command only for a request whose
	// Authorization header authenticates ids holding ALL on "/"
	// (ZooKeeper 3.9's AuthRequest(Perms.ALL, "/"); adminauth.go).
	// super: only for the super user's (the fleet's cells, cellcmds.go).
	super bool
	auth  bool
}

// commands are the registry, in the order the AdminServer lists them
// (ZooKeeper 3.8's names, sorted).
var commands = []command{
	// The cells of the fleet (cellcmds.go): zkraft's own, for the super user.
	// Those that change the map answer POST (form or query), the others GET.
	{name: "cell_create", super: true, post: cellPost(cellCreateJSON)},
	{name: "cell_delete", super: true, post: cellPost(cellDeleteJSON)},
	{name: "cell_limits", super: true, post: cellPost(cellLimitsJSON)},
	{name: "cell_move", super: true, post: cellPost(cellMoveJSON)},
	{name: "cell_purge", super: true, post: cellPost(cellPurgeJSON)},
	{name: "cell_release", super: true, post: cellPost(cellReleaseJSON)},
	{name: "cell_show", super: true, json: cellShowJSON},
	{name: "cells", super: true, json: cellsJSON},
	{name: "configuration", aliases: []string{"config"}, word: "conf", serving: true, text: confText, json: configurationJSON},
	{name: "connection_stat_reset", word: "crst", serving: true,
		text: thenSay((*cellView).resetConnStats, "Connection stats reset.\n"), json: thenEmpty((*cellView).resetConnStats)},
	{name: "connections", word: "cons", serving: true, text: consText, json: connectionsJSON},
	{name: "dirs", word: "dirs", serving: true, text: dirsText, json: dirsJSON},
	{name: "dump", word: "dump", serving: true, text: dumpText, json: dumpJSON},
	{name: "environment", aliases: []string{"env"}, word: "envi", wordServing: true, text: enviText, json: environmentJSON},
	{name: "get_trace_mask", word: "gtmk", text: gtmkText, json: getTraceMaskJSON},
	// zkraft keeps no ZooKeeper digest log (the digest is a
	// ZooKeeper-internal check between its own replicas).
	{name: "hash", word: "hash", serving: true, text: func(*cellView, []byte) string { return "" },
		json: func(*cellView, url.Values) (jobj, string) { return jobj{{"digests", []any{}}}, "" }},
	{name: "initial_configuration", aliases: []string{"icfg"}, serving: true, json: initialConfigurationJSON},
	{name: "is_read_only", word: "isro", text: func(*cellView, []byte) string { return "rw" },
		json: func(*cellView, url.Values) (jobj, string) { return jobj{{"read_only", false}}, "" }},
	{name: "last_snapshot", aliases: []string{"lsnp"}, serving: true, json: func(*cellView, url.Values) (jobj, string) {
		return jobj{}, "zkraft keeps Raft snapshots, not ZooKeeper snapshot files"
	}},
	{name: "leader", aliases: []string{"lead"}, serving: true, json: leaderJSON},
	{name: "monitor", word: "mntr", serving: true, text: mntrText, json: monitorJSON},
	// zkraft has no observer connections of ZooKeeper's kind to reset.
	{name: "observer_connection_stat_reset", aliases: []string{"orst"}, serving: true, json: emptyJSON},
	{name: "observers", aliases: []string{"obsr"}, serving: true, json: observersJSON},
	{name: "ruok", word: "ruok", text: func(*cellView, []byte) string { return "imok" }, json: emptyJSON},
	{name: "server_stats", word: "srvr", serving: true, text: srvrText, json: serverStatsJSON},
	{name: "set_trace_mask", word: "stmk", arg: 8, text: stmkText, json: setTraceMaskJSON},
	// ZooKeeper 3.9's AdminServer (shed_connections is on its main branch, ZOOKEEPER-5015).
	{name: "shed_connections", aliases: []string{"shed"}, serving: true, auth: true, post: shedConnectionsPost}, // shed.go
	{name: "snapshot", aliases: []string{"snap"}, serving: true, auth: true, get: snapshotGet},                  // snapshotstream.go
	{name: "stat_reset", word: "srst", serving: true,
		text: thenSay((*cellView).resetServerStats, "Server stats reset.\n"), json: thenEmpty((*cellView).resetServerStats)},
	{name: "stats", word: "stat", serving: true, text: statText, json: statsJSON},
	{name: "system_properties", aliases: []string{"sysp"}, json: environmentJSON},
	{name: "voting_view", serving: true, json: votingViewJSON},
	{name: "watch_summary", word: "wchs", serving: true, text: wchsText, json: watchSummaryJSON},
	{name: "watches", word: "wchc", serving: true, text: wchcText, json: watchesJSON},
	{name: "watches_by_path", word: "wchp", serving: true, text: wchpText, json: watchesByPathJSON},
	{name: "zabstate", serving: true, json: zabstateJSON},
}

// commandByWord finds the command of a four-letter word.
func commandByWord(w string) (*command, bool) {
	for i := range commands {
		if c := &commands[i]; c.word != "" && c.word == w {
			return c, true
		}
	}
	return nil, false
}

// commandByName finds an AdminServer command by its name, an alias or its
// word.
func commandByName(name string) (*command, bool) {
	for i := range commands {
		c := &commands[i]
		if c.name == name || c.word == name && name != "" {
			return c, true
		}
		for _, a := range c.aliases {
			if a == name {
				return c, true
			}
		}
	}
	return nil, false
}

// needsServing says whether the command, run as its word (or through the
// AdminServer), needs a serving member.
func (c *command) needsServing(asWord bool) bool {
	return c.serving || asWord && c.wordServing
}

func emptyJSON(*cellView, url.Values) (jobj, string) { return jobj{}, "" }

// thenSay is the word of a command that does fn and says so.
func thenSay(fn func(*cellView), said string) func(*cellView, []byte) string {
	return func(s *cellView, _ []byte) string {
		fn(s)
		return said
	}
}

// thenEmpty is the AdminServer command that does fn and answers no fields.
func thenEmpty(fn func(*cellView)) func(*cellView, url.Values) (jobj, string) {
	return func(s *cellView, q url.Values) (jobj, string) {
		fn(s)
		return emptyJSON(s, q)
	}
}

// pairsJSON is a list of key and value pairs as one JSON object.
func pairsJSON(pairs []kv) jobj {
	out := make(jobj, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, kv{p.k, p.v})
	}
	return out
}

// confPairsText is conf's and initial_configuration's key=value lines.
func confPairsText(s *cellView) string {
	var b strings.Builder
	for _, p := range s.confPairs() {
		fmt.Fprintf(&b, "%s=%v\n", p.k, p.v)
	}
	return b.String()
}

func confText(s *cellView, _ []byte) string {
	out := confPairsText(s)
	if !s.standalone() {
		out += "membership: \n" + renderConfig(s.cfg.Members) + "\nversion=0\n"
	}
	return out
}

func configurationJSON(s *cellView, _ url.Values) (jobj, string) {
	out := jobj{
		{"client_port", portOf(s.cellAddr().String())},
		{"data_dir", s.cfg.DataDir},
		{"data_log_dir", s.confDataLogDir()},
		{"tick_time", s.cfg.TickTime.Milliseconds()},
		{"max_client_cnxns", s.cfg.MaxClientCnxns},
		{"min_session_timeout", s.cfg.MinSessionTimeout.Milliseconds()},
		{"max_session_timeout", s.cfg.MaxSessionTimeout.Milliseconds()},
		{"server_id", s.confServerID()},
		{"client_port_listen_backlog", -1},
	}
	if s.ops.secureLn != nil {
		out = append(out, kv{"secure_client_port", portOf(s.ops.secureLn.Addr().String())})
	}
	return out, ""
}

func initialConfigurationJSON(s *cellView, _ url.Values) (jobj, string) {
	return jobj{{"initial_configuration", confPairsText(s)}}, ""
}

// resetConnStats is crst and connection_stat_reset.
func (s *cellView) resetConnStats() {
	for _, c := range s.conns() {
		c.st.reset()
	}
}

func consText(s *cellView, _ []byte) string {
	var b strings.Builder
	for _, ci := range s.connInfos() {
		b.WriteString(ci.line(true))
	}
	b.WriteString("\n")
	return b.String()
}

func connectionsJSON(s *cellView, _ url.Values) (jobj, string) {
	return jobj{{"connections", s.adminConns(true, false)}, {"secure_connections", s.adminConns(true, true)}}, ""
}

func dirsText(s *cellView, _ []byte) string {
	d, l := s.dirSizes()
	return fmt.Sprintf("datadir_size: %d\nlogdir_size: %d\n", d, l)
}

func dirsJSON(s *cellView, _ url.Values) (jobj, string) {
	d, l := s.dirSizes()
	return jobj{{"datadir_size", d}, {"logdir_size", l}}, ""
}

func dumpText(s *cellView, _ []byte) string {
	var b strings.Builder
	s.writeDump(&b)
	return b.String()
}

// dumpJSON is dump's JSON: the sessions by expiry (ms since the member
// started) and the ephemerals by session.
func dumpJSON(s *cellView, _ url.Values) (jobj, string) {
	buckets, _ := s.cell.tracker.Deadlines()
	keys := make([]int64, 0, len(buckets))
	byKey := map[int64][]int64{}
	for t, ids := range buckets {
		k := t.Sub(s.started).Milliseconds()
		keys = append(keys, k)
		byKey[k] = ids
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	exp := jobj{}
	for _, k := range keys {
		exp = append(exp, kv{strconv.FormatInt(k, 10), int64List(byKey[k])})
	}
	owners, paths := s.ephemeralsByOwner()
	eph := jobj{}
	for i, o := range owners {
		eph = append(eph, kv{strconv.FormatInt(o, 10), stringList(paths[i])})
	}
	return jobj{{"expiry_time_to_session_ids", exp}, {"session_id_to_ephemeral_paths", eph}}, ""
}

func enviText(*cellView, []byte) string {
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, p := range environment() {
		fmt.Fprintf(&b, "%s=%s\n", p.k, p.v)
	}
	return b.String()
}

func environmentJSON(*cellView, url.Values) (jobj, string) { return pairsJSON(environment()), "" }

func gtmkText(s *cellView, _ []byte) string { return strconv.FormatInt(s.ops.traceMask.Load(), 10) }

func getTraceMaskJSON(s *cellView, _ url.Values) (jobj, string) {
	return jobj{{"tracemask", s.ops.traceMask.Load()}}, ""
}

// stmkText sets the trace mask to the word's 8-byte big-endian argument.
func stmkText(s *cellView, arg []byte) string {
	s.ops.traceMask.Store(int64(binary.BigEndian.Uint64(arg)))
	return gtmkText(s, nil)
}

func setTraceMaskJSON(s *cellView, query url.Values) (jobj, string) {
	v, err := strconv.ParseInt(query.Get("traceMask"), 10, 64)
	if err != nil {
		return jobj{}, "Invalid or missing parameter traceMask"
	}
	s.ops.traceMask.Store(v)
	return jobj{{"tracemask", v}}, ""
}

func leaderJSON(s *cellView, _ url.Values) (jobj, string) {
	if s.standalone() {
		return jobj{}, "server is not initialized"
	}
	id := s.cell.leaderID.Load()
	ip := ""
	for _, m := range s.cfg.Members {
		if m.ID == id {
			ip, _ = splitHostPort(m.RaftAddr)
		}
	}
	return jobj{{"is_leader", s.cell.leader.Load()}, {"leader_id", id}, {"leader_ip", ip}}, ""
}

func mntrText(s *cellView, _ []byte) string {
	var b strings.Builder
	for _, p := range s.monitor() {
		fmt.Fprintf(&b, "zk_%s\t%s\n", p.k, p.text())
	}
	return b.String()
}

func monitorJSON(s *cellView, _ url.Values) (jobj, string) { return pairsJSON(s.monitor()), "" }

func observersJSON(s *cellView, _ url.Values) (jobj, string) {
	f := s.figures()
	return jobj{{"synced_observers", f.syncedNonVot}, {"observers", []any{}}}, ""
}

func srvrText(s *cellView, _ []byte) string {
	var b strings.Builder
	s.writeSrvr(&b, false)
	return b.String()
}

func statText(s *cellView, _ []byte) string {
	var b strings.Builder
	s.writeSrvr(&b, true)
	return b.String()
}

func serverStatsJSON(s *cellView, _ url.Values) (jobj, string) { return s.serverStatsJSON(false), "" }

func statsJSON(s *cellView, _ url.Values) (jobj, string) { return s.serverStatsJSON(true), "" }

func votingViewJSON(s *cellView, _ url.Values) (jobj, string) {
	cfg := jobj{}
	if !s.standalone() {
		for _, line := range strings.Split(renderConfig(s.cfg.Members), "\n") {
			k, v, _ := strings.Cut(line, "=")
			cfg = append(cfg, kv{strings.TrimPrefix(k, "server."), v})
		}
	}
	return jobj{{"current_config", cfg}}, ""
}

func wchsText(s *cellView, _ []byte) string {
	watches, paths, conns := s.cell.watches.count()
	return fmt.Sprintf("%d connections watching %d paths\nTotal watches:%d\n", conns, paths, watches)
}

func watchSummaryJSON(s *cellView, _ url.Values) (jobj, string) {
	watches, paths, conns := s.cell.watches.count()
	return jobj{{"num_connections", conns}, {"num_paths", paths}, {"num_total_watches", watches}}, ""
}

func wchcText(s *cellView, _ []byte) string {
	var b strings.Builder
	for _, e := range s.cell.watches.bySession() {
		fmt.Fprintf(&b, "%s\n", hexID(e.id))
		for _, p := range e.paths {
			fmt.Fprintf(&b, "\t%s\n", p)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func watchesJSON(s *cellView, _ url.Values) (jobj, string) {
	out := jobj{}
	for _, e := range s.cell.watches.bySession() {
		out = append(out, kv{strconv.FormatInt(e.id, 10), stringList(e.paths)})
	}
	return jobj{{"session_id_to_watched_paths", out}}, ""
}

func wchpText(s *cellView, _ []byte) string {
	var b strings.Builder
	for _, e := range s.cell.watches.byPath() {
		fmt.Fprintf(&b, "%s\n", e.path)
		for _, id := range e.ids {
			fmt.Fprintf(&b, "\t%s\n", hexID(id))
		}
	}
	b.WriteString("\n")
	return b.String()
}

func watchesByPathJSON(s *cellView, _ url.Values) (jobj, string) {
	out := jobj{}
	for _, e := range s.cell.watches.byPath() {
		out = append(out, kv{e.path, int64List(e.ids)})
	}
	return jobj{{"path_to_session_ids", out}}, ""
}

func zabstateJSON(s *cellView, _ url.Values) (jobj, string) {
	if s.standalone() {
		return jobj{{"voting", false}, {"zabstate", ""}}, ""
	}
	return jobj{{"voting", !s.self().Observer}, {"zabstate", "BROADCAST"}}, ""
}
