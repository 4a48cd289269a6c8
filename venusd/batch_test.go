package venusd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/device"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// startBatch runs a batch server until the test ends.
func startBatch(t testing.TB, cfg ServerConfig) *BatchServer {
	t.Helper()
	s, err := NewBatchServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, s)
	return s
}

// The batch loop computes what the per-connection server computes: the llm workload's checksum
// equals the in-process reference in every mode and on every transport.
func TestBatchLoopSameChecksum(t *testing.T) {
	lc := smallLLM(2)
	ref, err := ReferenceChecksum(lc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"tcp", "unix", "shm"} {
		s := startBatch(t, ServerConfig{Listen: listenAddr(t, tr), Getenv: noEnv})
		for _, m := range Modes {
			t.Run(tr+"/"+m.String(), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "llm", Mode: m, LLM: lc, Getenv: noEnv, NoVerify: true})
				if err != nil {
					t.Fatal(err)
				}
				if res.Checksum != ref {
					t.Errorf("checksum %s, reference %s", res.Checksum, ref)
				}
			})
		}
		if st := s.LoopStats(); st.Requests == 0 || st.BusyCycles() == 0 || st.Writes == 0 {
			t.Errorf("%s: loop counters not counting: %+v", tr, st)
		}
	}
}

// With several closed-loop clients, cycles carry more than one request, every request gets its
// reply, and the counters add up.
func TestBatchLoopBatchesClients(t *testing.T) {
	s := startBatch(t, ServerConfig{Listen: listenAddr(t, "unix"), Getenv: noEnv})
	const clients, reqs = 8, 400
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	var total int64
	var mu sync.Mutex
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv,
				Ping: PingConfig{Requests: reqs, Warmup: 10}})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			total += res.Totals.RoundTrips
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := s.LoopStats()
	if st.Requests != total {
		t.Errorf("loop executed %d requests, clients got %d replies", st.Requests, total)
	}
	if st.MaxBatch < 2 {
		t.Errorf("no cycle carried more than one request with %d clients: %+v", clients, st)
	}
	if st.Writes > st.Requests {
		t.Errorf("%d writes for %d requests: at most one write per connection per cycle", st.Writes, st.Requests)
	}
}

// A client that sends garbage is closed; the loop keeps serving the others.
func TestBatchLoopProtocolErrorIsolated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.sock")
	s := startBatch(t, ServerConfig{Listen: "unix://" + path, Getenv: noEnv})
	bad, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	// A frame with a valid header whose command type is unknown.
	var f bytes.Buffer
	binary.Write(&f, binary.LittleEndian, []uint32{wire.Magic, wire.CmdHeaderSize, 0x7fff0000, wire.FlagReplyWanted, 0, 1})
	if _, err := bad.Write(f.Bytes()); err != nil {
		t.Fatal(err)
	}
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(bad); err != nil && !errors.Is(err, io.EOF) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection with an unknown command was not closed")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv, Ping: PingConfig{Requests: 50}}); err != nil {
		t.Fatalf("good client after a bad one: %v", err)
	}
	if st := s.Stats(); st.ProtocolErrors != 1 {
		t.Errorf("protocol errors = %d, want 1", st.ProtocolErrors)
	}
}

// A traced batch server writes its frames and its loop counters into the trace.
func TestBatchLoopTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.plt")
	w, err := trace.Create(path, TraceMeta([]string{"test"}, 64), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewBatchServer(ServerConfig{Listen: listenAddr(t, "tcp"), Getenv: noEnv, Trace: w})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	res, err := RunWorkload(cctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Mode: ModePipeline, Depth: 4, Getenv: noEnv, Ping: PingConfig{Requests: 100, Warmup: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sent, recv int64
	for _, e := range f.Events {
		switch e.Dir {
		case trace.DirSend:
			sent++
		case trace.DirRecv:
			recv++
		}
	}
	if sent != res.Totals.FramesRecv || recv != res.Totals.FramesSent {
		t.Errorf("trace: %d sent, %d received frames; client: %d sent, %d received", sent, recv, res.Totals.FramesSent, res.Totals.FramesRecv)
	}
	if f.Footer == nil || f.Footer.Stats["loop.requests"] != recv || f.Footer.Stats["loop.cycles"] == 0 {
		t.Errorf("loop counters missing from the trace footer: %+v", f.Footer)
	}
}

// FuzzBatchExecFrame feeds arbitrary byte streams, cut into frames, to the batch loop's frame
// executor on one device: no panic, every reply frame well formed, nothing left alive after the
// device is released.
func FuzzBatchExecFrame(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var live device.Budget
		dev := device.New(64, 1<<20, 1<<20, &live)
		fr := transport.NewFrameReader(&memConn{r: bytes.NewReader(data)}, 1<<20)
		var deferred []deferredRec
		var out []byte
		for i := 0; i < 64; i++ {
			payload, err := fr.Read()
			if err != nil {
				break
			}
			var ferr error
			out, ferr = execFrame(dev, payload, out[:0], &deferred, 0)
			for off := 0; off < len(out); {
				h, err := wire.ParseFrameHeader(out[off:], 1<<30)
				if err != nil || off+wire.HeaderSize+int(h.Size) > len(out) {
					t.Fatalf("reply frame at %d of %d bytes: %v", off, len(out), err)
				}
				it := wire.NewCommandIter(out[off+wire.HeaderSize : off+wire.HeaderSize+int(h.Size)])
				var c wire.Command
				for it.Next(&c) {
					if c.Flags&wire.FlagReply == 0 {
						t.Fatalf("reply record without the reply flag: %+v", c)
					}
				}
				if it.Err() != nil {
					t.Fatalf("reply frame does not parse: %v", it.Err())
				}
				off += wire.HeaderSize + int(h.Size)
			}
			if ferr != nil {
				break
			}
		}
		dev.Release()
		if live.Objects.Load() != 0 || live.Bytes.Load() != 0 {
			t.Fatalf("objects left after release: %d objects, %d bytes", live.Objects.Load(), live.Bytes.Load())
		}
	})
}

