package session

// NegotiateTimeout clamps requested to [min, max] (all milliseconds) as
// ZooKeeper does: min(max(requested, min), max). If min > max, max wins.
func NegotiateTimeout(requested, min, max int32) int32 {
	t := requested
	if t < min {
		t = min
	}
	if t > max {
		t = max
	}
	return t
}
