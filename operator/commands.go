package operator

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
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

// Command is one operator command.
type Command struct {
	Name    string   // the AdminServer's primary name, listed at its command URL
	Aliases []string // other AdminServer names, besides the word
	// Word is the four-letter word ("" for an AdminServer command only);
	// it is also an AdminServer name.
	Word string
	// Serving: without a serving member (a known leader) the command
	// answers NotServing instead of running, as ZooKeeper's
	// CommandBase.serverRequired.
	Serving bool
	// WordServing: the word needs a serving member though the AdminServer
	// command does not. Only envi: zkraft has answered it so, while
	// ZooKeeper's EnvCommand answers regardless.
	WordServing bool
	// Arg is how many bytes the word takes after it (stmk's mask).
	Arg int
	// Text is the word's answer, given its argument bytes.
	Text func(m Member, arg []byte) string
	// JSON is the AdminServer's answer, given the request's query: the
	// fields, and an error sentence ("" for none).
	JSON func(m Member, query url.Values) (Object, string)
	// Get and Post, instead of JSON, answer the AdminServer with more
	// than fields: a status code, headers, a streamed body (ZooKeeper
	// 3.9's snapshot), a request body (shed_connections). A command with
	// Post answers POST requests only, the others GET only. They are the
	// implementer's own commands, closures over the implementer.
	Get, Post func(r *http.Request) Reply
	// Auth is what the AdminServer asks of the request before it runs the
	// command (Host.Authorize).
	Auth Auth
}

// NeedsServing says whether the command, run as its word (or through the
// AdminServer), needs a serving member.
func (c *Command) NeedsServing(asWord bool) bool {
	return c.Serving || asWord && c.WordServing
}

// method is the HTTP method the command answers.
func (c *Command) method() string {
	if c.Post != nil {
		return http.MethodPost
	}
	return http.MethodGet
}

// Registry is one implementer's commands: ZooKeeper's (Standard's) and
// its own, in the order the AdminServer lists them (by name), and the
// trace mask gtmk and stmk read and set. Build it once with NewRegistry;
// it is safe for concurrent use.
type Registry struct {
	cmds      []Command
	traceMask atomic.Int64
}

// DefaultTraceMask is ZooKeeper's trace mask before any stmk.
const DefaultTraceMask = 306

// NewRegistry is ZooKeeper's commands and own, the implementer's. It
// panics if two commands answer to one name, or a word is not four
// letters: the registry is the program's, not its input's.
func NewRegistry(own ...Command) *Registry {
	r := &Registry{}
	r.traceMask.Store(DefaultTraceMask)
	r.cmds = append(r.standard(), own...)
	sort.Slice(r.cmds, func(i, j int) bool { return r.cmds[i].Name < r.cmds[j].Name })
	names := map[string]string{}
	for _, c := range r.cmds {
		if c.Word != "" && len(c.Word) != 4 {
			panic("operator: word " + strconv.Quote(c.Word) + " is not four letters")
		}
		for _, n := range append([]string{c.Name, c.Word}, c.Aliases...) {
			if prev, dup := names[n]; n != "" && dup && prev != c.Name {
				panic("operator: " + strconv.Quote(n) + " names both " + prev + " and " + c.Name)
			}
			names[n] = c.Name
		}
	}
	return r
}

// Commands are the registry's commands, by name. The slice is the
// registry's: do not change it.
func (r *Registry) Commands() []Command { return r.cmds }

// ByWord finds the command of a four-letter word.
func (r *Registry) ByWord(w string) (*Command, bool) {
	for i := range r.cmds {
		if c := &r.cmds[i]; c.Word != "" && c.Word == w {
			return c, true
		}
	}
	return nil, false
}

// ByName finds an AdminServer command by its name, an alias or its word.
func (r *Registry) ByName(name string) (*Command, bool) {
	for i := range r.cmds {
		c := &r.cmds[i]
		if c.Name == name || c.Word == name && name != "" {
			return c, true
		}
		if slices.Contains(c.Aliases, name) {
			return c, true
		}
	}
	return nil, false
}