func TestNewLoopServer(t *testing.T) {
	for _, c := range []struct {
		loop  string
		batch bool
	}{{"", false}, {"conn", false}, {"batch", true}} {
		s, err := NewLoopServer(c.loop, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.(*BatchServer); ok != c.batch {
			t.Errorf("loop %q: %T", c.loop, s)
		}
		s.Close()
	}
	if _, err := NewLoopServer("threads", ServerConfig{}); err == nil {
		t.Error("loop threads: no error")
	}
}

// A TCP client that sends requests but never reads its replies stalls the one loop only until
// FrameTimeout: then the server drops it and serves the others.
func TestBatchLoopStalledReader(t *testing.T) {
	s := startBatch(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, FrameTimeout: 300 * time.Millisecond,
		SocketBufferBytes: 64 << 10})
	a, err := transport.ParseAddr(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	stall, err := net.Dial("tcp", a.Where)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	stall.(*net.TCPConn).SetReadBuffer(16 << 10)
	big := frameOf(cmdOf(wire.CmdPing, wire.FlagReplyWanted, 1, func(e *wire.Encoder) { e.U32(1 << 20) }))
	go func() {
		for i := 0; i < 64; i++ { // 64 MiB of replies asked for, none read
			if _, err := stall.Write(big); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv, Ping: PingConfig{Requests: 50}}); err != nil {
		t.Fatalf("good client next to a stalled one: %v", err)
	}
	t.Logf("good client done after %v", time.Since(start))
}

// BenchmarkLoopPing measures one ping round trip per op over a Unix socket, with the
// per-connection loop and the batch loop, for 1 and 8 closed-loop clients (ops are split among
// the clients). Compare the loops within one run: go test -bench LoopPing -count 6.
func BenchmarkLoopPing(b *testing.B) {
	for _, loop := range []string{"conn", "batch"} {
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", loop, clients), func(b *testing.B) {
				s, err := NewLoopServer(loop, ServerConfig{Listen: "unix://" + filepath.Join(b.TempDir(), "v.sock"), Getenv: noEnv})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- s.Serve(ctx) }()
				defer func() { cancel(); <-done }()
				per := max(1, b.N/clients)
				b.ResetTimer()
				var wg sync.WaitGroup
				for i := 0; i < clients; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv,
							Ping: PingConfig{Requests: per, Warmup: 1}}); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if bs, ok := s.(*BatchServer); ok {
					b.ReportMetric(bs.LoopStats().RequestsPerCycle(), "req/cycle")
				}
			})
		}
	}
}

func TestLoopHist(t *testing.T) {
	var live loopHistLive
	for _, ns := range []int64{0, 3, 7, 8, 15, 16, 1000, 1000, 1000, 1 << 40} {
		live.add(time.Duration(ns))
	}
	h := live.load()
	if h.N() != 10 {
		t.Fatalf("N = %d, want 10", h.N())
	}
	for i := 8; i < loopHistBuckets-1; i++ {
		lo, hi := loopBucketLow(i), loopBucketLow(i+1)
		if hi > 1<<62 {
			break // past any duration
		}
		if loopBucket(int64(lo)) != i || loopBucket(int64(hi)-1) != i || hi/lo > 1.126 {
			t.Fatalf("bucket %d: [%v, %v) maps to %d..%d", i, lo, hi, loopBucket(int64(lo)), loopBucket(int64(hi)-1))
		}
	}
	if q := h.Quantile(0.7); q < 1000*0.875 || q > 1000*1.125 {
		t.Errorf("p70 = %v ns, want about 1000", q)
	}
	if q := h.Quantile(0); q != 0.5 {
		t.Errorf("p0 = %v, want the middle of bucket 0", q)
	}
	var empty LoopHist
	if empty.Quantile(0.5) != 0 {
		t.Error("quantile of an empty histogram is not 0")
	}
}
