package raftsm

import "sync"

// Open's check of a whole store, apart from the apply path: Update never
// calls what is in this file, so the determinism lint (lint_test.go) lets
// it start goroutines.

// computeDigest walks every digested key of r, and counts the tree's
// figures on the way. The spaces are walked at once (the sum does not
// depend on the order): Open's pass over a large store is most of a
// member's start-up.
func computeDigest(r reader) (uint64, TreeStats, error) {
	type part struct {
		sum uint64
		st  TreeStats
		err error
	}
	parts := make([]part, len(digestedSpaces))
	var wg sync.WaitGroup
	for i, sp := range digestedSpaces {
		wg.Add(1)
		go func() { // joined below: computeDigest returns only after every walk
			defer wg.Done()
			p := &parts[i]
			p.err = scanPrefix(r, []byte{sp}, func(k, v []byte) error {
				p.sum += entryHash(k, v)
				switch sp {
				case spaceNode:
					plen, rec, err := splitNodeValue(v)
					if err != nil {
						return err
					}
					dl, err := dataLen(rec)
					if err != nil {
						return err
					}
					p.st.Nodes++
					p.st.DataSize += int64(plen) + dl
				case spaceEphemeral:
					p.st.Ephemerals++
				}
				return nil
			})
		}()
	}
	wg.Wait()
	var sum uint64
	var st TreeStats
	for _, p := range parts {
		if p.err != nil {
			return 0, TreeStats{}, p.err
		}
		sum += p.sum
		st.Nodes += p.st.Nodes
		st.Ephemerals += p.st.Ephemerals
		st.DataSize += p.st.DataSize
	}
	return sum, st, nil
}
