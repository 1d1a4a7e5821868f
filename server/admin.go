package server

import (
	"fmt"
	"html"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// adminCommands are ZooKeeper 3.8's AdminServer commands with their
// aliases (admin/Commands.java).
var adminCommands = []struct {
	name    string
	aliases []string
}{
	{"configuration", []string{"conf", "config"}},
	{"connection_stat_reset", []string{"crst"}},
	{"connections", []string{"cons"}},
	{"dirs", nil},
	{"dump", nil},
	{"environment", []string{"env", "envi"}},
	{"get_trace_mask", []string{"gtmk"}},
	{"hash", nil},
	{"initial_configuration", []string{"icfg"}},
	{"is_read_only", []string{"isro"}},
	{"last_snapshot", []string{"lsnp"}},
	{"leader", []string{"lead"}},
	{"monitor", []string{"mntr"}},
	{"observer_connection_stat_reset", []string{"orst"}},
	{"observers", []string{"obsr"}},
	{"ruok", nil},
	{"server_stats", []string{"srvr"}},
	{"set_trace_mask", []string{"stmk"}},
	{"stat_reset", []string{"srst"}},
	{"stats", []string{"stat"}},
	{"system_properties", []string{"sysp"}},
	{"voting_view", nil},
	{"watch_summary", []string{"wchs"}},
	{"watches", []string{"wchc"}},
	{"watches_by_path", []string{"wchp"}},
	{"zabstate", nil},
}

func adminCommandName(name string) (string, bool) {
	for _, c := range adminCommands {
		if c.name == name {
			return name, true
		}
		for _, a := range c.aliases {
			if a == name {
				return c.name, true
			}
		}
	}
	return "", false
}

// adminHandler serves ZooKeeper's AdminServer API: GET <url> lists the
// commands, GET <url>/<name or alias> runs one and answers JSON in
// Jackson's pretty format, with "command" and "error" appended.
func (s *Server) adminHandler() http.Handler {
	base := s.cfg.Admin.CommandURL
	mux := http.NewServeMux()
	list := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		b.WriteString("<h1>ZooKeeper AdminServer</h1>\n")
		for _, c := range adminCommands {
			fmt.Fprintf(&b, "<a href=\"%s/%s\">%s</a><br/>\n", base, c.name, html.EscapeString(c.name))
		}
		w.Write([]byte(b.String()))
	}
	mux.HandleFunc(base, list)
	mux.HandleFunc(base+"/", func(w http.ResponseWriter, r *http.Request) {
		name := strings.Trim(strings.TrimPrefix(r.URL.Path, base), "/")
		if name == "" {
			list(w, r)
			return
		}
		body := s.adminCommand(name, r)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	})
	return mux
}

// jobj is a JSON object that keeps its key order.
type jobj []kv

// adminCommand runs one command and renders its JSON.
func (s *Server) adminCommand(name string, r *http.Request) string {
	cmd, ok := adminCommandName(name)
	if !ok {
		return renderJSON(jobj{{"command", nil}, {"error", "Unknown command: " + name}})
	}
	out, errText := s.adminRun(cmd, r)
	if errText != "" {
		out = append(out, kv{"error", errText}, kv{"command", cmd})
	} else {
		out = append(out, kv{"command", cmd}, kv{"error", nil})
	}
	return renderJSON(out)
}

