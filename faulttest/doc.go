// Package faulttest holds the fault tests of a replicated zkraft ensemble:
// real member processes are killed (SIGKILL), paused (SIGSTOP/SIGCONT) and
// cut off from the others (network namespaces) while clients run a register
// workload and a lock recipe; the recorded history is then checked for
// linearizability with porcupine, for lost acknowledged writes, for lock
// safety under fencing tokens, and for unexpected session expiries.
//
// Everything is in the tests; see fault_test.go. The short form runs under
// go test ./... (as root, for the namespaces); scripts/soak.sh runs it longer.
package faulttest
