package jute

// One Go type per Jute record of zookeeper.jute (ZooKeeper 3.8), with fields
// in wire order. Every type implements Record with pointer methods.
//
// Decoding conventions (see Reader): a null buffer (-1) decodes to nil and a
// zero-length one to a non-nil empty slice, so buffers round-trip exactly; a
// null ustring decodes to "" and re-encodes with length 0; null vectors decode
// to nil and re-encode as -1.

// statSize is the encoded size of Stat.
const statSize = 68

// aclMinSize is the smallest encoding of an ACL: perms plus two empty
// ustrings.
const aclMinSize = 12

// Stat is the node metadata returned to clients (org.apache.zookeeper.data.Stat).
type Stat struct {
	Czxid          int64
	Mzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	DataLength     int32
	NumChildren    int32
	Pzxid          int64
}

// Encode implements Record.
func (s *Stat) Encode(w *Writer) {
	w.Long(s.Czxid)
	w.Long(s.Mzxid)
	w.Long(s.Ctime)
	w.Long(s.Mtime)
	w.Int(s.Version)
	w.Int(s.Cversion)
	w.Int(s.Aversion)
	w.Long(s.EphemeralOwner)
	w.Int(s.DataLength)
	w.Int(s.NumChildren)
	w.Long(s.Pzxid)
}

// Decode implements Record.
func (s *Stat) Decode(r *Reader) {
	s.Czxid = r.Long()
	s.Mzxid = r.Long()
	s.Ctime = r.Long()
	s.Mtime = r.Long()
	s.Version = r.Int()
	s.Cversion = r.Int()
	s.Aversion = r.Int()
	s.EphemeralOwner = r.Long()
	s.DataLength = r.Int()
	s.NumChildren = r.Int()
	s.Pzxid = r.Long()
}

// ID is an ACL identity, e.g. world:anyone (org.apache.zookeeper.data.Id).
type ID struct {
	Scheme string
	ID     string
}

// Encode implements Record.
func (id *ID) Encode(w *Writer) {
	w.String(id.Scheme)
	w.String(id.ID)
}

// Decode implements Record.
func (id *ID) Decode(r *Reader) {
	id.Scheme = r.String()
	id.ID = r.String()
}

// ACL is one access control entry (org.apache.zookeeper.data.ACL).
type ACL struct {
	Perms int32
	ID    ID
}

// Encode implements Record.
func (a *ACL) Encode(w *Writer) {
	w.Int(a.Perms)
	a.ID.Encode(w)
}

// Decode implements Record.
func (a *ACL) Decode(r *Reader) {
	a.Perms = r.Int()
	a.ID.Decode(r)
}

// ConnectRequest opens or resumes a session. It is sent framed but with no
// RequestHeader. The trailing readOnly byte is optional on the wire (old
// clients omit it): Decode reads it only if a byte remains and records its
// presence in HasReadOnly; Encode writes it only if HasReadOnly.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Encode implements Record.
func (c *ConnectRequest) Encode(w *Writer) {
	w.Int(c.ProtocolVersion)
	w.Long(c.LastZxidSeen)
	w.Int(c.TimeOut)
	w.Long(c.SessionID)
	w.Buffer(c.Passwd)
	if c.HasReadOnly {
		w.Bool(c.ReadOnly)
	}
}

// Decode implements Record.
func (c *ConnectRequest) Decode(r *Reader) {
	c.ProtocolVersion = r.Int()
	c.LastZxidSeen = r.Long()
	c.TimeOut = r.Int()
	c.SessionID = r.Long()
	c.Passwd = r.Buffer()
	c.ReadOnly, c.HasReadOnly = false, false
	if r.Err() == nil && r.Remaining() > 0 {
		c.ReadOnly = r.Bool()
		c.HasReadOnly = true
	}
}

// ConnectResponse answers a ConnectRequest. The trailing readOnly byte
// follows the same rule as in ConnectRequest: the server sends it only if the
// request carried one.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Encode implements Record.
func (c *ConnectResponse) Encode(w *Writer) {
	w.Int(c.ProtocolVersion)
	w.Int(c.TimeOut)
	w.Long(c.SessionID)
	w.Buffer(c.Passwd)
	if c.HasReadOnly {
		w.Bool(c.ReadOnly)
	}
}

