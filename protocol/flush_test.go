package protocol

import "testing"

// TestFlushInOrder: at the end of a server's trace (nginx under h2load, Redis under
// redis-benchmark), its last request and the reply to it may both be in progress, a message
// whose lines or value ran past the head ending only where the next call starts one. They end
// in the order they started; the reply, by direction ended first, found no request to answer:
// one reply unpaired on every connection.
func TestFlushInOrder(t *testing.T) {
	for _, c := range []struct {
		proto, req, rep string
		head            int
	}{
		{"http", "GET /echo HTTP/1.1\r\nHost: 127.0.0.1:8091\r\nUser-Agent: h2load nghttp2/1.52.0\r\nAccept: */*\r\n\r\n",
			"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nok\n", 64},
		{"resp", "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n01234567890123456789\r\n$2\r\nEX\r\n$3\r\n100\r\n",
			"*2\r\n$30\r\n012345678901234567890123456789\r\n$1\r\nx\r\n", 40},
	} {
		t.Run(c.proto, func(t *testing.T) {
			spec, err := BuiltinSpec(c.proto)
			if err != nil {
				t.Fatal(err)
			}
			var st callStream
			for i := 0; i < 3; i++ {
				st.add(c.req, true) // a server: requests received, replies sent
				st.add(c.rep, false)
			}
			var unpaired int
			var replies int
			for _, m := range feed(t, spec, st.data, st.cuts, c.head) {
				if m.IsReply {
					replies++
					if m.RTT <= 0 {
						unpaired++
					}
				}
			}
			if replies == 0 || unpaired != 0 {
				t.Errorf("%d of %d replies unpaired", unpaired, replies)
			}
		})
	}
}
