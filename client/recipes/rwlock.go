package recipes

import (
	"context"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
)

// RWLock is a distributed read-write lock: any number of readers, or one
// writer. Contenders queue in one sequence; a reader holds when no writer
// is ahead of it and watches only the nearest writer ahead, a writer
// holds when it is first and watches only the node just ahead. A writer
// that queued before a reader goes first, so writers do not starve.
//
// Tokens: a writer's token fences like a Lock's (a resource keeps the
// highest writer token it accepted and refuses lower ones); a reader's
// token is checked against that same highest writer token without being
// recorded (fence.Guard.Check), since readers share.
type RWLock struct {
	s   *session.Session
	dir string
	opt options
}

const (
	readPrefix  = "read-"
	writePrefix = "write-"
)

// NewRWLock returns the read-write lock under dir.
func NewRWLock(s *session.Session, dir string, opts ...Option) *RWLock {
	return &RWLock{s: s, dir: strings.TrimSuffix(dir, "/"), opt: buildOptions(opts)}
}

// RLock blocks until a read lease is held.
func (l *RWLock) RLock(ctx context.Context) (*Lease, error) {
	return l.acquire(ctx, readPrefix, func(kids []child, i int) string {
		for j := i - 1; j >= 0; j-- {
			if strings.Contains(kids[j].name, writePrefix) {
				return kids[j].name
			}
		}
		return ""
	})
}

// Lock blocks until the write lease is held.
func (l *RWLock) Lock(ctx context.Context) (*Lease, error) {
	return l.acquire(ctx, writePrefix, predecessor)
}

func (l *RWLock) acquire(ctx context.Context, prefix string, blocker func([]child, int) string) (*Lease, error) {
	b, err := bind(ctx, l.s)
	if err != nil {
		return nil, err
	}
	path, st, err := b.createSeq(ctx, l.dir, prefix, nil, zk.FlagEphemeral, l.opt.acl)
	if err != nil {
		return nil, err
	}
	if err := b.waitTurn(ctx, l.dir, path, []string{readPrefix, writePrefix}, blocker); err != nil {
		b.abandon(path)
		return nil, err
	}
	return newLease(b, path, st.Czxid), nil
}
