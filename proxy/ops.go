package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zkraft/zkraft/operator"
)

// opsServer is one of the proxy's HTTP listeners (AdminServer, Prometheus).
type opsServer struct {
	name string
	ln   net.Listener
	srv  *http.Server
}

// serveHTTP listens on addr and serves h until Close; "" serves nothing.
func (p *Proxy) serveHTTP(name, addr string, h http.Handler) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("proxy: %s listen %s: %w", name, addr, err)
	}
	s := &opsServer{name: name, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}}
	p.ops = append(p.ops, s)
	p.goTracked(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Warn("http server ended", "server", name, "err", err)
		}
	})
	p.log.Info("serving", "server", name, "addr", ln.Addr().String())
	return nil
}

// startOps registers the proxy's collectors and starts its HTTP listeners.
func (p *Proxy) startOps() error {
	cells := func() []operator.Cell { return []operator.Cell{{Name: "default", Member: opMember{p}}} }
	for _, c := range []prometheus.Collector{proxyCollector{p}, operator.Collector(cells)} {
		if err := p.cfg.Registerer.Register(c); err != nil {
			return fmt.Errorf("proxy: prometheus: %w", err)
		}
	}
	if p.cfg.AdminAddr != "" {
		base := p.cfg.AdminCommandURL
		h := operator.Admin(p.reg, opMember{p}, base, p.log)
		mux := http.NewServeMux()
		mux.Handle(base, h)
		mux.Handle(base+"/", h)
		if err := p.serveHTTP("admin", p.cfg.AdminAddr, mux); err != nil {
			return err
		}
	}
	if p.cfg.Gatherer != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(p.cfg.Gatherer, promhttp.HandlerOpts{}))
		if err := p.serveHTTP("metrics", p.cfg.MetricsAddr, mux); err != nil {
			return err
		}
	}
	return nil
}

// closeOps closes the HTTP listeners and their connections.
func (p *Proxy) closeOps() {
	for _, s := range p.ops {
		s.srv.Close()
	}
}

// MetricsAddr is the Prometheus listener's address, nil if there is none.
func (p *Proxy) MetricsAddr() net.Addr { return p.opsAddr("metrics") }

// AdminAddr is the AdminServer's address, nil if there is none.
func (p *Proxy) AdminAddr() net.Addr { return p.opsAddr("admin") }

func (p *Proxy) opsAddr(name string) net.Addr {
	for _, s := range p.ops {
		if s.name == name {
			return s.ln.Addr()
		}
	}
	return nil
}
