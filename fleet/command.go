package fleet

import (
	"fmt"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/zkraft/zkraft/jute"
)

// Kind is the kind of a system-shard command: one per command type below
// (AddMember is KindAddMember, and so on).
type Kind int32

const (
	KindAddMember     Kind = 1
	KindMarkLeaving   Kind = 2
	KindRemoveMember  Kind = 3
	KindCreateCell    Kind = 4
	KindActivateCell  Kind = 5
	KindBeginMove     Kind = 6
	KindFinishMove    Kind = 7
	KindAbortMove     Kind = 8
	KindSetLimits     Kind = 9
	KindDeleteCell    Kind = 10
	KindPurgeCell     Kind = 11
	KindImportDefault Kind = 12
	KindImportCell    Kind = 13
	KindReleaseCell   Kind = 14
)

// Command versions. An entry starts with the version of its layout and
// its kind. A kind's layout never changes within a version: adding a kind
// or a field makes a new version, and the encoder writes the lowest
// version that holds the command, so that a fleet in the middle of an
// upgrade keeps proposing what its older members apply.
//
// A replica given a version above CommandVersion cannot know what the
// newer replicas that understand it did with it: Update stops with
// ErrNewerCommand rather than diverge (upgrade the binary; it replays the
// entry). Everything else a replica cannot apply is refused the same way
// by every replica that knows the version, so it is a result
// (CodeMalformed, CodeUnknownKind), not a stop.
//
// Version 2 added importCell and releaseCell.
const CommandVersion = 2

// kinds is the command registry: one row per kind, its name, the version
// that introduced its layout and a zero value to decode into.
var kinds = []struct {
	kind    Kind
	name    string
	version int32
	zero    func() Command
}{
	{KindAddMember, "addMember", 1, func() Command { return new(AddMember) }},
	{KindMarkLeaving, "markLeaving", 1, func() Command { return new(MarkLeaving) }},
	{KindRemoveMember, "removeMember", 1, func() Command { return new(RemoveMember) }},
	{KindCreateCell, "createCell", 1, func() Command { return new(CreateCell) }},
	{KindActivateCell, "activateCell", 1, func() Command { return new(ActivateCell) }},
	{KindBeginMove, "beginMove", 1, func() Command { return new(BeginMove) }},
	{KindFinishMove, "finishMove", 1, func() Command { return new(FinishMove) }},
	{KindAbortMove, "abortMove", 1, func() Command { return new(AbortMove) }},
	{KindSetLimits, "setLimits", 1, func() Command { return new(SetLimits) }},
	{KindDeleteCell, "deleteCell", 1, func() Command { return new(DeleteCell) }},
	{KindPurgeCell, "purgeCell", 1, func() Command { return new(PurgeCell) }},
	{KindImportDefault, "importDefault", 1, func() Command { return new(ImportDefault) }},
	{KindImportCell, "importCell", 2, func() Command { return new(ImportCell) }},
	{KindReleaseCell, "releaseCell", 2, func() Command { return new(ReleaseCell) }},
}

func (k Kind) String() string {
	for _, r := range kinds {
		if r.kind == k {
			return r.name
		}
	}
	return fmt.Sprintf("Kind(%d)", int32(k))
}

// Command is one change to the map. The concrete types below are the
// commands; Encode turns one into the bytes to propose.
type Command interface {
	Kind() Kind
	encode(w *jute.Writer)
	decode(r *jute.Reader)
}

// MemberSpec is a member as a command names it.
type MemberSpec struct {
	ID         uint64
	RaftAddr   string
	ClientHost string
}

func (s *MemberSpec) encode(w *jute.Writer) {
	w.Long(int64(s.ID))
	w.String(s.RaftAddr)
	w.String(s.ClientHost)
}

func (s *MemberSpec) decode(r *jute.Reader) {
	s.ID = uint64(r.Long())
	s.RaftAddr = r.String()
	s.ClientHost = r.String()
}

// AddMember adds a member to the fleet, active. Adding a member that is
// already there with the same addresses changes nothing (a retry).
type AddMember struct{ Member MemberSpec }

// MarkLeaving marks a member leaving: no new replica is placed on it.
type MarkLeaving struct {
	ID     uint64
	Expect int64
}

