// Package layout holds no code, only a test that keeps the repository's
// import arrows pointing one way: jute <- znode/session <- raftsm <- server
// <- cmd, with the on-disk formats (zkdata), the Go client tree (client/...)
// and the conformance suite beside them. TestImportsFollowTheArrows reads
// every package's imports with go/build and fails, naming the file, the line
// and the import, when a package imports against its row of the table in
// layout_test.go.
//
// It imports the standard library only, and nothing may import it. A new
// package must be given a row (or fall under a tree such as internal/... or
// scripts/... that has one) before the test passes: adding a package means
// saying where it stands.
package layout
