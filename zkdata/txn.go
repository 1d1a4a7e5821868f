package zkdata

import (
	"errors"
	"fmt"

	"github.com/zkraft/zkraft/jute"
)

// The transaction records of ZooKeeper's txn log (zookeeper.jute, module
// org.apache.zookeeper.txn). Each implements jute.Record.

// TxnHeader heads every logged transaction.
type TxnHeader struct {
	ClientID int64 // the session
	Cxid     int32
	Zxid     int64
	Time     int64 // wall-clock ms
	Type     jute.OpCode
}

func (h *TxnHeader) Encode(w *jute.Writer) {
	w.Long(h.ClientID)
	w.Int(h.Cxid)
	w.Long(h.Zxid)
	w.Long(h.Time)
	w.Int(int32(h.Type))
}

func (h *TxnHeader) Decode(r *jute.Reader) {
	h.ClientID = r.Long()
	h.Cxid = r.Int()
	h.Zxid = r.Long()
	h.Time = r.Long()
	h.Type = jute.OpCode(r.Int())
}

// TxnDigest is the tree digest after a transaction (3.6+).
type TxnDigest struct {
	Version    int32
	TreeDigest int64
}

func (d *TxnDigest) Encode(w *jute.Writer) { w.Int(d.Version); w.Long(d.TreeDigest) }
func (d *TxnDigest) Decode(r *jute.Reader) { d.Version = r.Int(); d.TreeDigest = r.Long() }

// CreateTxn is create, create2 and, in a multi, create. A ParentCVersion
// of -1 means "the parent's + 1" (very old logs).
type CreateTxn struct {
	Path           string
	Data           []byte
	ACL            []jute.ACL
	Ephemeral      bool
	ParentCVersion int32
}

func (t *CreateTxn) Encode(w *jute.Writer) {
	w.String(t.Path)
	w.Buffer(t.Data)
	w.ACLs(t.ACL)
	w.Bool(t.Ephemeral)
	w.Int(t.ParentCVersion)
}

func (t *CreateTxn) Decode(r *jute.Reader) {
	t.Path = r.String()
	t.Data = r.Buffer()
	t.ACL = r.ACLs()
	t.Ephemeral = r.Bool()
	t.ParentCVersion = r.Int()
}

// createTxnV0 is CreateTxn before parentCVersion existed.
type createTxnV0 struct{ CreateTxn }

func (t *createTxnV0) Decode(r *jute.Reader) {
	t.Path = r.String()
	t.Data = r.Buffer()
	t.ACL = r.ACLs()
	t.Ephemeral = r.Bool()
	t.ParentCVersion = -1
}

// CreateTTLTxn is createTTL.
type CreateTTLTxn struct {
	Path           string
	Data           []byte
	ACL            []jute.ACL
	ParentCVersion int32
	TTL            int64
}

func (t *CreateTTLTxn) Encode(w *jute.Writer) {
	w.String(t.Path)
	w.Buffer(t.Data)
	w.ACLs(t.ACL)
	w.Int(t.ParentCVersion)
	w.Long(t.TTL)
}

func (t *CreateTTLTxn) Decode(r *jute.Reader) {
	t.Path = r.String()
	t.Data = r.Buffer()
	t.ACL = r.ACLs()
	t.ParentCVersion = r.Int()
	t.TTL = r.Long()
}

// CreateContainerTxn is createContainer.
type CreateContainerTxn struct {
	Path           string
	Data           []byte
	ACL            []jute.ACL
	ParentCVersion int32
}

func (t *CreateContainerTxn) Encode(w *jute.Writer) {
	w.String(t.Path)
	w.Buffer(t.Data)
	w.ACLs(t.ACL)
	w.Int(t.ParentCVersion)
}

func (t *CreateContainerTxn) Decode(r *jute.Reader) {
	t.Path = r.String()
	t.Data = r.Buffer()
	t.ACL = r.ACLs()
	t.ParentCVersion = r.Int()
}

// DeleteTxn is delete and deleteContainer.
type DeleteTxn struct{ Path string }

func (t *DeleteTxn) Encode(w *jute.Writer) { w.String(t.Path) }
func (t *DeleteTxn) Decode(r *jute.Reader) { t.Path = r.String() }

