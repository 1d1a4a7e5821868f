package server

import (
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"

	"github.com/zkraft/zkraft/console"
)

// adminHandler serves ZooKeeper's AdminServer API: GET <url> lists the
// commands, GET <url>/<name or alias> runs one and answers JSON in
// Jackson's pretty format, with "command" and "error" appended (POST for
// shed_connections; serveAdminCommand).
func (s *Server) adminHandler() http.Handler {
	base := s.cfg.Admin.CommandURL
	mux := http.NewServeMux()
	list := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		b.WriteString("<h1>ZooKeeper AdminServer</h1>\n")
		for _, c := range commands {
			fmt.Fprintf(&b, "<a href=\"%s/%s\">%s</a><br/>\n", base, c.name, html.EscapeString(c.name))
		}
		w.Write([]byte(b.String()))
	}
	mux.HandleFunc(base, list)
	// The web console (package console; console.go).
	ch := console.Handler(consoleBackend{s}, consolePrefix)
	mux.Handle(consolePrefix, ch)
	mux.Handle(consolePrefix+"/", ch)
	mux.HandleFunc(base+"/", func(w http.ResponseWriter, r *http.Request) {
		name := strings.Trim(strings.TrimPrefix(r.URL.Path, base), "/")
		if name == "" {
			list(w, r)
			return
		}
		s.serveAdminCommand(w, r, name) // adminauth.go
	})
	return mux
}

// jobj is a JSON object that keeps its key order.
type jobj []kv

// serverStatsJSON is server_stats, and with the connections stats.
func (s *cellView) serverStatsJSON(withConns bool) jobj {
	f := s.figures()
	resp := jobj{{"last_buffer_size", s.counters.resp.last.Load()}, {"min_buffer_size", s.counters.resp.min.Load()},
		{"max_buffer_size", s.counters.resp.max.Load()}}
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
		out = append(out, kv{"proposal_stats", jobj{{"last_buffer_size", s.counters.proposals.last.Load()},
			{"min_buffer_size", s.counters.proposals.min.Load()}, {"max_buffer_size", s.counters.proposals.max.Load()}}})
	}
	if withConns {
		out = append(out, kv{"connections", s.adminConns(false, false)},
			kv{"secure_connections", s.adminConns(false, true)})
	}
	return out
}

func (s *cellView) confDataLogDir() string {
	if s.cfg.LogDir != "" {
		return s.cfg.LogDir
	}
	return s.cfg.DataDir
}

func (s *cellView) confServerID() uint64 {
	if s.standalone() {
		return 0
	}
	return s.cfg.ReplicaID
}

// adminConns lists the connections with sessions, brief (stats) or full
// (connections).
func (s *cellView) adminConns(full, secure bool) []any {
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