// RemoveMember takes a leaving member out of the map; refused while it
// hosts a replica of any cell.
type RemoveMember struct {
	ID     uint64
	Expect int64
}

// CreateCell adds a cell (state creating) with a newly allocated shard id.
// Creating a cell that exists with the same placement, ports and limits
// changes nothing (a retry).
type CreateCell struct {
	Name       string
	Placement  Placement
	ClientPort uint16
	TLSPort    uint16
	Limits     Limits
}

// ImportCell adds a cell as CreateCell does, but in state importing: no
// member starts its replicas, so that `zkraft import --cell` can fill each
// member's replica offline from a ZooKeeper data directory; ReleaseCell
// then lets the members start them. Its layout is CreateCell's.
type ImportCell CreateCell

// ReleaseCell makes an importing cell creating: its members start their
// replicas (from the stores the import wrote) and its leader's member
// activates it.
type ReleaseCell struct {
	Name   string
	Expect int64
}

// ActivateCell marks a creating cell active: its shard is running.
type ActivateCell struct {
	Name   string
	Expect int64
}

// BeginMove starts moving an active cell to Target: members of Target new
// to the cell get replica ids now, before any of them starts a replica.
type BeginMove struct {
	Name   string
	Expect int64
	Target Placement
}

// FinishMove ends a move: the placement becomes the target.
type FinishMove struct {
	Name   string
	Expect int64
}

// AbortMove ends a move where it started: the placement stays; the
// replica ids given to the target's new members are retired.
type AbortMove struct {
	Name   string
	Expect int64
}

// SetLimits replaces a cell's quotas.
type SetLimits struct {
	Name   string
	Expect int64
	Limits Limits
}

// DeleteCell starts deleting a cell: members stop serving it and remove
// their replicas. Refused unless Force, or Empty attests (from the cell's
// own shard) that it holds no data; see docs/cells.md for how the server
// reads it.
type DeleteCell struct {
	Name   string
	Expect int64
	Force  bool
	// Empty is the caller's attestation; nil when it has none.
	Empty *Emptiness
}

// PurgeCell removes a deleting cell from the map once its replicas are
// gone: its name and ports are free again; its shard id never is.
type PurgeCell struct {
	Name   string
	Expect int64
}

// ImportDefault bootstraps the map from today's single-cell configuration:
// the members of zoo.cfg and the default cell on ShardID, active, each
// member's replica id its member id (as today). Every member may propose
// it at start: once the default cell is imported, it changes nothing if
// ShardID is the default cell's (the map owns the cell from then on,
// whatever zoo.cfg says) and is refused if not.
type ImportDefault struct {
	ShardID    uint64
	Members    []MemberSpec
	Placement  Placement
	ClientPort uint16
	TLSPort    uint16
}

func (*AddMember) Kind() Kind     { return KindAddMember }
func (*MarkLeaving) Kind() Kind   { return KindMarkLeaving }
func (*RemoveMember) Kind() Kind  { return KindRemoveMember }
func (*CreateCell) Kind() Kind    { return KindCreateCell }
func (*ActivateCell) Kind() Kind  { return KindActivateCell }
func (*BeginMove) Kind() Kind     { return KindBeginMove }
func (*FinishMove) Kind() Kind    { return KindFinishMove }
func (*AbortMove) Kind() Kind     { return KindAbortMove }
func (*SetLimits) Kind() Kind     { return KindSetLimits }
func (*DeleteCell) Kind() Kind    { return KindDeleteCell }
func (*PurgeCell) Kind() Kind     { return KindPurgeCell }
func (*ImportDefault) Kind() Kind { return KindImportDefault }
func (*ImportCell) Kind() Kind    { return KindImportCell }
func (*ReleaseCell) Kind() Kind   { return KindReleaseCell }

func (c *AddMember) encode(w *jute.Writer) { c.Member.encode(w) }
func (c *AddMember) decode(r *jute.Reader) { c.Member.decode(r) }

func (c *MarkLeaving) encode(w *jute.Writer) { w.Long(int64(c.ID)); w.Long(c.Expect) }
func (c *MarkLeaving) decode(r *jute.Reader) { c.ID = uint64(r.Long()); c.Expect = r.Long() }

