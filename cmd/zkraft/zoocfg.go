package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/zkraft/zkraft/server"
)

// applyZooCfg reads an Apache ZooKeeper zoo.cfg into cfg. Keys zkraft does
// not use yet are returned so the caller can log them; a malformed value is
// an error.
func applyZooCfg(r io.Reader, cfg *server.Config) (ignored []string, err error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("zoo.cfg line %d: no '=' in %q", line, s)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	ms := func(k string) (time.Duration, error) {
		n, err := strconv.Atoi(props[k])
		if err != nil || n < 0 {
			return 0, fmt.Errorf("zoo.cfg: %s=%q is not a non-negative integer", k, props[k])
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	tick := 2 * time.Second
	if _, ok := props["tickTime"]; ok {
		if tick, err = ms("tickTime"); err != nil {
			return nil, err
		}
		if tick == 0 {
			return nil, fmt.Errorf("zoo.cfg: tickTime must be positive")
		}
	}
	cfg.TickTime = tick
	for _, k := range []string{"minSessionTimeout", "maxSessionTimeout"} {
		if _, ok := props[k]; !ok {
			continue
		}
		d, err := ms(k)
		if err != nil {
			return nil, err
		}
		if k == "minSessionTimeout" {
			cfg.MinSessionTimeout = d
		} else {
			cfg.MaxSessionTimeout = d
		}
	}
	host := "0.0.0.0"
	if v, ok := props["clientPortAddress"]; ok {
		host = v
	}
	if v, ok := props["clientPort"]; ok {
		if _, err := strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("zoo.cfg: clientPort=%q", v)
		}
		cfg.ClientAddr = net.JoinHostPort(host, v)
	}
	if v, ok := props["dataDir"]; ok {
		cfg.DataDir = v
	}
	if v, ok := props["dataLogDir"]; ok {
		cfg.LogDir = v
	}
	if v, ok := props["maxClientCnxns"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("zoo.cfg: maxClientCnxns=%q", v)
		}
		cfg.MaxClientCnxns = n
	}
	if v, ok := props["4lw.commands.whitelist"]; ok {
		cfg.FourLetterWords = nil
		for _, w := range strings.Split(v, ",") {
			if w = strings.TrimSpace(w); w != "" {
				cfg.FourLetterWords = append(cfg.FourLetterWords, w)
			}
		}
	}
	used := map[string]bool{"tickTime": true, "minSessionTimeout": true, "maxSessionTimeout": true,
		"clientPort": true, "clientPortAddress": true, "dataDir": true, "dataLogDir": true,
		"maxClientCnxns": true, "4lw.commands.whitelist": true}
	for k := range props {
		if !used[k] {
			ignored = append(ignored, k)
		}
	}
	return ignored, nil
}