// SetDataTxn is setData and reconfig (on /zookeeper/config). Version is
// the new version.
type SetDataTxn struct {
	Path    string
	Data    []byte
	Version int32
}

func (t *SetDataTxn) Encode(w *jute.Writer) { w.String(t.Path); w.Buffer(t.Data); w.Int(t.Version) }
func (t *SetDataTxn) Decode(r *jute.Reader) {
	t.Path = r.String()
	t.Data = r.Buffer()
	t.Version = r.Int()
}

// SetACLTxn is setACL. Version is the new aversion.
type SetACLTxn struct {
	Path    string
	ACL     []jute.ACL
	Version int32
}

func (t *SetACLTxn) Encode(w *jute.Writer) { w.String(t.Path); w.ACLs(t.ACL); w.Int(t.Version) }
func (t *SetACLTxn) Decode(r *jute.Reader) {
	t.Path = r.String()
	t.ACL = r.ACLs()
	t.Version = r.Int()
}

// CheckVersionTxn is check, inside a multi only. It changes nothing.
type CheckVersionTxn struct {
	Path    string
	Version int32
}

func (t *CheckVersionTxn) Encode(w *jute.Writer) { w.String(t.Path); w.Int(t.Version) }
func (t *CheckVersionTxn) Decode(r *jute.Reader) { t.Path = r.String(); t.Version = r.Int() }

// CreateSessionTxn is createSession; the header's ClientID is the session.
type CreateSessionTxn struct{ TimeOut int32 }

func (t *CreateSessionTxn) Encode(w *jute.Writer) { w.Int(t.TimeOut) }
func (t *CreateSessionTxn) Decode(r *jute.Reader) { t.TimeOut = r.Int() }

// CloseSessionTxn is closeSession: the ephemerals to delete, in order.
// Logs older than 3.6 have no record (a nil *CloseSessionTxn).
type CloseSessionTxn struct{ Paths []string }

func (t *CloseSessionTxn) Encode(w *jute.Writer) { w.StringVector(t.Paths) }
func (t *CloseSessionTxn) Decode(r *jute.Reader) { t.Paths = r.StringVector() }

// ErrorTxn is a failed write, logged so that it consumes its zxid.
type ErrorTxn struct{ Err jute.ErrCode }

func (t *ErrorTxn) Encode(w *jute.Writer) { w.Int(int32(t.Err)) }
func (t *ErrorTxn) Decode(r *jute.Reader) { t.Err = jute.ErrCode(r.Int()) }

// SubTxn is one transaction of a multi. Record is nil, and Err says why,
// when ZooKeeper could not have applied it (an op a multi cannot hold, or
// bytes that do not decode).
type SubTxn struct {
	Type   jute.OpCode
	Record jute.Record
	Err    error
}

// MultiTxn is multi: sub-transactions sharing the header's zxid. If any is
// an ErrorTxn the multi failed and nothing of it applies.
type MultiTxn struct{ Txns []SubTxn }

func (t *MultiTxn) Encode(w *jute.Writer) {
	w.Int(int32(len(t.Txns)))
	for _, s := range t.Txns {
		w.Int(int32(s.Type))
		if s.Record == nil {
			w.Buffer([]byte{})
			continue
		}
		w.Buffer(jute.Marshal(s.Record))
	}
}

func (t *MultiTxn) Decode(r *jute.Reader) {
	n := r.Int()
	if r.Err() != nil {
		return
	}
	if n < 0 || int(n)*8 > r.Remaining() {
		r.Fail(fmt.Errorf("%w: multi of %d transactions in %d bytes", jute.ErrBadLength, n, r.Remaining()))
		return
	}
	t.Txns = make([]SubTxn, 0, n)
	for i := int32(0); i < n && r.Err() == nil; i++ {
		typ := jute.OpCode(r.Int())
		data := r.Buffer()
		if r.Err() != nil {
			return
		}
		s := SubTxn{Type: typ}
		s.Record = newSubRecord(typ)
		if s.Record == nil {
			s.Err = fmt.Errorf("%w: a multi cannot hold %v", ErrCorrupt, typ)
		} else if err := jute.Unmarshal(data, s.Record); err != nil {
			s.Record, s.Err = nil, fmt.Errorf("%w: multi sub-transaction %v: %v", ErrCorrupt, typ, err)
		}
		t.Txns = append(t.Txns, s)
	}
}

