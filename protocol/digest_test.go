package protocol

import (
	"encoding/binary"
	"testing"
)

// venusReq is a venus request frame of one record: command cmd, id, wanting a reply, and
// payload after the record's header.
func venusReq(cmd, id uint32, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x56504C53)
	b = binary.LittleEndian.AppendUint32(b, uint32(16+len(payload)))
	b = binary.LittleEndian.AppendUint32(b, cmd)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, id)
	return append(b, payload...)
}

// TestRequestDigest: requests with the same bytes, request ids apart, have one digest; requests
// whose captured bytes differ have two; bytes past the captured head count for nothing.
func TestRequestDigest(t *testing.T) {
	cases := []struct {
		name  string
		proto string
		a, b  []byte
		head  int
		same  bool
		cuts  []byte // the calls' lengths (feed); nil: one call a request
	}{
		{"venus: ids differ", "venus", venusReq(39, 1, []byte("fence#7!")), venusReq(39, 2, []byte("fence#7!")), 64, true, nil},
		{"venus: payloads differ", "venus", venusReq(39, 1, []byte("fence#7!")), venusReq(39, 1, []byte("fence#8!")), 64, false, nil},
		{"venus: past the head", "venus", venusReq(39, 1, []byte("fence#7!")), venusReq(39, 1, []byte("fence#8!")), 24, true, nil},
		{"ggml-rpc: same", "ggml-rpc", ggmlReq(11, []byte{0, 0, 0, 0}), ggmlReq(11, []byte{0, 0, 0, 0}), 64, true, nil},
		{"ggml-rpc: device differs", "ggml-rpc", ggmlReq(11, []byte{0, 0, 0, 0}), ggmlReq(11, []byte{1, 0, 0, 0}), 64, false, nil},
		// llama.cpp writes each request in three calls: the command byte, the size, the payload
		{"ggml-rpc in three calls: same", "ggml-rpc", ggmlReq(11, []byte{0, 0, 0, 0}), ggmlReq(11, []byte{0, 0, 0, 0}), 64, true, []byte{0, 7, 3}},
		{"ggml-rpc in three calls: device differs", "ggml-rpc", ggmlReq(11, []byte{0, 0, 0, 0}), ggmlReq(11, []byte{1, 0, 0, 0}), 64, false, []byte{0, 7, 3}},
		{"ggml-rpc in three calls: past the payload's head", "ggml-rpc", ggmlReq(11, make([]byte, 12)), ggmlReq(11, append(make([]byte, 10), 1, 0)), 8, true, []byte{0, 7, 11}},
		{"resp: one key", "resp", []byte("*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n"), []byte("*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n"), 64, true, nil},
		{"resp: keys differ", "resp", []byte("*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n"), []byte("*2\r\n$3\r\nGET\r\n$2\r\nk2\r\n"), 64, false, nil},
		{"http: headers apart", "http", []byte("GET /status HTTP/1.1\r\nHost: a\r\n\r\n"), []byte("GET /status HTTP/1.1\r\nHost: b\r\n\r\n"), 64, true, nil},
		{"http: paths differ", "http", []byte("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"), []byte("GET /b HTTP/1.1\r\nHost: a\r\n\r\n"), 64, false, nil},
		{"memcached: keys differ", "memcached", []byte("get key:0001\r\n"), []byte("get key:0002\r\n"), 64, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := BuiltinSpec(c.proto)
			if err != nil {
				t.Fatal(err)
			}
			digest := func(data []byte) uint64 {
				for _, m := range feed(t, spec, data, c.cuts, c.head) {
					if m.WantsReply {
						if m.Digest == 0 {
							t.Fatalf("request %q without a digest", data)
						}
						return m.Digest
					}
				}
				t.Fatalf("no request in %q", data)
				return 0
			}
			if got := digest(c.a) == digest(c.b); got != c.same {
				t.Errorf("same digest %v, want %v", got, c.same)
			}
		})
	}
}