// Decode implements Record.
func (c *ConnectResponse) Decode(r *Reader) {
	c.ProtocolVersion = r.Int()
	c.TimeOut = r.Int()
	c.SessionID = r.Long()
	c.Passwd = r.Buffer()
	c.ReadOnly, c.HasReadOnly = false, false
	if r.Err() == nil && r.Remaining() > 0 {
		c.ReadOnly = r.Bool()
		c.HasReadOnly = true
	}
}

// RequestHeader starts every request frame after the connect.
type RequestHeader struct {
	Xid  int32
	Type OpCode
}

// Encode implements Record.
func (h *RequestHeader) Encode(w *Writer) {
	w.Int(h.Xid)
	w.Int(int32(h.Type))
}

// Decode implements Record.
func (h *RequestHeader) Decode(r *Reader) {
	h.Xid = r.Int()
	h.Type = OpCode(r.Int())
}

// ReplyHeader starts every reply frame after the connect. The body follows
// only when Err is ErrOK.
type ReplyHeader struct {
	Xid  int32
	Zxid int64
	Err  ErrCode
}

// Encode implements Record.
func (h *ReplyHeader) Encode(w *Writer) {
	w.Int(h.Xid)
	w.Long(h.Zxid)
	w.Int(int32(h.Err))
}

// Decode implements Record.
func (h *ReplyHeader) Decode(r *Reader) {
	h.Xid = r.Int()
	h.Zxid = r.Long()
	h.Err = ErrCode(r.Int())
}

// CreateRequest is the body of create, create2 and createContainer.
type CreateRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags int32
}

// Encode implements Record.
func (c *CreateRequest) Encode(w *Writer) {
	w.String(c.Path)
	w.Buffer(c.Data)
	w.ACLs(c.ACL)
	w.Int(c.Flags)
}

// Decode implements Record.
func (c *CreateRequest) Decode(r *Reader) {
	c.Path = r.String()
	c.Data = r.Buffer()
	c.ACL = r.ACLs()
	c.Flags = r.Int()
}

// CreateTTLRequest is the body of createTTL.
type CreateTTLRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags int32
	TTL   int64
}

// Encode implements Record.
func (c *CreateTTLRequest) Encode(w *Writer) {
	w.String(c.Path)
	w.Buffer(c.Data)
	w.ACLs(c.ACL)
	w.Int(c.Flags)
	w.Long(c.TTL)
}

// Decode implements Record.
func (c *CreateTTLRequest) Decode(r *Reader) {
	c.Path = r.String()
	c.Data = r.Buffer()
	c.ACL = r.ACLs()
	c.Flags = r.Int()
	c.TTL = r.Long()
}

// CreateResponse is the reply to create.
type CreateResponse struct {
	Path string
}

// Encode implements Record.
func (c *CreateResponse) Encode(w *Writer) { w.String(c.Path) }

// Decode implements Record.
func (c *CreateResponse) Decode(r *Reader) { c.Path = r.String() }

// Create2Response is the reply to create2, createContainer and createTTL.
type Create2Response struct {
	Path string
	Stat Stat
}

// Encode implements Record.
func (c *Create2Response) Encode(w *Writer) {
	w.String(c.Path)
	c.Stat.Encode(w)
}

// Decode implements Record.
func (c *Create2Response) Decode(r *Reader) {
	c.Path = r.String()
	c.Stat.Decode(r)
}

// DeleteRequest is the body of delete. Version -1 matches any version.
type DeleteRequest struct {
	Path    string
	Version int32
}

// Encode implements Record.
func (d *DeleteRequest) Encode(w *Writer) {
	w.String(d.Path)
	w.Int(d.Version)
}

// Decode implements Record.
func (d *DeleteRequest) Decode(r *Reader) {
	d.Path = r.String()
	d.Version = r.Int()
}

// ExistsRequest is the body of exists.
type ExistsRequest struct {
	Path  string
	Watch bool
}

// Encode implements Record.
func (e *ExistsRequest) Encode(w *Writer) {
	w.String(e.Path)
	w.Bool(e.Watch)
}

// Decode implements Record.
func (e *ExistsRequest) Decode(r *Reader) {
	e.Path = r.String()
	e.Watch = r.Bool()
}