// failed reports whether the multi failed: one of its transactions is an
// ErrorTxn.
func (t *MultiTxn) failed() bool {
	for _, s := range t.Txns {
		if s.Type == jute.OpError {
			return true
		}
	}
	return false
}

// newSubRecord is the record of a multi sub-transaction type, as
// DataTree.processTxn reads them; nil for types a multi cannot hold.
func newSubRecord(t jute.OpCode) jute.Record {
	switch t {
	case jute.OpCreate:
		return new(CreateTxn)
	case jute.OpCreateTTL:
		return new(CreateTTLTxn)
	case jute.OpCreateContainer:
		return new(CreateContainerTxn)
	case jute.OpDelete, jute.OpDeleteContainer:
		return new(DeleteTxn)
	case jute.OpSetData:
		return new(SetDataTxn)
	case jute.OpError:
		return new(ErrorTxn)
	case jute.OpCheck:
		return new(CheckVersionTxn)
	}
	return nil
}

// newTxnRecord is the record of a top-level transaction type
// (SerializeUtils.deserializeTxn); nil, false for unknown types.
func newTxnRecord(t jute.OpCode) (jute.Record, bool) {
	switch t {
	case jute.OpCreateSession:
		return new(CreateSessionTxn), true
	case jute.OpCloseSession:
		return new(CloseSessionTxn), true
	case jute.OpCreate, jute.OpCreate2:
		return new(CreateTxn), true
	case jute.OpCreateTTL:
		return new(CreateTTLTxn), true
	case jute.OpCreateContainer:
		return new(CreateContainerTxn), true
	case jute.OpDelete, jute.OpDeleteContainer:
		return new(DeleteTxn), true
	case jute.OpReconfig, jute.OpSetData:
		return new(SetDataTxn), true
	case jute.OpSetACL:
		return new(SetACLTxn), true
	case jute.OpError:
		return new(ErrorTxn), true
	case jute.OpMulti:
		return new(MultiTxn), true
	}
	return nil, false
}

// Txn is one entry of a transaction log.
type Txn struct {
	Header TxnHeader
	// Record is the transaction's record, or nil for a closeSession from
	// a log older than 3.6.
	Record jute.Record
	// Digest is the tree digest after this transaction, or nil.
	Digest *TxnDigest
}

// decodeTxn decodes an entry's bytes as SerializeUtils.deserializeTxn does.
func decodeTxn(b []byte) (*Txn, error) {
	r := jute.NewReader(b)
	t := &Txn{}
	t.Header.Decode(r)
	if r.Err() != nil {
		return nil, r.Err()
	}
	start := r.Offset()
	rec, ok := newTxnRecord(t.Header.Type)
	if !ok {
		return nil, fmt.Errorf("%w: transaction type %v", ErrCorrupt, t.Header.Type)
	}
	switch {
	case t.Header.Type == jute.OpCloseSession && r.Remaining() == 0:
		rec = nil
	default:
		rec.Decode(r)
	}
	if err := r.Err(); err != nil {
		switch {
		case t.Header.Type == jute.OpCreate && errors.Is(err, jute.ErrShortBuffer):
			// Perhaps a CreateTxn from before parentCVersion.
			r = jute.NewReader(b[start:])
			v0 := new(createTxnV0)
			v0.Decode(r)
			if r.Err() != nil {
				return nil, r.Err()
			}
			c := v0.CreateTxn
			rec = &c
		case t.Header.Type == jute.OpCloseSession && errors.Is(err, jute.ErrShortBuffer):
			rec = nil
		default:
			return nil, err
		}
	}
	t.Record = rec
	if r.Err() == nil && r.Remaining() >= 12 {
		t.Digest = new(TxnDigest)
		t.Digest.Decode(r)
	}
	return t, nil
}

// encodeTxn is the entry bytes of t (the inverse of decodeTxn).
func encodeTxn(t *Txn) []byte {
	w := jute.NewWriter(64)
	t.Header.Encode(w)
	if t.Record != nil {
		t.Record.Encode(w)
	}
	if t.Digest != nil {
		t.Digest.Encode(w)
	}
	return w.Bytes()
}
