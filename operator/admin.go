package operator

import (
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
)

// Admin serves ZooKeeper's AdminServer API at base (Config's
// admin.commandURL, "/commands"): GET base lists the commands, GET
// base/<name or alias> runs one and answers JSON in Jackson's pretty format,
// with "command" and "error" appended (POST for a command with Post). Mount
// it at base and at base+"/". Errors while streaming an answer's body go to
// log.
func Admin(reg *Registry, host Host, base string, log *slog.Logger) http.Handler {
	return &adminHandler{reg: reg, host: host, base: base, log: log}
}

type adminHandler struct {
	reg  *Registry
	host Host
	base string
	log  *slog.Logger
}

func (a *adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.Trim(strings.TrimPrefix(r.URL.Path, a.base), "/")
	if name == "" {
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		b.WriteString("<h1>ZooKeeper AdminServer</h1>\n")
		for _, c := range a.reg.cmds {
			fmt.Fprintf(&b, "<a href=\"%s/%s\">%s</a><br/>\n", a.base, c.Name, html.EscapeString(c.Name))
		}
		w.Write([]byte(b.String()))
		return
	}
	a.serveCommand(w, r, name)
}

// KV is one key and value of a JSON object, or of conf, envi or mntr, in
// order. It is an unnamed struct type so that any package writes its
// values unkeyed: KV{"zxid", z}.
type KV = struct {
	K string
	V any
}

// Object is a JSON object that keeps its key order. Its values are
// strings, numbers, bools, nil, Objects and []any of them.
type Object []KV

// serverStats is server_stats, and with the connections stats.
func serverStats(m Member, withConns bool) Object {
	f := m.Figures()
	resp := Object{{"last_buffer_size", f.Responses.Last}, {"min_buffer_size", f.Responses.Min},
		{"max_buffer_size", f.Responses.Max}}
	d, l := m.DirSizes()
	st := Object{
		{"packets_sent", f.Sent},
		{"packets_received", f.Received},
		{"fsync_threshold_exceed_count", 0},
		{"client_response_stats", resp},
		{"data_dir_size", d},
		{"log_dir_size", l},
		{"server_state", f.Mode},
		{"last_processed_zxid", f.Zxid},
		{"outstanding_requests", f.Outstanding},
		{"avg_latency", f.AvgLat},
		{"max_latency", f.MaxLat},
		{"min_latency", f.MinLat},
		{"num_alive_client_connections", f.Connections},
		{"auth_failed_count", f.AuthFailed},
		{"non_mtlsremote_conn_count", 0},
		{"non_mtlslocal_conn_count", 0},
		{"provider_null", false},
		{"uptime", f.Uptime},
	}
	out := Object{{"version", Version}, {"read_only", false}, {"server_stats", st},
		{"client_response", resp}, {"node_count", f.NodeCount}}
	if f.Mode == "leader" {
		out = append(out, KV{"proposal_stats", Object{{"last_buffer_size", f.Proposals.Last},
			{"min_buffer_size", f.Proposals.Min}, {"max_buffer_size", f.Proposals.Max}}})
	}
	if withConns {
		cs := m.Connections()
		out = append(out, KV{"connections", adminConns(cs, false, false)},
			KV{"secure_connections", adminConns(cs, false, true)})
	}
	return out
}

