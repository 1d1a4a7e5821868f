package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
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
	if v, ok := props["reconfigEnabled"]; ok {
		cfg.ReconfigEnabled = v == "true"
	}
	if err := applyServerLines(props, cfg); err != nil {
		return nil, err
	}
	opsUsed, err := applyOpsZooCfg(props, cfg)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{"tickTime": true, "minSessionTimeout": true, "maxSessionTimeout": true,
		"clientPort": true, "clientPortAddress": true, "dataDir": true, "dataLogDir": true,
		"maxClientCnxns": true, "4lw.commands.whitelist": true, "reconfigEnabled": true}
	for k := range props {
		if !used[k] && !opsUsed[k] && !strings.HasPrefix(k, "server.") {
			ignored = append(ignored, k)
		}
	}
	return ignored, nil
}

// applyServerLines reads the ensemble from server.N lines:
//
//	server.N=host:peerPort:electionPort[:participant|observer][;[clientHost:]clientPort]
//
// A member without a client address uses clientPortAddress:clientPort.
// The member's own id (myid) is read separately from dataDir/myid.
func applyServerLines(props map[string]string, cfg *server.Config) error {
	for k, v := range props {
		idStr, ok := strings.CutPrefix(k, "server.")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(idStr, 10, 64)
		if err != nil || id == 0 || id > 254 {
			return fmt.Errorf("zoo.cfg: %s: server id must be 1..254", k)
		}
		addrPart, clientPart, hasClient := strings.Cut(v, ";")
		fields := strings.Split(addrPart, ":")
		if len(fields) < 3 || len(fields) > 4 {
			return fmt.Errorf("zoo.cfg: %s=%q: want host:peerPort:electionPort[:role]", k, v)
		}
		host := fields[0]
		for _, p := range fields[1:3] {
			if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
				return fmt.Errorf("zoo.cfg: %s=%q: bad port %q", k, v, p)
			}
		}
		m := server.Member{
			ID:           id,
			RaftAddr:     net.JoinHostPort(host, fields[1]),
			ElectionAddr: net.JoinHostPort(host, fields[2]),
			ClientAddr:   cfg.ClientAddr,
		}
		if len(fields) == 4 {
			switch fields[3] {
			case "participant":
			case "observer":
				m.Observer = true
			default:
				return fmt.Errorf("zoo.cfg: %s=%q: role must be participant or observer", k, v)
			}
		}
		if hasClient {
			ch, cp, found := strings.Cut(clientPart, ":")
			if !found {
				ch, cp = "0.0.0.0", clientPart
			}
			if n, err := strconv.Atoi(cp); err != nil || n <= 0 || n > 65535 {
				return fmt.Errorf("zoo.cfg: %s=%q: bad client port", k, v)
			}
			m.ClientAddr = net.JoinHostPort(ch, cp)
		}
		cfg.Members = append(cfg.Members, m)
	}
	sort.Slice(cfg.Members, func(i, j int) bool { return cfg.Members[i].ID < cfg.Members[j].ID })
	return nil
}

// readMyID reads ZooKeeper's dataDir/myid.
func readMyID(dataDir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "myid"))
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || id == 0 || id > 254 {
		return 0, fmt.Errorf("%s/myid: %q is not a server id 1..254", dataDir, strings.TrimSpace(string(b)))
	}
	return id, nil
}