// ExistsResponse is the reply to exists when the node exists.
type ExistsResponse struct {
	Stat Stat
}

// Encode implements Record.
func (e *ExistsResponse) Encode(w *Writer) { e.Stat.Encode(w) }

// Decode implements Record.
func (e *ExistsResponse) Decode(r *Reader) { e.Stat.Decode(r) }

// GetDataRequest is the body of getData.
type GetDataRequest struct {
	Path  string
	Watch bool
}

// Encode implements Record.
func (g *GetDataRequest) Encode(w *Writer) {
	w.String(g.Path)
	w.Bool(g.Watch)
}

// Decode implements Record.
func (g *GetDataRequest) Decode(r *Reader) {
	g.Path = r.String()
	g.Watch = r.Bool()
}

// GetDataResponse is the reply to getData (and to reconfig).
type GetDataResponse struct {
	Data []byte
	Stat Stat
}

// Encode implements Record.
func (g *GetDataResponse) Encode(w *Writer) {
	w.Buffer(g.Data)
	g.Stat.Encode(w)
}

// Decode implements Record.
func (g *GetDataResponse) Decode(r *Reader) {
	g.Data = r.Buffer()
	g.Stat.Decode(r)
}

// SetDataRequest is the body of setData. Version -1 matches any version.
type SetDataRequest struct {
	Path    string
	Data    []byte
	Version int32
}

// Encode implements Record.
func (s *SetDataRequest) Encode(w *Writer) {
	w.String(s.Path)
	w.Buffer(s.Data)
	w.Int(s.Version)
}

// Decode implements Record.
func (s *SetDataRequest) Decode(r *Reader) {
	s.Path = r.String()
	s.Data = r.Buffer()
	s.Version = r.Int()
}

// SetDataResponse is the reply to setData.
type SetDataResponse struct {
	Stat Stat
}

// Encode implements Record.
func (s *SetDataResponse) Encode(w *Writer) { s.Stat.Encode(w) }

// Decode implements Record.
func (s *SetDataResponse) Decode(r *Reader) { s.Stat.Decode(r) }

// GetACLRequest is the body of getACL.
type GetACLRequest struct {
	Path string
}

// Encode implements Record.
func (g *GetACLRequest) Encode(w *Writer) { w.String(g.Path) }

// Decode implements Record.
func (g *GetACLRequest) Decode(r *Reader) { g.Path = r.String() }

// GetACLResponse is the reply to getACL.
type GetACLResponse struct {
	ACL  []ACL
	Stat Stat
}

// Encode implements Record.
func (g *GetACLResponse) Encode(w *Writer) {
	w.ACLs(g.ACL)
	g.Stat.Encode(w)
}

// Decode implements Record.
func (g *GetACLResponse) Decode(r *Reader) {
	g.ACL = r.ACLs()
	g.Stat.Decode(r)
}

// SetACLRequest is the body of setACL. Version is the expected aversion.
type SetACLRequest struct {
	Path    string
	ACL     []ACL
	Version int32
}

// Encode implements Record.
func (s *SetACLRequest) Encode(w *Writer) {
	w.String(s.Path)
	w.ACLs(s.ACL)
	w.Int(s.Version)
}

// Decode implements Record.
func (s *SetACLRequest) Decode(r *Reader) {
	s.Path = r.String()
	s.ACL = r.ACLs()
	s.Version = r.Int()
}

// SetACLResponse is the reply to setACL.
type SetACLResponse struct {
	Stat Stat
}

// Encode implements Record.
func (s *SetACLResponse) Encode(w *Writer) { s.Stat.Encode(w) }

// Decode implements Record.
func (s *SetACLResponse) Decode(r *Reader) { s.Stat.Decode(r) }

// GetChildrenRequest is the body of getChildren.
type GetChildrenRequest struct {
	Path  string
	Watch bool
}

// Encode implements Record.
func (g *GetChildrenRequest) Encode(w *Writer) {
	w.String(g.Path)
	w.Bool(g.Watch)
}

// Decode implements Record.
func (g *GetChildrenRequest) Decode(r *Reader) {
	g.Path = r.String()
	g.Watch = r.Bool()
}

// GetChildrenResponse is the reply to getChildren: child names, not paths.
type GetChildrenResponse struct {
	Children []string
}

