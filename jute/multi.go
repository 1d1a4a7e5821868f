package jute

import "fmt"

// multiHeaderSize is the encoded size of MultiHeader.
const multiHeaderSize = 9

// MultiOp is one operation of a multi request: its op code and request
// record. It is not itself a record.
type MultiOp struct {
	Type OpCode
	Req  Record
}

// MultiRequest is the body of multi and multiRead (MultiOperationRecord).
//
// Wire form: for each op, MultiHeader{Type, false, -1} and the op's request
// record; then the terminator MultiHeader{-1, true, -1}.
type MultiRequest struct {
	Ops []MultiOp
}

// Encode implements Record.
func (m *MultiRequest) Encode(w *Writer) {
	for _, op := range m.Ops {
		h := MultiHeader{Type: op.Type, Done: false, Err: -1}
		h.Encode(w)
		if op.Req != nil {
			op.Req.Encode(w)
		}
	}
	end := MultiHeader{Type: -1, Done: true, Err: -1}
	end.Encode(w)
}

// Decode implements Record. As in ZooKeeper, the list ends at the first header
// with Done set, whatever its type and err; the err of the other headers is
// ignored. An op type with no record in a multi is ErrBadMultiOp. Every op
// consumes at least a 9-byte header, so the number of ops (and what is
// allocated for them) is bounded by the input length.
func (m *MultiRequest) Decode(r *Reader) {
	m.Ops = nil
	for r.err == nil {
		if r.Remaining() < multiHeaderSize {
			r.fail(fmt.Errorf("%w: multi request header at offset %d needs %d bytes, %d remain", ErrShortBuffer, r.off, multiHeaderSize, r.Remaining()))
			break
		}
		var h MultiHeader
		h.Decode(r)
		if h.Done {
			if h.Type != -1 || h.Err != -1 {
				r.lossy = true
			}
			break
		}
		if h.Err != -1 {
			r.lossy = true
		}
		req, ok := newMultiOpRequest(h.Type)
		if !ok {
			r.fail(fmt.Errorf("%w: request op %v at offset %d", ErrBadMultiOp, h.Type, r.off-multiHeaderSize))
			break
		}
		req.Decode(r)
		m.Ops = append(m.Ops, MultiOp{Type: h.Type, Req: req})
	}
	if r.err != nil {
		m.Ops = nil
	}
}

// MultiResult is one result of a multi response. Resp is nil when the op has
// no reply body (delete, check). For a failed multi every result has Type
// OpError and Resp is an *ErrorResponse carrying Err.
type MultiResult struct {
	Type OpCode
	Err  ErrCode
	Resp Record
}

// MultiResponse is the reply body of multi and multiRead. Its ReplyHeader
// has err 0 even when an op failed; the failure is in the results.
//
// Wire form: for each result, MultiHeader{Type, false, Err} and the body
// (ErrorResponse{Err} for OpError); then MultiHeader{-1, true, -1}.
type MultiResponse struct {
	Results []MultiResult
}

// Encode implements Record.
func (m *MultiResponse) Encode(w *Writer) {
	for _, res := range m.Results {
		h := MultiHeader{Type: res.Type, Done: false, Err: res.Err}
		h.Encode(w)
		if res.Type == OpError {
			e := ErrorResponse{Err: res.Err}
			e.Encode(w)
		} else if res.Resp != nil {
			res.Resp.Encode(w)
		}
	}
	end := MultiHeader{Type: -1, Done: true, Err: -1}
	end.Encode(w)
}

// Decode implements Record. The list ends at the first header with Done set.
// For an OpError result, Err is taken from the ErrorResponse body, as the
// Java client does (the server writes the same code in the header).
func (m *MultiResponse) Decode(r *Reader) {
	m.Results = nil
	for r.err == nil {
		if r.Remaining() < multiHeaderSize {
			r.fail(fmt.Errorf("%w: multi response header at offset %d needs %d bytes, %d remain", ErrShortBuffer, r.off, multiHeaderSize, r.Remaining()))
			break
		}
		var h MultiHeader
		h.Decode(r)
		if h.Done {
			if h.Type != -1 || h.Err != -1 {
				r.lossy = true
			}
			break
		}
		resp, ok := newMultiOpResponse(h.Type)
		if !ok {
			r.fail(fmt.Errorf("%w: result op %v at offset %d", ErrBadMultiOp, h.Type, r.off-multiHeaderSize))
			break
		}
		res := MultiResult{Type: h.Type, Err: h.Err, Resp: resp}
		if resp != nil {
			resp.Decode(r)
		}
		if e, isErr := resp.(*ErrorResponse); isErr {
			if e.Err != h.Err {
				r.lossy = true
			}
			res.Err = e.Err
		}
		m.Results = append(m.Results, res)
	}
	if r.err != nil {
		m.Results = nil
	}
}