func (c *RemoveMember) encode(w *jute.Writer) { w.Long(int64(c.ID)); w.Long(c.Expect) }
func (c *RemoveMember) decode(r *jute.Reader) { c.ID = uint64(r.Long()); c.Expect = r.Long() }

func (c *CreateCell) encode(w *jute.Writer) {
	w.String(c.Name)
	encodePlacement(w, c.Placement)
	w.Int(int32(c.ClientPort))
	w.Int(int32(c.TLSPort))
	encodeLimits(w, c.Limits)
}

func (c *CreateCell) decode(r *jute.Reader) {
	c.Name = r.String()
	c.Placement = decodePlacement(r)
	c.ClientPort = decodePort(r)
	c.TLSPort = decodePort(r)
	c.Limits = decodeLimits(r)
}

func (c *ImportCell) encode(w *jute.Writer) { (*CreateCell)(c).encode(w) }
func (c *ImportCell) decode(r *jute.Reader) { (*CreateCell)(c).decode(r) }

func (c *ReleaseCell) encode(w *jute.Writer) { w.String(c.Name); w.Long(c.Expect) }
func (c *ReleaseCell) decode(r *jute.Reader) { c.Name = r.String(); c.Expect = r.Long() }

func (c *ActivateCell) encode(w *jute.Writer) { w.String(c.Name); w.Long(c.Expect) }
func (c *ActivateCell) decode(r *jute.Reader) { c.Name = r.String(); c.Expect = r.Long() }

func (c *BeginMove) encode(w *jute.Writer) {
	w.String(c.Name)
	w.Long(c.Expect)
	encodePlacement(w, c.Target)
}

func (c *BeginMove) decode(r *jute.Reader) {
	c.Name = r.String()
	c.Expect = r.Long()
	c.Target = decodePlacement(r)
}

func (c *FinishMove) encode(w *jute.Writer) { w.String(c.Name); w.Long(c.Expect) }
func (c *FinishMove) decode(r *jute.Reader) { c.Name = r.String(); c.Expect = r.Long() }

func (c *AbortMove) encode(w *jute.Writer) { w.String(c.Name); w.Long(c.Expect) }
func (c *AbortMove) decode(r *jute.Reader) { c.Name = r.String(); c.Expect = r.Long() }

func (c *SetLimits) encode(w *jute.Writer) {
	w.String(c.Name)
	w.Long(c.Expect)
	encodeLimits(w, c.Limits)
}

func (c *SetLimits) decode(r *jute.Reader) {
	c.Name = r.String()
	c.Expect = r.Long()
	c.Limits = decodeLimits(r)
}

func (c *DeleteCell) encode(w *jute.Writer) {
	w.String(c.Name)
	w.Long(c.Expect)
	w.Bool(c.Force)
	w.Bool(c.Empty != nil)
	if c.Empty != nil {
		encodeEmptiness(w, *c.Empty)
	}
}

func (c *DeleteCell) decode(r *jute.Reader) {
	c.Name = r.String()
	c.Expect = r.Long()
	c.Force = r.Bool()
	if r.Bool() {
		e := decodeEmptiness(r)
		c.Empty = &e
	}
}

func (c *PurgeCell) encode(w *jute.Writer) { w.String(c.Name); w.Long(c.Expect) }
func (c *PurgeCell) decode(r *jute.Reader) { c.Name = r.String(); c.Expect = r.Long() }

func (c *ImportDefault) encode(w *jute.Writer) {
	w.Long(int64(c.ShardID))
	w.Int(int32(len(c.Members)))
	for i := range c.Members {
		c.Members[i].encode(w)
	}
	encodePlacement(w, c.Placement)
	w.Int(int32(c.ClientPort))
	w.Int(int32(c.TLSPort))
}

func (c *ImportDefault) decode(r *jute.Reader) {
	c.ShardID = uint64(r.Long())
	// A member spec is at least 16 bytes (an id and two empty strings).
	n := count(r, 16)
	c.Members = make([]MemberSpec, n)
	for i := range c.Members {
		c.Members[i].decode(r)
	}
	c.Placement = decodePlacement(r)
	c.ClientPort = decodePort(r)
	c.TLSPort = decodePort(r)
}