// Encode implements Record.
func (g *GetChildrenResponse) Encode(w *Writer) { w.StringVector(g.Children) }

// Decode implements Record.
func (g *GetChildrenResponse) Decode(r *Reader) { g.Children = r.StringVector() }

// GetChildren2Request is the body of getChildren2.
type GetChildren2Request struct {
	Path  string
	Watch bool
}

// Encode implements Record.
func (g *GetChildren2Request) Encode(w *Writer) {
	w.String(g.Path)
	w.Bool(g.Watch)
}

// Decode implements Record.
func (g *GetChildren2Request) Decode(r *Reader) {
	g.Path = r.String()
	g.Watch = r.Bool()
}

// GetChildren2Response is the reply to getChildren2.
type GetChildren2Response struct {
	Children []string
	Stat     Stat
}

// Encode implements Record.
func (g *GetChildren2Response) Encode(w *Writer) {
	w.StringVector(g.Children)
	g.Stat.Encode(w)
}

// Decode implements Record.
func (g *GetChildren2Response) Decode(r *Reader) {
	g.Children = r.StringVector()
	g.Stat.Decode(r)
}

// SyncRequest is the body of sync.
type SyncRequest struct {
	Path string
}

// Encode implements Record.
func (s *SyncRequest) Encode(w *Writer) { w.String(s.Path) }

// Decode implements Record.
func (s *SyncRequest) Decode(r *Reader) { s.Path = r.String() }

// SyncResponse is the reply to sync.
type SyncResponse struct {
	Path string
}

// Encode implements Record.
func (s *SyncResponse) Encode(w *Writer) { w.String(s.Path) }

// Decode implements Record.
func (s *SyncResponse) Decode(r *Reader) { s.Path = r.String() }

// CheckVersionRequest is the body of check (only inside multi).
type CheckVersionRequest struct {
	Path    string
	Version int32
}

// Encode implements Record.
func (c *CheckVersionRequest) Encode(w *Writer) {
	w.String(c.Path)
	w.Int(c.Version)
}

// Decode implements Record.
func (c *CheckVersionRequest) Decode(r *Reader) {
	c.Path = r.String()
	c.Version = r.Int()
}

// ReconfigRequest is the body of reconfig.
type ReconfigRequest struct {
	JoiningServers string
	LeavingServers string
	NewMembers     string
	CurConfigID    int64
}

// Encode implements Record.
func (c *ReconfigRequest) Encode(w *Writer) {
	w.String(c.JoiningServers)
	w.String(c.LeavingServers)
	w.String(c.NewMembers)
	w.Long(c.CurConfigID)
}

// Decode implements Record.
func (c *ReconfigRequest) Decode(r *Reader) {
	c.JoiningServers = r.String()
	c.LeavingServers = r.String()
	c.NewMembers = r.String()
	c.CurConfigID = r.Long()
}

// MultiHeader precedes each op of a multi request and each result of a multi
// response, and terminates both with {-1, true, -1}.
type MultiHeader struct {
	Type OpCode
	Done bool
	Err  ErrCode
}

// Encode implements Record.
func (h *MultiHeader) Encode(w *Writer) {
	w.Int(int32(h.Type))
	w.Bool(h.Done)
	w.Int(int32(h.Err))
}

// Decode implements Record.
func (h *MultiHeader) Decode(r *Reader) {
	h.Type = OpCode(r.Int())
	h.Done = r.Bool()
	h.Err = ErrCode(r.Int())
}

// ErrorResponse carries an error code as a body: a failed multi result, and
// the (always 0) reply body of addWatch.
type ErrorResponse struct {
	Err ErrCode
}

// Encode implements Record.
func (e *ErrorResponse) Encode(w *Writer) { w.Int(int32(e.Err)) }

// Decode implements Record.
func (e *ErrorResponse) Decode(r *Reader) { e.Err = ErrCode(r.Int()) }

// AuthPacket is the body of an auth request (xid XidAuth). Type is always 0.
type AuthPacket struct {
	Type   int32
	Scheme string
	Auth   []byte
}

// Encode implements Record.
func (a *AuthPacket) Encode(w *Writer) {
	w.Int(a.Type)
	w.String(a.Scheme)
	w.Buffer(a.Auth)
}

