package console

import (
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/zkraft/zkraft/jute"
)

// Backend is what the console needs from the member. The server
// implements it.
type Backend interface {
	// Identify gives the ids a viewer reads with: the peer's ip id and,
	// with a valid Authorization header, its scheme's ids.
	Identify(r *http.Request) []jute.ID
	// Authorize accepts a request for an action (the AdminServer's check
	// for its write commands); a refusal is a *Refusal.
	Authorize(r *http.Request) ([]jute.ID, error)
	// Node reads a znode with ids, as a client's getData and getACL
	// would: errors are jute.ErrCode (NoNode, NoAuth).
	Node(ids []jute.ID, path string) (*Node, error)
	// Children lists a znode's children, in any order, as getChildren.
	Children(ids []jute.ID, path string) ([]string, error)
	// Sessions are the live sessions of the cell.
	Sessions() []Session
	// Watches are the watches set on this member, by path.
	Watches() []PathWatches
	// Members describes the ensemble and this member's Raft state.
	Members() Members
	// Gather reads the member's Prometheus registry.
	Gather() ([]*dto.MetricFamily, error)
	// Create, SetData and Delete change the tree through Raft with the
	// admin's ids; a ZooKeeper failure is a jute.ErrCode.
	Create(ids []jute.ID, path string, data []byte, flags int32) (string, error)
	SetData(ids []jute.ID, path string, data []byte, version int32) error
	Delete(ids []jute.ID, path string, version int32) error
	// KillSession closes a session as if it had expired.
	KillSession(id int64) error
	// Audit writes an action to the audit log (a no-op when it is off).
	Audit(e AuditEvent)
	// AuditUser is the audit log's user field for ids.
	AuditUser(ids []jute.ID) string
}

// Node is a znode as the console shows it.
type Node struct {
	Data []byte
	Stat jute.Stat
	ACL  []jute.ACL
}

// Session is one live session.
type Session struct {
	ID         int64
	Timeout    time.Duration
	LastHeard  time.Time // zero when not known here
	Remote     string    // the client's address when it is connected to this member
	Ephemerals []string
	Watches    []string // paths it watches on this member
}

// PathWatches are the sessions watching a path.
type PathWatches struct {
	Path     string
	Sessions []int64
}

// Members is the ensemble as this member sees it.
type Members struct {
	Self     uint64 // 0 for a standalone member
	Leader   uint64
	Role     string // leader, follower, observer, standalone
	Term     uint64
	Applied  uint64 // Raft index applied here
	Lag      int64  // entries stored here and not yet applied; -1 unknown
	Zxid     int64
	Serving  bool
	Replicas []Member
}

// Member is one member of the ensemble.
type Member struct {
	ID                   uint64
	RaftAddr, ClientAddr string
	Observer             bool
}

// AuditEvent is an action for the audit log (ZooKeeper's AuditEvent
// fields; Session is the session an action is about: the console has
// none of its own).
type AuditEvent struct {
	Session, User, IP, Operation, Znode, ZnodeType string
	Failed                                         bool
}

// Refusal is an action refused by Authorize.
type Refusal struct {
	Status int
	Text   string
}

func (r *Refusal) Error() string { return r.Text }

// PageSize is the number of children a page lists unless asked for fewer.
const PageSize = 200

// maxPage bounds a page asked for.
const maxPage = 5000

// maxBody bounds an action's request body (a znode's data is at most
// jute.maxbuffer, 1 MiB by default).
const maxBody = 4 << 20

//go:embed static
var static embed.FS

// Handler serves the console under prefix ("/console").
func Handler(b Backend, prefix string) http.Handler {
	prefix = strings.TrimSuffix(prefix, "/")
	files, _ := fs.Sub(static, "static")
	h := &handler{b: b}
	mux := http.NewServeMux()
	fileServer := http.StripPrefix(prefix+"/", http.FileServer(http.FS(files)))
	mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, prefix+"/", http.StatusFound)
	})
	mux.Handle(prefix+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		fileServer.ServeHTTP(w, r)
	}))
	api := prefix + "/api/"
	get := func(name string, fn func(*http.Request) (any, error)) {
		mux.HandleFunc(api+name, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				writeError(w, http.StatusMethodNotAllowed, "GET only")
				return
			}
			v, err := fn(r)
			h.reply(w, v, err)
		})
	}
	post := func(name string, fn func(*http.Request, []jute.ID) (any, error)) {
		mux.HandleFunc(api+name, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				writeError(w, http.StatusMethodNotAllowed, "POST only")
				return
			}
			ids, err := b.Authorize(r)
			if err != nil {
				var rf *Refusal
				if !errors.As(err, &rf) {
					rf = &Refusal{http.StatusInternalServerError, err.Error()}
				}
				writeError(w, rf.Status, rf.Text)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			v, err := fn(r, ids)
			h.reply(w, v, err)
		})
	}
	get("whoami", h.whoami)
	get("children", h.children)
	get("node", h.node)
	get("sessions", h.sessions)
	get("watches", h.watches)
	get("members", h.members)
	get("figures", h.figures)
	post("create", h.create)
	post("set", h.set)
	post("delete", h.delete)
	post("kill", h.kill)
	return mux
}