// adminConns lists the connections with sessions, brief (stats) or full
// (connections).
func adminConns(cs []Connection, full, secure bool) []any {
	out := []any{}
	for _, ci := range cs {
		if !ci.HasSession || ci.Secure != secure {
			continue
		}
		o := Object{
			{"remote_socket_address", ci.Remote},
			{"interest_ops", ci.Interest},
			{"outstanding_requests", ci.Queued},
			{"packets_received", ci.Received},
			{"packets_sent", ci.Sent},
		}
		if full {
			o = append(o, KV{"session_id", ci.Session}, KV{"last_operation", ci.LastOp}, KV{"established", ci.Established},
				KV{"session_timeout", ci.Timeout})
			if ci.LastCxid >= 0 {
				o = append(o, KV{"last_cxid", ci.LastCxid})
			}
			o = append(o, KV{"last_zxid", ci.LastZxid}, KV{"last_response_time", ci.LastResponse}, KV{"last_latency", ci.LastLatency},
				KV{"min_latency", ci.MinLat}, KV{"avg_latency", ci.AvgLat}, KV{"max_latency", ci.MaxLat})
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

// RenderJSON writes v as Jackson's DefaultPrettyPrinter does: objects one
// "key" : value per line indented by two, arrays on one line with spaces,
// "{ }" and "[ ]" when empty.
func RenderJSON(v any) string {
	var b strings.Builder
	writeJSON(&b, v, 0)
	b.WriteString("\n")
	return b.String()
}

func writeJSON(b *strings.Builder, v any, depth int) {
	switch x := v.(type) {
	case Object:
		if len(x) == 0 {
			b.WriteString("{ }")
			return
		}
		b.WriteString("{\n")
		for i, p := range x {
			b.WriteString(strings.Repeat("  ", depth+1))
			b.WriteString(jsonString(p.K))
			b.WriteString(" : ")
			writeJSON(b, p.V, depth+1)
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
		b.WriteString(JavaDouble(x))
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

// Reply is a command's answer over HTTP (Command's Get and Post).
type Reply struct {
	Status int // 0: 200
	Fields Object
	Err    string // the error sentence, "" for none
	// Headers are set before the body.
	Headers [][2]string
	// Body, if set, is sent as application/octet-stream instead of JSON
	// (a streamed snapshot); it is closed after.
	Body io.ReadCloser
}

// serveCommand answers one AdminServer request for the command name:
// unknown commands and a member that is not serving are answered 200 with
// an error, as ZooKeeper; a command of the other method gets 405; a
// request Host.Authorize refuses gets its status and sentence.
func (a *adminHandler) serveCommand(w http.ResponseWriter, r *http.Request, name string) {
	cmd, ok := a.reg.ByName(name)
	var rep Reply
	primary := any(nil)
	// ?cell=NAME answers for that cell; the default cell without it.
	var m Member
	if ok {
		var why string
		if m, why = a.host.Cell(r.URL.Query().Get("cell")); m == nil {
			ok, rep.Err = false, why
		}
	}
	switch {
	case !ok && rep.Err != "":
		primary = cmd.Name
	case !ok:
		rep.Err = "Unknown command: " + name
	case cmd.NeedsServing(false) && !m.Serving():
		primary, rep.Err = cmd.Name, strings.TrimSuffix(NotServing, "\n")
	case (cmd.Post != nil) != (r.Method == http.MethodPost):
		primary = cmd.Name
		rep.Status, rep.Err = http.StatusMethodNotAllowed, cmd.Name+" answers "+cmd.method()+" requests only"
	default:
		primary = cmd.Name
		if cmd.Auth != AuthNone {
			if status, refusal, allowed := a.host.Authorize(r, cmd.Auth); !allowed {
				rep.Status, rep.Err = status, refusal
				break
			}
		}
		switch {
		case cmd.Post != nil:
			rep = cmd.Post(r)
		case cmd.Get != nil:
			rep = cmd.Get(r)
		default:
			rep.Fields, rep.Err = cmd.JSON(m, r.URL.Query())
		}
	}
	for _, h := range rep.Headers {
		w.Header().Set(h[0], h[1])
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	if rep.Body != nil {
		defer rep.Body.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(status)
		if _, err := io.Copy(w, rep.Body); err != nil && a.log != nil {
			a.log.Warn("admin: streaming the answer", "command", name, "remote", r.RemoteAddr, "err", err)
		}
		return
	}
	out := rep.Fields
	if out == nil {
		out = Object{}
	}
	if !ok && primary == nil {
		out = Object{{"command", nil}, {"error", rep.Err}}
	} else if rep.Err != "" {
		out = append(out, KV{"error", rep.Err}, KV{"command", primary})
	} else {
		out = append(out, KV{"command", primary}, KV{"error", nil})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(RenderJSON(out)))
}
