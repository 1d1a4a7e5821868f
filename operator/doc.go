// Package operator owns the operator surfaces of a ZooKeeper-speaking
// process: ZooKeeper's four-letter words, its AdminServer commands, mntr
// and the Prometheus figures, as one registry of commands (commands.go:
// names, aliases, word, text and JSON answers, "needs a serving member")
// with two transports over it (fourlw.go: a word on a client port;
// admin.go: the AdminServer's HTTP API and its Jackson-style JSON), and
// one table of figures (figures.go: each figure once, with its mntr key
// and its Prometheus name, help and type).
//
// It reaches the process it reports on only through two interfaces it
// defines (member.go): a Member is one cell as the commands see it (its
// serving state, one reading of its figures, its configuration,
// connections, sessions and watches, its replica's figures), and a Host
// is what the AdminServer needs beyond that (the cell a request names,
// and the authorization of the commands that ask for it). It must never
// import server, raftsm, fleet, Dragonboat or Pebble (internal/layout's
// test checks it), so that the member (package server) and the proxy
// tier (package proxy) can both implement it.
//
// An implementer plugs in so:
//
//  1. Implement Member for each cell it answers for (a value per cell; a
//     process with one cell has one) and Host once. Every method takes one
//     look and returns; none blocks for long, all are safe for concurrent
//     use. A figure or field it does not have is zero (Replica returns nil
//     when there is no replica: its Prometheus figures are then not
//     shown); Conf.Ensemble is nil for a standalone process.
//  2. Build one Registry with NewRegistry, passing its own commands (for
//     the member: the fleet's cells, shed_connections, snapshot) as
//     Commands with Get, Post or JSON closures over itself. Names must
//     not clash with ZooKeeper's (NewRegistry panics).
//  3. On a client connection whose first four bytes are Registry.IsWord,
//     call Registry.Word with 4lw.commands.whitelist, the connection (for
//     stmk's argument) and the Member of the port's cell; if it answers,
//     send the answer with Answer and close the connection.
//  4. Serve Admin(registry, host, commandURL, log) at the command URL and
//     below it, and register Collector(cells) on the owner's Prometheus
//     Registerer (cells lists the Members to show, the default cell
//     first).
//
// Everything here is safe for concurrent use; the only state is the
// Registry's trace mask (gtmk, stmk), which is the Registry's own.
package operator