type handler struct{ b Backend }

// apiError is an error the API answers with a status.
type apiError struct {
	status int
	text   string
}

func (e *apiError) Error() string { return e.text }

func badRequest(format string) error { return &apiError{http.StatusBadRequest, format} }

func (h *handler) reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		var ae *apiError
		var code jute.ErrCode
		switch {
		case errors.As(err, &ae):
			writeError(w, ae.status, ae.text)
		case errors.As(err, &code):
			// A ZooKeeper failure is an answer, not an HTTP error: the page
			// shows its code's name.
			writeJSON(w, http.StatusOK, map[string]any{"error": code.String(), "code": int32(code)})
		default:
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, text string) {
	writeJSON(w, status, map[string]any{"error": text})
}

// validPath checks a path as ZooKeeper's PathUtils.validatePath does, for
// what the console asks for (the backend checks again).
func validPath(p string) error {
	if p == "" || p[0] != '/' {
		return badRequest("path must start with /")
	}
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		return badRequest("path must not end with /")
	}
	if strings.Contains(p, "//") || strings.ContainsRune(p, 0) {
		return badRequest("invalid path")
	}
	return nil
}

func (h *handler) whoami(r *http.Request) (any, error) {
	out := map[string]any{"user": h.b.AuditUser(h.b.Identify(r)), "admin": false}
	if r.Header.Get("Authorization") != "" {
		if _, err := h.b.Authorize(r); err == nil {
			out["admin"] = true
		} else {
			out["refused"] = err.Error()
		}
	}
	return out, nil
}

// children answers a page of a znode's children in byte order, after the
// name "after": {"path", "total", "children", "next"} (next is "" on the
// last page).
func (h *handler) children(r *http.Request) (any, error) {
	q := r.URL.Query()
	path := q.Get("path")
	if err := validPath(path); err != nil {
		return nil, err
	}
	limit := PageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, badRequest("limit must be a positive number")
		}
		limit = min(n, maxPage)
	}
	names, err := h.b.Children(h.b.Identify(r), path)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	page := page(names, q.Get("after"), limit)
	next := ""
	if len(page) > 0 && page[len(page)-1] != names[len(names)-1] {
		next = page[len(page)-1]
	}
	return map[string]any{"path": path, "total": len(names), "children": page, "next": next}, nil
}

// page is the names after "after" (sorted), at most limit.
func page(sorted []string, after string, limit int) []string {
	i := 0
	if after != "" {
		i = sort.Search(len(sorted), func(i int) bool { return sorted[i] > after })
	}
	end := min(i+limit, len(sorted))
	return sorted[i:end]
}

// stat is a Stat for the page, zxids in hex as ZooKeeper prints them.
func stat(s jute.Stat) map[string]any {
	hx := func(v int64) string { return "0x" + strconv.FormatInt(v, 16) }
	return map[string]any{
		"czxid": hx(s.Czxid), "mzxid": hx(s.Mzxid), "pzxid": hx(s.Pzxid),
		"ctime": s.Ctime, "mtime": s.Mtime, "version": s.Version, "cversion": s.Cversion, "aversion": s.Aversion,
		"ephemeralOwner": hx(s.EphemeralOwner), "dataLength": s.DataLength, "numChildren": s.NumChildren,
	}
}

func acl(acl []jute.ACL) []map[string]any {
	out := []map[string]any{}
	for _, a := range acl {
		out = append(out, map[string]any{"scheme": a.ID.Scheme, "id": a.ID.ID, "perms": permString(a.Perms)})
	}
	return out
}

// permString is the ACL's permissions as zkCli's getAcl prints them.
func permString(p int32) string {
	var b strings.Builder
	for _, x := range []struct {
		bit int32
		c   byte
	}{{jute.PermCreate, 'c'}, {jute.PermDelete, 'd'}, {jute.PermRead, 'r'}, {jute.PermWrite, 'w'}, {jute.PermAdmin, 'a'}} {
		if p&x.bit != 0 {
			b.WriteByte(x.c)
		}
	}
	return b.String()
}