func (s *Server) adminRun(cmd string, r *http.Request) (jobj, string) {
	switch cmd {
	case "ruok":
		return jobj{}, ""
	case "environment", "system_properties":
		out := jobj{}
		for _, p := range environment() {
			out = append(out, kv{p.k, p.v})
		}
		return out, ""
	case "get_trace_mask":
		return jobj{{"tracemask", s.ops.traceMask.Load()}}, ""
	case "set_trace_mask":
		v, err := strconv.ParseInt(r.URL.Query().Get("traceMask"), 10, 64)
		if err != nil {
			return jobj{}, "Invalid or missing parameter traceMask"
		}
		s.ops.traceMask.Store(v)
		return jobj{{"tracemask", v}}, ""
	case "is_read_only":
		return jobj{{"read_only", false}}, ""
	}
	if !s.cell.serving() {
		return jobj{}, strings.TrimSuffix(notServing, "\n")
	}
	switch cmd {
	case "configuration":
		out := jobj{
			{"client_port", portOf(s.ln.Addr().String())},
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
	case "initial_configuration":
		var b strings.Builder
		for _, p := range s.confPairs() {
			fmt.Fprintf(&b, "%s=%v\n", p.k, p.v)
		}
		return jobj{{"initial_configuration", b.String()}}, ""
	case "connections":
		return jobj{{"connections", s.adminConns(true, false)}, {"secure_connections", s.adminConns(true, true)}}, ""
	case "connection_stat_reset", "observer_connection_stat_reset":
		if cmd == "connection_stat_reset" {
			for _, c := range s.conns() {
				c.st.reset()
			}
		}
		return jobj{}, ""
	case "stat_reset":
		s.resetServerStats()
		return jobj{}, ""
	case "dirs":
		d, l := s.dirSizes()
		return jobj{{"datadir_size", d}, {"logdir_size", l}}, ""
	case "dump":
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
	case "hash":
		return jobj{{"digests", []any{}}}, ""
	case "last_snapshot":
		return jobj{}, "zkraft keeps Raft snapshots, not ZooKeeper snapshot files"
	case "leader":
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
	case "monitor":
		out := jobj{}
		for _, p := range s.monitor() {
			out = append(out, kv{p.k, p.v})
		}
		return out, ""
	case "observers":
		f := s.figures()
		return jobj{{"synced_observers", f.syncedNonVot}, {"observers", []any{}}}, ""
	case "server_stats", "stats":
		f := s.figures()
		resp := jobj{{"last_buffer_size", s.counters.lastResp.Load()}, {"min_buffer_size", s.counters.minResp.Load()},
			{"max_buffer_size", s.counters.maxResp.Load()}}
		d, l := s.dirSizes()
		st := jobj{
			{"packets_sent", f.sent},
			{"packets_received", f.received},
			{"fsync_threshold_exceed_count", 0},
			{"client_response_stats", resp},
			{"data_dir_size", d},
			{"log_dir_size", l},
			{"server_state", f.mode},
			{"last_processed_zxid", f.zxid},
			{"outstanding_requests", f.outstanding},
			{"avg_latency", f.avgLat},
			{"max_latency", f.maxLat},
			{"min_latency", f.minLat},
			{"num_alive_client_connections", f.connections},
			{"auth_failed_count", s.counters.authFailed.Load()},
			{"non_mtlsremote_conn_count", 0},
			{"non_mtlslocal_conn_count", 0},
			{"provider_null", false},
			{"uptime", f.uptime},
		}
		out := jobj{{"version", Version}, {"read_only", false}, {"server_stats", st},
			{"client_response", resp}, {"node_count", f.nodeCount}}
		if f.mode == "leader" {
			out = append(out, kv{"proposal_stats", jobj{{"last_buffer_size", s.counters.proposalLast.Load()},
				{"min_buffer_size", s.counters.proposalMin.Load()}, {"max_buffer_size", s.counters.proposalMax.Load()}}})
		}
		if cmd == "stats" {
			out = append(out, kv{"connections", s.adminConns(false, false)},
				kv{"secure_connections", s.adminConns(false, true)})
		}
		return out, ""
	case "voting_view":
		cfg := jobj{}
		if !s.standalone() {
			for _, line := range strings.Split(renderConfig(s.cfg.Members), "\n") {
				k, v, _ := strings.Cut(line, "=")
				cfg = append(cfg, kv{strings.TrimPrefix(k, "server."), v})
			}
		}
		return jobj{{"current_config", cfg}}, ""
	case "watch_summary":
		watches, paths, conns := s.cell.watches.count()
		return jobj{{"num_connections", conns}, {"num_paths", paths}, {"num_total_watches", watches}}, ""
	case "watches":
		out := jobj{}
		for _, e := range s.cell.watches.bySession() {
			out = append(out, kv{strconv.FormatInt(e.id, 10), stringList(e.paths)})
		}
		return jobj{{"session_id_to_watched_paths", out}}, ""
	case "watches_by_path":
		out := jobj{}
		for _, e := range s.cell.watches.byPath() {
			out = append(out, kv{e.path, int64List(e.ids)})
		}
		return jobj{{"path_to_session_ids", out}}, ""
	case "zabstate":
		if s.standalone() {
			return jobj{{"voting", false}, {"zabstate", ""}}, ""
		}
		return jobj{{"voting", !s.self().Observer}, {"zabstate", "BROADCAST"}}, ""
	}
	return jobj{}, "Unknown command: " + cmd
}

func (s *Server) confDataLogDir() string {
	if s.cfg.LogDir != "" {
		return s.cfg.LogDir
	}
	return s.cfg.DataDir
}

func (s *Server) confServerID() uint64 {
	if s.standalone() {
		return 0
	}
	return s.cfg.ReplicaID
}

// adminConns lists the connections with sessions, brief (stats) or full
// (connections).
func (s *Server) adminConns(full, secure bool) []any {
	out := []any{}
	for _, ci := range s.connInfos() {
		if !ci.hasSession || ci.secure != secure {
			continue
		}
		o := jobj{
			{"remote_socket_address", ci.remote},
			{"interest_ops", ci.interest},
			{"outstanding_requests", ci.queued},
			{"packets_received", ci.recved},
			{"packets_sent", ci.sent},
		}
		if full {
			o = append(o, kv{"session_id", ci.session}, kv{"last_operation", ci.lop}, kv{"established", ci.est},
				kv{"session_timeout", ci.timeout})
			if ci.lcxid >= 0 {
				o = append(o, kv{"last_cxid", ci.lcxid})
			}
			o = append(o, kv{"last_zxid", ci.lzxid}, kv{"last_response_time", ci.lresp}, kv{"last_latency", ci.llat},
				kv{"min_latency", ci.minlat}, kv{"avg_latency", ci.avglat}, kv{"max_latency", ci.maxlat})
		}
		out = append(out, o)
	}
	return out
}

func stringList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func int64List(ns []int64) []any {
	out := make([]any, len(ns))
	for i, n := range ns {
		out[i] = n
	}
	return out
}

// renderJSON writes v as Jackson's DefaultPrettyPrinter does: objects one
// "key" : value per line indented by two, arrays on one line with spaces,
// "{ }" and "[ ]" when empty.
func renderJSON(v any) string {
	var b strings.Builder
	writeJSON(&b, v, 0)
	b.WriteString("\n")
	return b.String()
}

func writeJSON(b *strings.Builder, v any, depth int) {
	switch x := v.(type) {
	case jobj:
		if len(x) == 0 {
			b.WriteString("{ }")
			return
		}
		b.WriteString("{\n")
		for i, p := range x {
			b.WriteString(strings.Repeat("  ", depth+1))
			b.WriteString(jsonString(p.k))
			b.WriteString(" : ")
			writeJSON(b, p.v, depth+1)
			if i < len(x)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(strings.Repeat("  ", depth))
		b.WriteString("}")
	case []any:
		if len(x) == 0 {
			b.WriteString("[ ]")
			return
		}
		b.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSON(b, e, depth)
		}
		b.WriteString(" ]")
	case nil:
		b.WriteString("null")
	case string:
		b.WriteString(jsonString(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case float64:
		b.WriteString(javaDouble(x))
	default:
		fmt.Fprint(b, x)
	}
}

// jsonString quotes s as JSON (strconv.Quote's escapes are Go's, not
// JSON's, for control and non-ASCII characters).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
