package server

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
)

// shed_connections (ZooKeeper's ShedConnectionsCommand, ZOOKEEPER-5015,
// on its main branch after 3.9): POST {"percentage": N} closes about N% of
// the client connections, of the plain and of the TLS listener each, so
// that their clients reconnect, usually to other members: after a member
// rejoins, or before one is taken down, load moves without restarting
// anything. Sessions are not closed: their clients reconnect with them.
//
// ZooKeeper closes each connection with probability N/100 (100 closes all,
// 0 none); zkraft closes exactly round(count × N / 100) of each
// listener's connections, chosen at random, so the share asked for is the
// share shed.

// maxShedBody bounds the request body read.
const maxShedBody = 64 << 10

func shedConnectionsPost(s *Server, r *http.Request) adminReply {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxShedBody))
	if err != nil {
		return adminReply{status: http.StatusBadRequest, err: "Invalid JSON or failed to read request body: " + err.Error()}
	}
	var fields map[string]json.RawMessage
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &fields); err != nil {
			return adminReply{status: http.StatusBadRequest, err: "Invalid JSON or failed to read request body: " + err.Error()}
		}
	}
	raw, ok := fields["percentage"]
	if !ok {
		return adminReply{status: http.StatusBadRequest, err: "Missing required field: percentage"}
	}
	pct := jsonAsInt(raw)
	if pct < 0 || pct > 100 {
		return adminReply{status: http.StatusBadRequest, err: "Percentage must be between 0 and 100"}
	}
	n := s.shedConnections(pct)
	return adminReply{fields: jobj{{"connections_shed", n}, {"percentage_requested", pct}}}
}

// jsonAsInt reads a JSON value as Jackson's JsonNode.asInt does: a number
// truncated, a string that holds one parsed, anything else 0.
func jsonAsInt(raw json.RawMessage) int {
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return int(f)
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(str), 64); err == nil {
			return int(v)
		}
	}
	return 0
}

// shedConnections closes pct percent of each listener's connections and
// returns how many it closed.
func (s *Server) shedConnections(pct int) int {
	if pct <= 0 {
		return 0
	}
	var plain, secure []*conn
	for _, c := range s.view().conns() {
		if c.secure {
			secure = append(secure, c)
		} else {
			plain = append(plain, c)
		}
	}
	total := len(plain) + len(secure)
	shed := 0
	for _, group := range [][]*conn{plain, secure} {
		k := (len(group)*pct + 50) / 100
		for _, i := range rand.Perm(len(group))[:k] {
			group[i].close()
			shed++
		}
	}
	s.log.Info("shed connections", "shed", shed, "of", total, "percentage", pct)
	return shed
}
