package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkraft/zkraft/proxy/wire"
)

// Config configures a proxy. Call Validate (New does) to apply defaults.
type Config struct {
	// ClientAddr is where clients connect. Default 127.0.0.1:2181.
	ClientAddr string
	// Members are the members' proxy ports (their --proxy-port), host:port.
	// Required. The proxy holds one upstream connection, to one of them at
	// a time, tried in turn from a random start.
	Members []string
	// Name names the proxy in members' logs. Default host name and client
	// address.
	Name string
	// KeepAliveInterval is how often the proxy sends its keep-alive batch
	// (and so how quickly it notices a silent member: three intervals, at
	// least 3 s). Default 1s, half of ZooKeeper's default tick.
	KeepAliveInterval time.Duration
	// MaxClientCnxns limits client connections per IP; 0 means no limit.
	MaxClientCnxns int
	// MaxCnxns limits all client connections; 0 means no limit.
	MaxCnxns int
	// MaxBuffer is the largest frame accepted from a client
	// (jute.maxbuffer); it must not exceed the members'. Default 0xfffff.
	MaxBuffer int
	// HandshakeWait is how long a client's handshake waits for an upstream
	// connection before the proxy closes it (the client then tries its
	// next address). Default 2s.
	HandshakeWait time.Duration
	// HandshakesInFlight bounds the client handshakes forwarded to the
	// member and not yet answered; the rest wait in arrival order, each
	// for at most a third of its session timeout, and are refused (their
	// connection closed) when the queue would outlast that at the
	// member's recent pace (admission.go). Default 256.
	HandshakesInFlight int
	// FourLetterWords are the four-letter words the proxy answers
	// (4lw.commands.whitelist); "*" enables all. Default srvr only, as
	// ZooKeeper's. Words the proxy has no command for (hash: the
	// member's digests) go to the member, whose own whitelist applies.
	FourLetterWords []string
	// AdminAddr, if set, serves ZooKeeper's AdminServer (/commands/...)
	// about the proxy on this host:port. Off by default: a proxy shares
	// hosts with members, whose AdminServer has port 8080.
	AdminAddr string
	// AdminCommandURL is the AdminServer's path prefix
	// (admin.commandURL). Default /commands.
	AdminCommandURL string
	// MetricsAddr, if set, serves Prometheus /metrics about the proxy on
	// this host:port. Off by default.
	MetricsAddr string
	// Registerer receives the proxy's Prometheus collectors and Gatherer
	// is what MetricsAddr serves. Nil: a registry of the proxy's own.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// UpstreamVersion is the newest upstream protocol version the proxy
	// says hello in; a member that speaks only an older one is greeted
	// again in it. 1 turns shared watches off (every session's watch is
	// then its own on the member). Default wire.Version.
	UpstreamVersion int32
	// FanOutWorkers is how many goroutines at most write one shared
	// watch's notifications to its sessions (fanout.go), at least 512
	// sessions each. Default (0) GOMAXPROCS.
	FanOutWorkers int
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.ClientAddr == "" {
		c.ClientAddr = "127.0.0.1:2181"
	}
	if len(c.Members) == 0 {
		return errors.New("proxy: no members (--members host:port,...: the members' proxy ports)")
	}
	for _, m := range c.Members {
		if _, _, err := net.SplitHostPort(m); err != nil {
			return fmt.Errorf("proxy: member %q: %w", m, err)
		}
	}
	if c.KeepAliveInterval <= 0 {
		c.KeepAliveInterval = time.Second
	}
	if c.MaxBuffer <= 0 {
		c.MaxBuffer = 0xfffff
	}
	if c.HandshakeWait <= 0 {
		c.HandshakeWait = 2 * time.Second
	}
	if c.HandshakesInFlight <= 0 {
		c.HandshakesInFlight = 256
	}
	if c.MaxClientCnxns < 0 || c.MaxCnxns < 0 {
		return errors.New("proxy: negative connection limit")
	}
	if c.FourLetterWords == nil {
		c.FourLetterWords = []string{"srvr"}
	}
	if c.AdminCommandURL == "" {
		c.AdminCommandURL = "/commands"
	}
	for _, a := range []string{c.AdminAddr, c.MetricsAddr} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("proxy: address %q: %w", a, err)
		}
	}
	if c.Registerer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	}
	if c.Gatherer == nil {
		if g, ok := c.Registerer.(prometheus.Gatherer); ok {
			c.Gatherer = g
		}
	}
	switch {
	case c.UpstreamVersion == 0:
		c.UpstreamVersion = wire.Version
	case c.UpstreamVersion < wire.MinVersion || c.UpstreamVersion > wire.Version:
		return fmt.Errorf("proxy: upstream protocol version %d: this proxy speaks %d to %d", c.UpstreamVersion, wire.MinVersion, wire.Version)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = host + "/" + c.ClientAddr
	}
	return nil
}