// standard are ZooKeeper 3.8's commands (and 3.9's that need nothing of
// the implementer beyond a Member).
func (r *Registry) standard() []Command {
	gtmkText := func(Member, []byte) string { return strconv.FormatInt(r.traceMask.Load(), 10) }
	return []Command{
		{Name: "configuration", Aliases: []string{"config"}, Word: "conf", Serving: true, Text: confText, JSON: configurationJSON},
		{Name: "connection_stat_reset", Word: "crst", Serving: true,
			Text: thenSay(Member.ResetConnections, "Connection stats reset.\n"), JSON: thenEmpty(Member.ResetConnections)},
		{Name: "connections", Word: "cons", Serving: true, Text: consText, JSON: connectionsJSON},
		{Name: "dirs", Word: "dirs", Serving: true, Text: dirsText, JSON: dirsJSON},
		{Name: "dump", Word: "dump", Serving: true, Text: dumpText, JSON: dumpJSON},
		{Name: "environment", Aliases: []string{"env"}, Word: "envi", WordServing: true, Text: enviText, JSON: environmentJSON},
		{Name: "get_trace_mask", Word: "gtmk", Text: gtmkText, JSON: func(Member, url.Values) (Object, string) {
			return Object{{"tracemask", r.traceMask.Load()}}, ""
		}},
		// zkraft keeps no ZooKeeper digest log (the digest is a
		// ZooKeeper-internal check between its own replicas).
		{Name: "hash", Word: "hash", Serving: true, Text: func(Member, []byte) string { return "" },
			JSON: func(Member, url.Values) (Object, string) { return Object{{"digests", []any{}}}, "" }},
		{Name: "initial_configuration", Aliases: []string{"icfg"}, Serving: true, JSON: initialConfigurationJSON},
		{Name: "is_read_only", Word: "isro", Text: func(Member, []byte) string { return "rw" },
			JSON: func(Member, url.Values) (Object, string) { return Object{{"read_only", false}}, "" }},
		{Name: "last_snapshot", Aliases: []string{"lsnp"}, Serving: true, JSON: func(Member, url.Values) (Object, string) {
			return Object{}, "zkraft keeps Raft snapshots, not ZooKeeper snapshot files"
		}},
		{Name: "leader", Aliases: []string{"lead"}, Serving: true, JSON: leaderJSON},
		{Name: "monitor", Word: "mntr", Serving: true, Text: mntrText, JSON: monitorJSON},
		// zkraft has no observer connections of ZooKeeper's kind to reset.
		{Name: "observer_connection_stat_reset", Aliases: []string{"orst"}, Serving: true, JSON: emptyJSON},
		{Name: "observers", Aliases: []string{"obsr"}, Serving: true, JSON: observersJSON},
		{Name: "ruok", Word: "ruok", Text: func(Member, []byte) string { return "imok" }, JSON: emptyJSON},
		{Name: "server_stats", Word: "srvr", Serving: true, Text: srvrText, JSON: serverStatsJSON},
		// stmk sets the trace mask to the word's 8-byte big-endian argument.
		{Name: "set_trace_mask", Word: "stmk", Arg: 8, Text: func(m Member, arg []byte) string {
			r.traceMask.Store(int64(binary.BigEndian.Uint64(arg)))
			return gtmkText(m, nil)
		}, JSON: func(_ Member, query url.Values) (Object, string) {
			v, err := strconv.ParseInt(query.Get("traceMask"), 10, 64)
			if err != nil {
				return Object{}, "Invalid or missing parameter traceMask"
			}
			r.traceMask.Store(v)
			return Object{{"tracemask", v}}, ""
		}},
		{Name: "stat_reset", Word: "srst", Serving: true,
			Text: thenSay(Member.ResetStats, "Server stats reset.\n"), JSON: thenEmpty(Member.ResetStats)},
		{Name: "stats", Word: "stat", Serving: true, Text: statText, JSON: statsJSON},
		{Name: "system_properties", Aliases: []string{"sysp"}, JSON: environmentJSON},
		{Name: "voting_view", Serving: true, JSON: votingViewJSON},
		{Name: "watch_summary", Word: "wchs", Serving: true, Text: wchsText, JSON: watchSummaryJSON},
		{Name: "watches", Word: "wchc", Serving: true, Text: wchcText, JSON: watchesJSON},
		{Name: "watches_by_path", Word: "wchp", Serving: true, Text: wchpText, JSON: watchesByPathJSON},
		{Name: "zabstate", Serving: true, JSON: zabstateJSON},
	}
}