// Decode implements Record.
func (a *AuthPacket) Decode(r *Reader) {
	a.Type = r.Int()
	a.Scheme = r.String()
	a.Auth = r.Buffer()
}

// SetWatches re-registers watches after a reconnect (xid XidSetWatches).
type SetWatches struct {
	RelativeZxid int64
	DataWatches  []string
	ExistWatches []string
	ChildWatches []string
}

// Encode implements Record.
func (s *SetWatches) Encode(w *Writer) {
	w.Long(s.RelativeZxid)
	w.StringVector(s.DataWatches)
	w.StringVector(s.ExistWatches)
	w.StringVector(s.ChildWatches)
}

// Decode implements Record.
func (s *SetWatches) Decode(r *Reader) {
	s.RelativeZxid = r.Long()
	s.DataWatches = r.StringVector()
	s.ExistWatches = r.StringVector()
	s.ChildWatches = r.StringVector()
}

// SetWatches2 is SetWatches with persistent watches (xid XidSetWatches).
type SetWatches2 struct {
	RelativeZxid               int64
	DataWatches                []string
	ExistWatches               []string
	ChildWatches               []string
	PersistentWatches          []string
	PersistentRecursiveWatches []string
}

// Encode implements Record.
func (s *SetWatches2) Encode(w *Writer) {
	w.Long(s.RelativeZxid)
	w.StringVector(s.DataWatches)
	w.StringVector(s.ExistWatches)
	w.StringVector(s.ChildWatches)
	w.StringVector(s.PersistentWatches)
	w.StringVector(s.PersistentRecursiveWatches)
}

// Decode implements Record.
func (s *SetWatches2) Decode(r *Reader) {
	s.RelativeZxid = r.Long()
	s.DataWatches = r.StringVector()
	s.ExistWatches = r.StringVector()
	s.ChildWatches = r.StringVector()
	s.PersistentWatches = r.StringVector()
	s.PersistentRecursiveWatches = r.StringVector()
}

// AddWatchRequest is the body of addWatch. Mode is AddWatchModePersistent or
// AddWatchModePersistentRecursive.
type AddWatchRequest struct {
	Path string
	Mode int32
}

// Encode implements Record.
func (a *AddWatchRequest) Encode(w *Writer) {
	w.String(a.Path)
	w.Int(a.Mode)
}

// Decode implements Record.
func (a *AddWatchRequest) Decode(r *Reader) {
	a.Path = r.String()
	a.Mode = r.Int()
}

// CheckWatchesRequest is the body of checkWatches. Type is a WatcherType*.
type CheckWatchesRequest struct {
	Path string
	Type int32
}

// Encode implements Record.
func (c *CheckWatchesRequest) Encode(w *Writer) {
	w.String(c.Path)
	w.Int(c.Type)
}

// Decode implements Record.
func (c *CheckWatchesRequest) Decode(r *Reader) {
	c.Path = r.String()
	c.Type = r.Int()
}

// RemoveWatchesRequest is the body of removeWatches. Type is a WatcherType*.
type RemoveWatchesRequest struct {
	Path string
	Type int32
}

// Encode implements Record.
func (c *RemoveWatchesRequest) Encode(w *Writer) {
	w.String(c.Path)
	w.Int(c.Type)
}

// Decode implements Record.
func (c *RemoveWatchesRequest) Decode(r *Reader) {
	c.Path = r.String()
	c.Type = r.Int()
}

// GetEphemeralsRequest is the body of getEphemerals.
type GetEphemeralsRequest struct {
	PrefixPath string
}

// Encode implements Record.
func (g *GetEphemeralsRequest) Encode(w *Writer) { w.String(g.PrefixPath) }

// Decode implements Record.
func (g *GetEphemeralsRequest) Decode(r *Reader) { g.PrefixPath = r.String() }

// GetEphemeralsResponse is the reply to getEphemerals.
type GetEphemeralsResponse struct {
	Ephemerals []string
}

// Encode implements Record.
func (g *GetEphemeralsResponse) Encode(w *Writer) { w.StringVector(g.Ephemerals) }

// Decode implements Record.
func (g *GetEphemeralsResponse) Decode(r *Reader) { g.Ephemerals = r.StringVector() }

