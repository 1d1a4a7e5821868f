// Command zkraft is the one binary: serve (the default), and later import,
// export, bench and operator commands.
package main

func main() {}