func emptyJSON(Member, url.Values) (Object, string) { return Object{}, "" }

// thenSay is the word of a command that does fn and says so.
func thenSay(fn func(Member), said string) func(Member, []byte) string {
	return func(m Member, _ []byte) string {
		fn(m)
		return said
	}
}

// thenEmpty is the AdminServer command that does fn and answers no fields.
func thenEmpty(fn func(Member)) func(Member, url.Values) (Object, string) {
	return func(m Member, q url.Values) (Object, string) {
		fn(m)
		return emptyJSON(m, q)
	}
}

// confPairsText is conf's and initial_configuration's key=value lines.
func confPairsText(m Member) string {
	var b strings.Builder
	for _, p := range confPairs(m) {
		fmt.Fprintf(&b, "%s=%v\n", p.K, p.V)
	}
	return b.String()
}

func confText(m Member, _ []byte) string {
	out := confPairsText(m)
	if e := m.Conf().Ensemble; e != nil {
		out += "membership: \n" + e.Members + "\nversion=0\n"
	}
	return out
}

func configurationJSON(m Member, _ url.Values) (Object, string) {
	c := m.Conf()
	out := Object{
		{"client_port", c.ClientPort},
		{"data_dir", c.DataDir},
		{"data_log_dir", c.DataLogDir},
		{"tick_time", c.TickTime},
		{"max_client_cnxns", c.MaxClientCnxns},
		{"min_session_timeout", c.MinSessionTimeout},
		{"max_session_timeout", c.MaxSessionTimeout},
		{"server_id", c.ServerID},
		{"client_port_listen_backlog", -1},
	}
	if c.SecureClientPort >= 0 {
		out = append(out, KV{"secure_client_port", c.SecureClientPort})
	}
	return out, ""
}

func initialConfigurationJSON(m Member, _ url.Values) (Object, string) {
	return Object{{"initial_configuration", confPairsText(m)}}, ""
}

func consText(m Member, _ []byte) string {
	var b strings.Builder
	for _, ci := range m.Connections() {
		b.WriteString(connLine(ci, true))
	}
	b.WriteString("\n")
	return b.String()
}

func connectionsJSON(m Member, _ url.Values) (Object, string) {
	cs := m.Connections()
	return Object{{"connections", adminConns(cs, true, false)}, {"secure_connections", adminConns(cs, true, true)}}, ""
}

func dirsText(m Member, _ []byte) string {
	d, l := m.DirSizes()
	return fmt.Sprintf("datadir_size: %d\nlogdir_size: %d\n", d, l)
}

func dirsJSON(m Member, _ url.Values) (Object, string) {
	d, l := m.DirSizes()
	return Object{{"datadir_size", d}, {"logdir_size", l}}, ""
}

func dumpText(m Member, _ []byte) string {
	var b strings.Builder
	writeDump(&b, m.Sessions())
	return b.String()
}