// GetAllChildrenNumberRequest is the body of getAllChildrenNumber.
type GetAllChildrenNumberRequest struct {
	Path string
}

// Encode implements Record.
func (g *GetAllChildrenNumberRequest) Encode(w *Writer) { w.String(g.Path) }

// Decode implements Record.
func (g *GetAllChildrenNumberRequest) Decode(r *Reader) { g.Path = r.String() }

// GetAllChildrenNumberResponse is the reply to getAllChildrenNumber.
type GetAllChildrenNumberResponse struct {
	TotalNumber int32
}

// Encode implements Record.
func (g *GetAllChildrenNumberResponse) Encode(w *Writer) { w.Int(g.TotalNumber) }

// Decode implements Record.
func (g *GetAllChildrenNumberResponse) Decode(r *Reader) { g.TotalNumber = r.Int() }

// ClientInfo is one authenticated identity in a WhoAmIResponse.
type ClientInfo struct {
	AuthScheme string
	User       string
}

// Encode implements Record.
func (c *ClientInfo) Encode(w *Writer) {
	w.String(c.AuthScheme)
	w.String(c.User)
}

// Decode implements Record.
func (c *ClientInfo) Decode(r *Reader) {
	c.AuthScheme = r.String()
	c.User = r.String()
}

// WhoAmIResponse is the reply to whoAmI.
type WhoAmIResponse struct {
	ClientInfo []ClientInfo
}

// Encode implements Record.
func (wr *WhoAmIResponse) Encode(w *Writer) {
	if wr.ClientInfo == nil {
		w.Int(-1)
		return
	}
	w.Int(int32(len(wr.ClientInfo)))
	for i := range wr.ClientInfo {
		wr.ClientInfo[i].Encode(w)
	}
}

// Decode implements Record.
func (wr *WhoAmIResponse) Decode(r *Reader) {
	wr.ClientInfo = nil
	n := r.length("vector<ClientInfo>", 8)
	if n < 0 {
		return
	}
	v := make([]ClientInfo, n)
	for i := 0; i < n && r.err == nil; i++ {
		v[i].Decode(r)
	}
	if r.err == nil {
		wr.ClientInfo = v
	}
}

// WatcherEvent is the body of a notification (xid XidNotification).
type WatcherEvent struct {
	Type  EventType
	State State
	Path  string
}

// Encode implements Record.
func (e *WatcherEvent) Encode(w *Writer) {
	w.Int(int32(e.Type))
	w.Int(int32(e.State))
	w.String(e.Path)
}

// Decode implements Record.
func (e *WatcherEvent) Decode(r *Reader) {
	e.Type = EventType(r.Int())
	e.State = State(r.Int())
	e.Path = r.String()
}

// GetSASLRequest is the body of a sasl request (client token).
type GetSASLRequest struct {
	Token []byte
}

// Encode implements Record.
func (g *GetSASLRequest) Encode(w *Writer) { w.Buffer(g.Token) }

// Decode implements Record.
func (g *GetSASLRequest) Decode(r *Reader) { g.Token = r.Buffer() }

// SetSASLResponse is the reply to a sasl request (server token).
type SetSASLResponse struct {
	Token []byte
}

// Encode implements Record.
func (s *SetSASLResponse) Encode(w *Writer) { w.Buffer(s.Token) }

// Decode implements Record.
func (s *SetSASLResponse) Decode(r *Reader) { s.Token = r.Buffer() }

// DeleteContainerRequest is the body of deleteContainer, an op that only the
// server issues (ContainerManager). ZooKeeper encodes it as the bare UTF-8 path
// with no length prefix, so Decode consumes the rest of the input.
type DeleteContainerRequest struct {
	Path string
}

// Encode implements Record.
func (d *DeleteContainerRequest) Encode(w *Writer) { w.Raw([]byte(d.Path)) }

// Decode implements Record.
func (d *DeleteContainerRequest) Decode(r *Reader) { d.Path = string(r.Rest()) }

// Empty is the body of ops that have none (ping, closeSession, the whoAmI
// request, and replies such as delete's that are header only).
type Empty struct{}

// Encode implements Record; it writes nothing.
func (*Empty) Encode(*Writer) {}

// Decode implements Record; it reads nothing.
func (*Empty) Decode(*Reader) {}
