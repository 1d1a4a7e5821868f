#!/usr/bin/env bash
# cells-sharedlog-experiment.sh builds the shared-log experiment of
# docs/cells.md ("One log for a member's cells: an experiment"): a zkraft
# binary whose cells share one tan log file, one append and one fsync per
# step on each member. It is an experiment, not the product: it needs a
# patched copy of Dragonboat, and it changes how the system shard
# allocates cell shard ids, so its data directories are for it alone (a
# data directory it made must not be opened by zkraft, nor the other way
# round). Two changes, on a copy of this tree's HEAD:
#
#   1. Dragonboat's tan keeps one log per replica (regular mode) and has a
#      multiplexed mode (one log per shard id mod 16, shared by the shards
#      of one step worker), which plugin/tan does not export: the copy of
#      the module adds tan.MultiplexedFactory, and zkraft's tan factory
#      (server/logstore.go) opens it.
#   2. The system shard allocates cell shard ids 16 apart (2, 18, 34, ...),
#      so that every cell is in the same Dragonboat step worker
#      (shard id mod 16) and so in the same multiplexed log.
#
# Usage: scripts/cells-sharedlog-experiment.sh OUT   (OUT: the binary to
# write; then ZKRAFT_BIN=OUT scripts/cells-bars.sh measures it)
set -euo pipefail
out="${1:?usage: $0 OUT}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d /tmp/cells-sharedlog.XXXXXX)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$repo_root"
db_version="$(go list -m -f '{{.Version}}' github.com/lni/dragonboat/v4)"
db_dir="$(go list -m -f '{{.Dir}}' github.com/lni/dragonboat/v4)"
cp -r "$db_dir" "$work/dragonboat"
chmod -R u+w "$work/dragonboat"
cat >"$work/dragonboat/plugin/tan/multiplexed.go" <<'EOF'
package tan

import (
	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/internal/tan"
	"github.com/lni/dragonboat/v4/raftio"
)

// MultiplexedFactory creates tan with multiplexed logs (the experiment of
// zkraft's scripts/cells-sharedlog-experiment.sh).
var MultiplexedFactory = muxFactory{}

type muxFactory struct{}

func (muxFactory) Create(cfg config.NodeHostConfig, cb config.LogDBCallback, dirs []string, wals []string) (raftio.ILogDB, error) {
	return tan.MultiplexedLogFactory.Create(cfg, cb, dirs, wals)
}

func (muxFactory) Name() string { return tan.Factory.Name() }
EOF
mkdir "$work/tree"
git archive HEAD | tar -x -C "$work/tree"
cd "$work/tree"
grep -q 'return tan.Factory.Create(nhc, cb, at, wals)' server/logstore.go
sed -i 's|return tan.Factory.Create(nhc, cb, at, wals)|return tan.MultiplexedFactory.Create(nhc, cb, at, wals)|' server/logstore.go
grep -q '^	a.m.nextShard++$' fleet/apply.go
sed -i 's|^	a.m.nextShard++$|	a.m.nextShard += 16|' fleet/apply.go
echo "replace github.com/lni/dragonboat/v4 $db_version => $work/dragonboat" >>go.mod
go build -o "$out" ./cmd/zkraft
echo "built $out (HEAD $(git -C "$repo_root" rev-parse --short HEAD), Dragonboat $db_version with tan's multiplexed logs, cell shard ids 16 apart)"