func encodePlacement(w *jute.Writer, p Placement) {
	for _, ids := range [][]uint64{p.Voters, p.Observers} {
		w.Int(int32(len(ids)))
		for _, id := range ids {
			w.Long(int64(id))
		}
	}
}

func decodePlacement(r *jute.Reader) Placement {
	var p Placement
	for _, ids := range []*[]uint64{&p.Voters, &p.Observers} {
		n := count(r, 8)
		for range n {
			*ids = append(*ids, uint64(r.Long()))
		}
	}
	return p
}

func encodeLimits(w *jute.Writer, l Limits) {
	w.Long(l.MaxZnodes)
	w.Long(l.MaxDataBytes)
	w.Long(l.MaxSessions)
	w.Long(l.MaxWatches)
	w.Long(l.MaxRequestRate)
}

func decodeLimits(r *jute.Reader) Limits {
	return Limits{MaxZnodes: r.Long(), MaxDataBytes: r.Long(), MaxSessions: r.Long(), MaxWatches: r.Long(), MaxRequestRate: r.Long()}
}

func encodeEmptiness(w *jute.Writer, e Emptiness) {
	w.Long(int64(e.ShardID))
	w.Long(e.Zxid)
	w.Long(e.Znodes)
	w.Long(e.Sessions)
}

func decodeEmptiness(r *jute.Reader) Emptiness {
	return Emptiness{ShardID: uint64(r.Long()), Zxid: r.Long(), Znodes: r.Long(), Sessions: r.Long()}
}

// decodePort reads a port, failing r on a value outside 0..65535.
func decodePort(r *jute.Reader) uint16 {
	v := r.Int()
	if v < 0 || v > 0xffff {
		r.Fail(fmt.Errorf("%w: port %d", errMalformed, v))
		return 0
	}
	return uint16(v)
}

// count reads a list length, failing r on one the rest of the input cannot
// hold at minElem bytes an element.
func count(r *jute.Reader, minElem int) int {
	n := r.Int()
	if r.Err() != nil {
		return 0
	}
	if n < 0 || int64(n)*int64(minElem) > int64(r.Remaining()) {
		r.Fail(fmt.Errorf("%w: list of %d at %d bytes each in %d bytes", errMalformed, n, minElem, r.Remaining()))
		return 0
	}
	return int(n)
}

// Encode returns the bytes to propose for c. now is the proposer's wall
// time in ms: the state machine reads no clock, so the time a cell or
// member records travels in the command.
func Encode(c Command, now int64) []byte {
	w := jute.NewWriter(64)
	w.Int(versionOf(c.Kind()))
	w.Int(int32(c.Kind()))
	w.Long(now)
	c.encode(w)
	return w.Bytes()
}

func versionOf(k Kind) int32 {
	for _, r := range kinds {
		if r.kind == k {
			return r.version
		}
	}
	return CommandVersion
}

// Entry is a decoded log entry.
type Entry struct {
	Version int32
	Kind    Kind
	Time    int64
	Cmd     Command
}

// Decode decodes a proposed command. An error wrapping ErrNewerCommand
// means b is of a version this binary does not know; any other error
// wraps ErrBadCommand and is what Update refuses as a result.
func Decode(b []byte) (Entry, error) {
	r := jute.NewReader(b)
	e := Entry{Version: r.Int(), Kind: Kind(r.Int()), Time: r.Long()}
	if err := r.Err(); err != nil {
		return e, fmt.Errorf("%w: header: %w", ErrBadCommand, err)
	}
	if e.Version < 1 {
		return e, fmt.Errorf("%w: version %d", ErrBadCommand, e.Version)
	}
	if e.Version > CommandVersion {
		return e, fmt.Errorf("%w: version %d (this binary applies up to %d)", ErrNewerCommand, e.Version, CommandVersion)
	}
	for _, k := range kinds {
		if k.kind != e.Kind {
			continue
		}
		if k.version > e.Version {
			break // the kind did not exist at that version
		}
		e.Cmd = k.zero()
		e.Cmd.decode(r)
		if err := r.Err(); err != nil {
			return e, fmt.Errorf("%w: %s: %w", ErrBadCommand, e.Kind, err)
		}
		if r.Remaining() != 0 {
			return e, fmt.Errorf("%w: %s: %d bytes after the command", ErrBadCommand, e.Kind, r.Remaining())
		}
		return e, nil
	}
	return e, fmt.Errorf("%w: %w: %d at version %d", ErrBadCommand, errUnknownKind, e.Kind, e.Version)
}