// dumpJSON is dump's JSON: the sessions by expiry (ms since the member
// started) and the ephemerals by session.
func dumpJSON(m Member, _ url.Values) (Object, string) {
	ss := m.Sessions()
	keys := make([]int64, 0, len(ss.Expiry))
	byKey := map[int64][]int64{}
	for t, ids := range ss.Expiry {
		k := t.Sub(ss.Started).Milliseconds()
		keys = append(keys, k)
		byKey[k] = ids
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	exp := Object{}
	for _, k := range keys {
		exp = append(exp, KV{strconv.FormatInt(k, 10), int64List(byKey[k])})
	}
	eph := Object{}
	for i, o := range ss.Owners {
		eph = append(eph, KV{strconv.FormatInt(o, 10), stringList(ss.Ephemerals[i])})
	}
	return Object{{"expiry_time_to_session_ids", exp}, {"session_id_to_ephemeral_paths", eph}}, ""
}

func enviText(Member, []byte) string {
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, p := range environment() {
		fmt.Fprintf(&b, "%s=%s\n", p.K, p.V)
	}
	return b.String()
}

func environmentJSON(Member, url.Values) (Object, string) { return environment(), "" }

func leaderJSON(m Member, _ url.Values) (Object, string) {
	e := m.Conf().Ensemble
	if e == nil {
		return Object{}, "server is not initialized"
	}
	return Object{{"is_leader", e.IsLeader}, {"leader_id", e.LeaderID}, {"leader_ip", e.LeaderIP}}, ""
}

func mntrText(m Member, _ []byte) string {
	var b strings.Builder
	for _, p := range Monitor(m) {
		fmt.Fprintf(&b, "zk_%s\t%s\n", p.K, valueText(p.V))
	}
	return b.String()
}

func monitorJSON(m Member, _ url.Values) (Object, string) { return Monitor(m), "" }

func observersJSON(m Member, _ url.Values) (Object, string) {
	f := m.Figures()
	return Object{{"synced_observers", f.SyncedNonVot}, {"observers", []any{}}}, ""
}

func srvrText(m Member, _ []byte) string {
	var b strings.Builder
	writeSrvr(&b, m, false)
	return b.String()
}

func statText(m Member, _ []byte) string {
	var b strings.Builder
	writeSrvr(&b, m, true)
	return b.String()
}

func serverStatsJSON(m Member, _ url.Values) (Object, string) { return serverStats(m, false), "" }

func statsJSON(m Member, _ url.Values) (Object, string) { return serverStats(m, true), "" }

func votingViewJSON(m Member, _ url.Values) (Object, string) {
	cfg := Object{}
	if e := m.Conf().Ensemble; e != nil {
		for _, line := range strings.Split(e.Members, "\n") {
			k, v, _ := strings.Cut(line, "=")
			cfg = append(cfg, KV{strings.TrimPrefix(k, "server."), v})
		}
	}
	return Object{{"current_config", cfg}}, ""
}

func wchsText(m Member, _ []byte) string {
	watches, paths, conns := m.WatchCount()
	return fmt.Sprintf("%d connections watching %d paths\nTotal watches:%d\n", conns, paths, watches)
}

func watchSummaryJSON(m Member, _ url.Values) (Object, string) {
	watches, paths, conns := m.WatchCount()
	return Object{{"num_connections", conns}, {"num_paths", paths}, {"num_total_watches", watches}}, ""
}

func wchcText(m Member, _ []byte) string {
	var b strings.Builder
	for _, e := range m.WatchesBySession() {
		fmt.Fprintf(&b, "%s\n", hexID(e.ID))
		for _, p := range e.Paths {
			fmt.Fprintf(&b, "\t%s\n", p)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func watchesJSON(m Member, _ url.Values) (Object, string) {
	out := Object{}
	for _, e := range m.WatchesBySession() {
		out = append(out, KV{strconv.FormatInt(e.ID, 10), stringList(e.Paths)})
	}
	return Object{{"session_id_to_watched_paths", out}}, ""
}

func wchpText(m Member, _ []byte) string {
	var b strings.Builder
	for _, e := range m.WatchesByPath() {
		fmt.Fprintf(&b, "%s\n", e.Path)
		for _, id := range e.IDs {
			fmt.Fprintf(&b, "\t%s\n", hexID(id))
		}
	}
	b.WriteString("\n")
	return b.String()
}

func watchesByPathJSON(m Member, _ url.Values) (Object, string) {
	out := Object{}
	for _, e := range m.WatchesByPath() {
		out = append(out, KV{e.Path, int64List(e.IDs)})
	}
	return Object{{"path_to_session_ids", out}}, ""
}

func zabstateJSON(m Member, _ url.Values) (Object, string) {
	e := m.Conf().Ensemble
	if e == nil {
		return Object{{"voting", false}, {"zabstate", ""}}, ""
	}
	return Object{{"voting", !e.Observer}, {"zabstate", "BROADCAST"}}, ""
}

// hexID is a session id as ZooKeeper prints it: 0x and lower-case hex.
func hexID(id int64) string { return "0x" + strconv.FormatUint(uint64(id), 16) }