// quotaRoot is where ZooKeeper keeps quotas: /zookeeper/quota<path>/
// zookeeper_limits and zookeeper_stats.
const quotaRoot = "/zookeeper/quota"

func (h *handler) node(r *http.Request) (any, error) {
	path := r.URL.Query().Get("path")
	if err := validPath(path); err != nil {
		return nil, err
	}
	ids := h.b.Identify(r)
	n, err := h.b.Node(ids, path)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"path": path, "data": n.Data, "stat": stat(n.Stat), "acl": acl(n.ACL)}
	// The quota of the nearest ancestor (or the node) that has one.
	for p := path; ; {
		qp := quotaRoot + p
		if p == "/" {
			qp = quotaRoot
		}
		if lim, err := h.b.Node(ids, qp+"/zookeeper_limits"); err == nil {
			q := map[string]any{"path": p, "limits": string(lim.Data)}
			if st, err := h.b.Node(ids, qp+"/zookeeper_stats"); err == nil {
				q["usage"] = string(st.Data)
			}
			out["quota"] = q
			break
		}
		if p == "/" {
			break
		}
		i := strings.LastIndexByte(p, '/')
		if p = p[:i]; p == "" {
			p = "/"
		}
	}
	return out, nil
}

func hexID(id int64) string { return "0x" + strconv.FormatUint(uint64(id), 16) }

func (h *handler) sessions(*http.Request) (any, error) {
	ss := h.b.Sessions()
	sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
	now := time.Now()
	out := []map[string]any{}
	for _, s := range ss {
		m := map[string]any{"id": hexID(s.ID), "timeout_ms": s.Timeout.Milliseconds(), "remote": s.Remote,
			"ephemerals": nonNil(s.Ephemerals), "watches": nonNil(s.Watches)}
		if !s.LastHeard.IsZero() {
			m["last_heard_ms_ago"] = max(now.Sub(s.LastHeard).Milliseconds(), 0)
		}
		out = append(out, m)
	}
	return map[string]any{"sessions": out}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (h *handler) watches(*http.Request) (any, error) {
	ws := h.b.Watches()
	sort.Slice(ws, func(i, j int) bool { return ws[i].Path < ws[j].Path })
	out := []map[string]any{}
	for _, w := range ws {
		ids := []string{}
		for _, id := range w.Sessions {
			ids = append(ids, hexID(id))
		}
		out = append(out, map[string]any{"path": w.Path, "sessions": ids})
	}
	return map[string]any{"watches": out}, nil
}

func (h *handler) members(*http.Request) (any, error) {
	m := h.b.Members()
	reps := []map[string]any{}
	for _, r := range m.Replicas {
		role := "follower"
		switch {
		case r.Observer:
			role = "observer"
		case r.ID == m.Leader:
			role = "leader"
		}
		reps = append(reps, map[string]any{"id": r.ID, "raft": r.RaftAddr, "client": r.ClientAddr, "role": role, "self": r.ID == m.Self})
	}
	out := map[string]any{"self": m.Self, "leader": m.Leader, "role": m.Role, "term": m.Term, "applied": m.Applied,
		"zxid": hexID(m.Zxid), "serving": m.Serving, "members": reps}
	if m.Lag >= 0 {
		out["lag"] = m.Lag
	}
	return out, nil
}

// figures is one sample of the member's registry for the charts: counters
// and gauges by name (a labelled series as name{label="value"}), a
// summary's quantiles as name{quantile="0.99"}, and a histogram's 0.5 and
// 0.99 quantiles estimated from its buckets. The page turns counters into
// rates between samples.
func (h *handler) figures(*http.Request) (any, error) {
	mfs, err := h.b.Gather()
	if err != nil {
		return nil, err
	}
	vals := map[string]float64{}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			key := name + labels(m.GetLabel())
			switch {
			case m.Counter != nil:
				vals[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				vals[key] = m.Gauge.GetValue()
			case m.Untyped != nil:
				vals[key] = m.Untyped.GetValue()
			case m.Summary != nil:
				for _, q := range m.Summary.GetQuantile() {
					vals[name+`{quantile="`+strconv.FormatFloat(q.GetQuantile(), 'f', -1, 64)+`"}`] = nanToZero(q.GetValue())
				}
				vals[name+"_count"] = float64(m.Summary.GetSampleCount())
			case m.Histogram != nil:
				for _, q := range []float64{0.5, 0.99} {
					vals[name+`{quantile="`+strconv.FormatFloat(q, 'f', -1, 64)+`"}`] = histQuantile(m.Histogram, q)
				}
				vals[name+"_count"] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return map[string]any{"time_ms": time.Now().UnixMilli(), "values": vals}, nil
}

func labels(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func nanToZero(v float64) float64 {
	if v != v {
		return 0
	}
	return v
}

// histQuantile estimates a quantile from cumulative buckets (linear within
// the bucket, as Prometheus's histogram_quantile).
func histQuantile(h *dto.Histogram, q float64) float64 {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, prevCount := 0.0, 0.0
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			upper := b.GetUpperBound()
			if c == prevCount {
				return upper
			}
			return lower + (upper-lower)*(rank-prevCount)/(c-prevCount)
		}
		lower, prevCount = b.GetUpperBound(), c
	}
	return lower
}

// actionRequest is an action's JSON body. Data is text unless DataHex is
// set.
type actionRequest struct {
	Path      string `json:"path"`
	Data      string `json:"data"`
	DataHex   bool   `json:"data_hex"`
	Version   *int32 `json:"version"`
	Sequence  bool   `json:"sequential"`
	Container bool   `json:"container"`
	Session   string `json:"session"`
}

func readAction(r *http.Request) (*actionRequest, []byte, error) {
	var a actionRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, nil, badRequest("body: " + err.Error())
	}
	data := []byte(a.Data)
	if a.DataHex {
		var err error
		if data, err = decodeHex(a.Data); err != nil {
			return nil, nil, badRequest("data_hex: " + err.Error())
		}
	}
	return &a, data, nil
}

func decodeHex(s string) ([]byte, error) {
	s = strings.Join(strings.Fields(s), "")
	if len(s)%2 != 0 {
		return nil, errors.New("odd number of hex digits")
	}
	out := make([]byte, len(s)/2)
	for i := range out {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, errors.New("not hex")
		}
		out[i] = byte(v)
	}
	return out, nil
}

func peerIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// audit logs an action's outcome.
func (h *handler) audit(r *http.Request, ids []jute.ID, op, path, typ string, err error) {
	h.b.Audit(AuditEvent{User: h.b.AuditUser(ids), IP: peerIP(r), Operation: op, Znode: path, ZnodeType: typ, Failed: err != nil})
}

func version(v *int32) int32 {
	if v == nil {
		return -1
	}
	return *v
}

func (h *handler) create(r *http.Request, ids []jute.ID) (any, error) {
	a, data, err := readAction(r)
	if err != nil {
		return nil, err
	}
	if err := validPath(a.Path); err != nil {
		return nil, err
	}
	var flags int32
	typ := "persistent"
	switch {
	case a.Container && a.Sequence:
		return nil, badRequest("a container cannot be sequential")
	case a.Container:
		flags, typ = jute.FlagContainer, "container"
	case a.Sequence:
		flags, typ = jute.FlagPersistentSequential, "persistent_sequential"
	}
	created, err := h.b.Create(ids, a.Path, data, flags)
	logged := a.Path
	if err == nil {
		logged = created
	}
	h.audit(r, ids, "create", logged, typ, err)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": created}, nil
}

func (h *handler) set(r *http.Request, ids []jute.ID) (any, error) {
	a, data, err := readAction(r)
	if err != nil {
		return nil, err
	}
	if err := validPath(a.Path); err != nil {
		return nil, err
	}
	err = h.b.SetData(ids, a.Path, data, version(a.Version))
	h.audit(r, ids, "setData", a.Path, "", err)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": a.Path}, nil
}

func (h *handler) delete(r *http.Request, ids []jute.ID) (any, error) {
	a, _, err := readAction(r)
	if err != nil {
		return nil, err
	}
	if err := validPath(a.Path); err != nil {
		return nil, err
	}
	if a.Path == "/" || a.Path == "/zookeeper" || strings.HasPrefix(a.Path, "/zookeeper/") {
		return nil, badRequest("the console does not delete " + a.Path)
	}
	err = h.b.Delete(ids, a.Path, version(a.Version))
	h.audit(r, ids, "delete", a.Path, "", err)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": a.Path}, nil
}

func (h *handler) kill(r *http.Request, ids []jute.ID) (any, error) {
	a, _, err := readAction(r)
	if err != nil {
		return nil, err
	}
	id, perr := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(a.Session), "0x"), 16, 64)
	if perr != nil || id == 0 {
		return nil, badRequest("session must be a session id in hex")
	}
	err = h.b.KillSession(int64(id))
	h.b.Audit(AuditEvent{Session: hexID(int64(id)), User: h.b.AuditUser(ids), IP: peerIP(r), Operation: "killSession", Failed: err != nil})
	if err != nil {
		return nil, err
	}
	return map[string]any{"session": hexID(int64(id))}, nil
}
