package models

import (
	"fmt"
	"sort"
	"strings"
)

// Link is a transport between client and server: a round-trip latency and a bandwidth.
type Link struct {
	Name         string
	RTTUS        float64 // round-trip latency, µs
	BandwidthBps float64 // bytes per second; 0 means unlimited
	Note         string  // where the figures come from
}

// TransferUS returns the time to move n bytes over the link, in µs (0 for unlimited bandwidth).
func (l Link) TransferUS(n float64) float64 {
	if l.BandwidthBps <= 0 || n <= 0 {
		return 0
	}
	return n / l.BandwidthBps * 1e6
}

// Links are named link presets. The WiFi figures are medians measured between two laptops on
// one WiFi LAN for a distributed llama.cpp deployment (ping and echo throughput per transport);
// the RDMA figure is a measured 1-client copyrpc round trip; loopback is a same-host socket.
var Links = map[string]Link{
	"loopback":    {Name: "loopback", RTTUS: 20, BandwidthBps: 0, Note: "same-host TCP or unix socket"},
	"rdma":        {Name: "rdma", RTTUS: 4.2, BandwidthBps: 0, Note: "RDMA WRITE with immediate, 1 client, p50"},
	"tcp-wifi":    {Name: "tcp-wifi", RTTUS: 50_000, BandwidthBps: 30e6, Note: "raw TCP over WiFi: 30-80 ms ping, 30 MB/s"},
	"webrtc-wifi": {Name: "webrtc-wifi", RTTUS: 48_000, BandwidthBps: 15e6, Note: "WebRTC data channel over WiFi: 48 ms, 15 MB/s"},
	"quic-direct": {Name: "quic-direct", RTTUS: 12_000, BandwidthBps: 4e6, Note: "QUIC direct (iroh): 10-14 ms, 3-5 MB/s echo"},
	"quic-relay":  {Name: "quic-relay", RTTUS: 400_000, BandwidthBps: 2e6, Note: "QUIC through a relay (iroh): 400 ms, 2 MB/s"},
}

// LinkNames returns the preset names, sorted.
func LinkNames() []string {
	n := make([]string, 0, len(Links))
	for k := range Links {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// LookupLink returns the preset named name (case-insensitive).
func LookupLink(name string) (Link, error) {
	l, ok := Links[strings.ToLower(name)]
	if !ok {
		return Link{}, fmt.Errorf("unknown link %q (known: %s)", name, strings.Join(LinkNames(), ", "))
	}
	return l, nil
}
