package znode

import (
	"errors"

	"github.com/zkraft/zkraft/jute"
)

// IsWrite reports whether op is a write that goes through the log: a
// client op that Apply (or Multi) performs. The fact is jute's op table's
// (jute.OpSpec.Write), so that one table says what each op is.
func IsWrite(op jute.OpCode) bool {
	s, ok := jute.Op(op)
	return ok && s.Write
}

// Apply performs one write op against tx and returns its response record
// (nil for ops without a body). A ZooKeeper failure is returned as a
// jute.ErrCode error; any other error is a store failure.
func (tx *Txn) Apply(op jute.OpCode, req jute.Record) (jute.Record, error) {
	switch r := req.(type) {
	case *jute.CreateRequest:
		path, n, err := tx.Create(r.Path, r.Data, r.ACL, r.Flags, -1)
		if err != nil {
			return nil, err
		}
		if op == jute.OpCreate {
			return &jute.CreateResponse{Path: path}, nil
		}
		return &jute.Create2Response{Path: path, Stat: n.Stat()}, nil
	case *jute.CreateTTLRequest:
		path, n, err := tx.Create(r.Path, r.Data, r.ACL, r.Flags, r.TTL)
		if err != nil {
			return nil, err
		}
		return &jute.Create2Response{Path: path, Stat: n.Stat()}, nil
	case *jute.DeleteRequest:
		return nil, tx.Delete(r.Path, r.Version)
	case *jute.SetDataRequest:
		n, err := tx.SetData(r.Path, r.Data, r.Version)
		if err != nil {
			return nil, err
		}
		return &jute.SetDataResponse{Stat: n.Stat()}, nil
	case *jute.SetACLRequest:
		n, err := tx.SetACL(r.Path, r.ACL, r.Version)
		if err != nil {
			return nil, err
		}
		return &jute.SetACLResponse{Stat: n.Stat()}, nil
	case *jute.CheckVersionRequest:
		return nil, tx.Check(r.Path, r.Version)
	case *jute.DeleteContainerRequest:
		return nil, tx.DeleteContainer(r.Path)
	case *jute.ReconfigRequest:
		// reconfigEnabled is off, as in a default ZooKeeper; the cluster
		// work brings reconfig itself.
		return nil, jute.ErrReconfigDisabled
	}
	return nil, jute.ErrUnimplemented
}

// multiResultType is the op type ZooKeeper 3.9 reports for a multi
// sub-result (MultiOperationRecord and Op.Create.getOpcode): container and
// TTL creates become createContainer/createTTL and every create other than
// a plain create gets a CreateResult with a Stat, whose type is create2.
// ZooKeeper 3.8 answered a create2 inside a multi as a plain create (path
// only); zkraft follows 3.9.
func multiResultType(op jute.OpCode, req jute.Record) jute.OpCode {
	var flags int32
	switch r := req.(type) {
	case *jute.CreateRequest:
		flags = r.Flags
	case *jute.CreateTTLRequest:
		flags = r.Flags
	default:
		return op
	}
	switch {
	case flags == jute.FlagContainer, flags == jute.FlagPersistentTTL, flags == jute.FlagPersistentSequentialTTL,
		op == jute.OpCreate2:
		return jute.OpCreate2
	}
	return jute.OpCreate
}

// Multi applies ops as one transaction. Each op runs over an overlay of the
// store so that later ops see earlier ones; if any op fails, nothing is
// written and every result is an error result: OK before the failing op, its
// code for it, RUNTIMEINCONSISTENCY after it. A store error is returned as
// err and stops the replica.
func (tx *Txn) Multi(ops []jute.MultiOp) (*jute.MultiResponse, error) {
	ov := tx.Overlay
	if ov == nil {
		ov = NewOverlay(tx.KV)
	} else {
		ov.Reset(tx.KV)
	}
	sub := *tx
	sub.Overlay = nil
	sub.KV = ov
	sub.Triggers = nil
	resp := &jute.MultiResponse{Results: make([]jute.MultiResult, 0, len(ops))}
	failed := -1
	var failCode jute.ErrCode
	for i, op := range ops {
		// Creates are applied as the result type, so that the response
		// record matches it (path only for create, path and Stat for
		// create2).
		rt := multiResultType(op.Type, op.Req)
		applyOp := op.Type
		if rt == jute.OpCreate || rt == jute.OpCreate2 {
			applyOp = rt
		}
		r, err := sub.Apply(applyOp, op.Req)
		if err != nil {
			var code jute.ErrCode
			if !errors.As(err, &code) {
				return nil, err
			}
			failed, failCode = i, code
			break
		}
		resp.Results = append(resp.Results, jute.MultiResult{Type: rt, Resp: r})
	}
	if failed < 0 {
		if err := ov.Commit(); err != nil {
			return nil, err
		}
		tx.Triggers = append(tx.Triggers, sub.Triggers...)
		return resp, nil
	}
	resp.Results = resp.Results[:0]
	for i := range ops {
		code := jute.ErrOK
		switch {
		case i == failed:
			code = failCode
		case i > failed:
			code = jute.ErrRuntimeInconsistency
		}
		resp.Results = append(resp.Results, jute.MultiResult{Type: jute.OpError, Err: code})
	}
	return resp, nil
}
