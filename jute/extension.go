package jute

// zkraft's resumable-watch extension. Standard ZooKeeper clients never send
// these ops and so never see the replies or the event frames.
//
//	watchFrom (1000): WatchFromRequest -> WatchFromResponse, or
//	                  ErrHistoryCompacted with a CompactedResponse body
//	unwatchFrom (1001): UnwatchFromRequest -> header only
//	event frames: ReplyHeader{XidResumableEvents, zxid, 0} + ResumableEvents,
//	              one frame per transaction (all events of a multi together)

// XidResumableEvents marks an event frame of a resumable watch.
const XidResumableEvents int32 = -20

// Watch modes of WatchFromRequest.
const (
	// WatchModeNode watches one path: its own changes and its children's
	// creation and deletion (NodeChildrenChanged).
	WatchModeNode int32 = 0
	// WatchModeSubtree watches a path and every descendant, as a persistent
	// recursive watch does (no NodeChildrenChanged).
	WatchModeSubtree int32 = 1
)

// WatchFromRequest asks for every change under Path with zxid > FromZxid,
// then the live ones.
type WatchFromRequest struct {
	Path     string
	FromZxid int64
	Mode     int32
}

func (r *WatchFromRequest) Encode(w *Writer) {
	w.String(r.Path)
	w.Long(r.FromZxid)
	w.Int(r.Mode)
}

func (r *WatchFromRequest) Decode(rd *Reader) {
	r.Path = rd.String()
	r.FromZxid = rd.Long()
	r.Mode = rd.Int()
}

// WatchFromResponse names the watch and the zxid up to which the replay
// runs; live events follow it.
type WatchFromResponse struct {
	WatchID int64
	Zxid    int64
}

func (r *WatchFromResponse) Encode(w *Writer) {
	w.Long(r.WatchID)
	w.Long(r.Zxid)
}

func (r *WatchFromResponse) Decode(rd *Reader) {
	r.WatchID = rd.Long()
	r.Zxid = rd.Long()
}

// CompactedResponse is the body of ErrHistoryCompacted: every change with
// zxid > OldestZxid is still available.
type CompactedResponse struct {
	OldestZxid int64
}

func (r *CompactedResponse) Encode(w *Writer)  { w.Long(r.OldestZxid) }
func (r *CompactedResponse) Decode(rd *Reader) { r.OldestZxid = rd.Long() }

// UnwatchFromRequest ends a resumable watch.
type UnwatchFromRequest struct {
	WatchID int64
}

func (r *UnwatchFromRequest) Encode(w *Writer)  { w.Long(r.WatchID) }
func (r *UnwatchFromRequest) Decode(rd *Reader) { r.WatchID = rd.Long() }

// ResumableEvent is one change in a ResumableEvents frame.
type ResumableEvent struct {
	Type EventType
	Path string
}

// ResumableEvents carries the events of one transaction for one watch.
type ResumableEvents struct {
	WatchID int64
	Zxid    int64
	Events  []ResumableEvent
}

func (r *ResumableEvents) Encode(w *Writer) {
	w.Long(r.WatchID)
	w.Long(r.Zxid)
	w.Int(int32(len(r.Events)))
	for _, e := range r.Events {
		w.Int(int32(e.Type))
		w.String(e.Path)
	}
}

func (r *ResumableEvents) Decode(rd *Reader) {
	r.WatchID = rd.Long()
	r.Zxid = rd.Long()
	n := rd.Int()
	if n < 0 {
		rd.Fail(ErrBadLength)
		return
	}
	if int(n) > rd.Remaining()/8 {
		rd.Fail(ErrShortBuffer) // each event needs at least 8 bytes
		return
	}
	r.Events = make([]ResumableEvent, 0, n)
	for i := int32(0); i < n && rd.Err() == nil; i++ {
		r.Events = append(r.Events, ResumableEvent{Type: EventType(rd.Int()), Path: rd.String()})
	}
}

var (
	_ Record = (*WatchFromRequest)(nil)
	_ Record = (*WatchFromResponse)(nil)
	_ Record = (*CompactedResponse)(nil)
	_ Record = (*UnwatchFromRequest)(nil)
	_ Record = (*ResumableEvents)(nil)
)