// Code is a command's outcome. Everything but CodeOK is a refusal: the map
// did not change.
type Code int32

const (
	CodeOK Code = 0
	// CodeMalformed: the entry did not decode.
	CodeMalformed Code = 1
	// CodeUnknownKind: no such command at the entry's version.
	CodeUnknownKind Code = 2
	// CodeBadVersion: the command's Expect is not the record's version.
	CodeBadVersion Code = 3
	// CodeExists: the name, member id or Raft address is taken.
	CodeExists Code = 4
	// CodeNoCell, CodeNoMember: the command names one that is not there.
	CodeNoCell   Code = 5
	CodeNoMember Code = 6
	// CodeInvalid: a bad argument (address, host, port, limit).
	CodeInvalid Code = 7
	// CodeInvalidName: a cell name outside the charset, or reserved.
	CodeInvalidName Code = 8
	// CodeInvalidPlacement: voters not 1..7, duplicates, an observer that
	// is a voter, an unknown or leaving member, two replicas on one host.
	CodeInvalidPlacement Code = 9
	// CodePortTaken: a port is in use on a host of the placement.
	CodePortTaken Code = 10
	// CodeMemberBusy: the member still hosts replicas.
	CodeMemberBusy Code = 11
	// CodeNotEmpty: a delete neither forced nor attested empty.
	CodeNotEmpty Code = 12
	// CodeBadState: the cell or member is not in a state the command
	// applies to.
	CodeBadState Code = 13
	// CodeConflict: an import disagrees with the map.
	CodeConflict Code = 14
	// CodeExhausted: no shard id is left to allocate.
	CodeExhausted Code = 15
)

var codeNames = []string{"ok", "malformed", "unknownKind", "badVersion", "exists", "noCell", "noMember",
	"invalid", "invalidName", "invalidPlacement", "portTaken", "memberBusy", "notEmpty", "badState", "conflict", "exhausted"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int32(c))
}

// Reply is a command's result, what Update puts in Result.Data.
type Reply struct {
	Code Code
	// Version is the map's version after the command.
	Version int64
	// Changed is false for a refusal and for a command that found the map
	// already as it asked (a retried AddMember or CreateCell, an
	// ImportDefault after the import).
	Changed bool
	// ShardID is the shard of the cell the command concerns (the one
	// allocated, for CreateCell); 0 for member commands.
	ShardID uint64
	// Detail says why a command was refused, for the operator.
	Detail string
}

func (p *Reply) Encode(w *jute.Writer) {
	w.Int(int32(p.Code))
	w.Long(p.Version)
	w.Bool(p.Changed)
	w.Long(int64(p.ShardID))
	w.String(p.Detail)
}

func (p *Reply) Decode(r *jute.Reader) {
	p.Code = Code(r.Int())
	p.Version = r.Long()
	p.Changed = r.Bool()
	p.ShardID = uint64(r.Long())
	p.Detail = r.String()
}

var _ jute.Record = (*Reply)(nil)

// OK reports whether the command was applied.
func (p Reply) OK() bool { return p.Code == CodeOK }

func (p Reply) String() string {
	if p.Code == CodeOK {
		return fmt.Sprintf("ok at version %d (changed %v, shard %d)", p.Version, p.Changed, p.ShardID)
	}
	return fmt.Sprintf("%s: %s (version %d)", p.Code, p.Detail, p.Version)
}

// ParseResult decodes the Result a proposal of a command returned.
func ParseResult(r sm.Result) (Reply, error) {
	var p Reply
	if err := jute.Unmarshal(r.Data, &p); err != nil {
		return p, fmt.Errorf("fleet: reply: %w", err)
	}
	return p, nil
}
