package venusd

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/perflab/perflab/units"
	"github.com/perflab/perflab/venusd/device"
	"github.com/perflab/perflab/venusd/wire"
)

// icd is what the llm workload needs from the ICD: build a command, carry it out as its kind
// asks. The network client implements it in every mode; localICD runs the same commands on an
// in-process device, without a network, for the reference checksum.
type icd interface {
	start(t wire.CommandType, k callKind) *wire.Encoder
	done(k callKind) ([]reply, error)
	finishCmd()
	coalescing() bool
}

// Object handles of the llm workload. The ICD chooses handles, as Venus does with its object
// ids; the three host-coherent mappings carry the handles seed 001 observed.
const (
	hState   = 0x9   // host-coherent: hidden state, two H-float halves
	hLogits  = 0x11  // host-coherent: logits
	hParams  = 0x19  // host-coherent: token id (u32) and position (u32)
	hEmbed   = 0x100 // embedding table, vocab × H
	hLayer0  = 0x101 // + l: layer l's H×H matrix
	hOutput  = 0x180 // output projection, vocab × H
	hStaging = 0x200 // host-written data sent with each submit
	hCmdBuf0 = 0x300 // + s: command buffer of submit s
	hFence0  = 0x400 // + w: fence of wait w
	queueID  = 1
)

// memRange is a range of a memory object.
type memRange struct {
	mem, off, size uint64
}

// invalidatePolicy is the client's auto-invalidate decision (seed 001), read from
// VENUS_INVALIDATE_ON_WAIT, VENUS_INVALIDATE_MAX_BYTES and VENUS_INVALIDATE_HANDLES.
type invalidatePolicy struct {
	enabled bool
	cap     int64
	handles map[uint64]bool // nil: every handle
	list    []uint64
}

// DefaultInvalidateMaxBytes is the auto-invalidate cap when VENUS_INVALIDATE_MAX_BYTES is unset
// (seed 001's 256 KiB).
const DefaultInvalidateMaxBytes = 256 << 10

func readInvalidatePolicy(getenv func(string) string) (invalidatePolicy, error) {
	p := invalidatePolicy{enabled: true, cap: DefaultInvalidateMaxBytes}
	switch v := strings.ToLower(strings.TrimSpace(getenv("VENUS_INVALIDATE_ON_WAIT"))); v {
	case "", "1", "true", "on", "yes":
	case "0", "false", "off", "no":
		p.enabled = false
	default:
		return p, fmt.Errorf("VENUS_INVALIDATE_ON_WAIT=%q: want 0 or 1", v)
	}
	if v := getenv("VENUS_INVALIDATE_MAX_BYTES"); v != "" {
		n, err := units.ParseBytes(v)
		if err != nil {
			return p, fmt.Errorf("VENUS_INVALIDATE_MAX_BYTES: %w", err)
		}
		p.cap = n
	}
	if v := strings.TrimSpace(getenv("VENUS_INVALIDATE_HANDLES")); v != "" {
		p.handles = map[uint64]bool{}
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			h, err := strconv.ParseUint(f, 0, 64)
			if err != nil {
				return p, fmt.Errorf("VENUS_INVALIDATE_HANDLES: bad handle %q", f)
			}
			p.handles[h] = true
			p.list = append(p.list, h)
		}
	}
	return p, nil
}

// mapping is a host-coherent mapping and its client shadow copy.
type mapping struct {
	handle uint64
	shadow []byte
}

// llmRun is one run of the token loop over an icd.
type llmRun struct {
	cfg    LLMConfig
	x      icd
	inv    invalidatePolicy
	maps   []*mapping // host-coherent, by handle
	vocab  int
	hash   uint64
	ranges []memRange // auto-invalidate batch, decided once (the mappings never change)
	stats  Invalidate
	stage  []byte
	// onToken, when set, is called at the start (begin=true) and end of each token; onLoaded
	// after the load phase.
	onToken  func(t int, begin bool)
	onLoaded func()
}

// normalize fills zero fields with defaults and checks the rest.
func (c LLMConfig) normalize() (LLMConfig, error) {
	d := DefaultLLMConfig()
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.Tokens, d.Tokens)
	set(&c.Hidden, d.Hidden)
	set(&c.SubmitsPerToken, d.SubmitsPerToken)
	set(&c.WaitsPerToken, d.WaitsPerToken)
	set(&c.SubmitMinBytes, d.SubmitMinBytes)
	set(&c.SubmitMaxBytes, d.SubmitMaxBytes)
	set(&c.StateBytes, d.StateBytes)
	set(&c.LogitsBytes, d.LogitsBytes)
	set(&c.ParamsBytes, d.ParamsBytes)
	set(&c.UploadChunk, d.UploadChunk)
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	switch {
	case c.Tokens < 0 || c.Tokens > 1<<20:
		return c, fmt.Errorf("tokens %d: want 1 to %d", c.Tokens, 1<<20)
	case c.Hidden < 1 || c.Hidden > 4096:
		return c, fmt.Errorf("hidden %d: want 1 to 4096", c.Hidden)
	case c.SubmitsPerToken < 1 || c.SubmitsPerToken > 64:
		return c, fmt.Errorf("submits per token %d: want 1 to 64", c.SubmitsPerToken)
	case c.WaitsPerToken < 1 || c.WaitsPerToken > c.SubmitsPerToken || c.SubmitsPerToken%c.WaitsPerToken != 0:
		return c, fmt.Errorf("waits per token %d: want a divisor of submits per token (%d)", c.WaitsPerToken, c.SubmitsPerToken)
	case c.SubmitMinBytes < 4 || c.SubmitMaxBytes < c.SubmitMinBytes || c.SubmitMaxBytes > 16<<20:
		return c, fmt.Errorf("submit bytes %d..%d: want 4 <= min <= max <= 16MiB", c.SubmitMinBytes, c.SubmitMaxBytes)
	case c.StateBytes < 8*c.Hidden || c.StateBytes > 64<<20:
		return c, fmt.Errorf("state mapping %d bytes: want at least 8×hidden = %d", c.StateBytes, 8*c.Hidden)
	case c.LogitsBytes < 8 || c.LogitsBytes > 64<<20:
		return c, fmt.Errorf("logits mapping %d bytes: want 8 bytes to 64MiB", c.LogitsBytes)
	case c.ParamsBytes < 8 || c.ParamsBytes > 1<<20:
		return c, fmt.Errorf("params mapping %d bytes: want 8 bytes to 1MiB", c.ParamsBytes)
	case c.UploadChunk < 4096 || c.UploadChunk > 16<<20:
		return c, fmt.Errorf("upload chunk %d: want 4KiB to 16MiB", c.UploadChunk)
	case int64(c.LogitsBytes/4)*int64(c.Hidden)*4 > 512<<20:
		return c, fmt.Errorf("model of %d×%d floats is too large", c.LogitsBytes/4, c.Hidden)
	}
	return c, nil
}

// Validate checks the configuration (zero fields count as their defaults).
func (c LLMConfig) Validate() error {
	_, err := c.normalize()
	return err
}

// splitmix64 is the workload's deterministic generator.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// fillFloats fills b (a multiple of 4 bytes) with values in [-scale, scale) from seed.
func fillFloats(b []byte, seed uint64, scale float32) {
	s := seed
	for i := 0; i+4 <= len(b); i += 4 {
		s = splitmix64(s)
		v := (float32(s>>40)/float32(1<<24)*2 - 1) * scale
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
}

func (r *llmRun) submitBytes(t, s int) int {
	span := uint64(r.cfg.SubmitMaxBytes - r.cfg.SubmitMinBytes + 1)
	n := r.cfg.SubmitMinBytes + int(splitmix64(r.cfg.Seed^uint64(t)<<20^uint64(s)<<8^0xA5)%span)
	return max(4, n&^3)
}

func (r *llmRun) async(t wire.CommandType, args func(e *wire.Encoder)) error {
	args(r.x.start(t, kindAsync))
	_, err := r.x.done(kindAsync)
	return err
}

func (r *llmRun) alloc(h uint64, size int, props uint32) error {
	return r.async(wire.CmdAllocateMemory, func(e *wire.Encoder) { e.U64(h); e.U64(uint64(size)); e.U32(props) })
}

func (r *llmRun) mapMem(h uint64) error {
	return r.async(wire.CmdMapMemory, func(e *wire.Encoder) { e.U64(h); e.U64(0); e.U64(device.WholeSize) })
}

// transfer writes data to memory h at off (Venus Plus's TransferMemoryData).
func (r *llmRun) transfer(h uint64, off int, data []byte) error {
	e := r.x.start(wire.CmdTransferMemoryData, kindAsync)
	e.U64(h)
	e.U64(uint64(off))
	e.U64(uint64(len(data)))
	e.Bytes(data)
	_, err := r.x.done(kindAsync)
	return err
}

func (r *llmRun) dispatch(cb uint64, kernel uint32, b [3]memRange, p0, p1 uint32) error {
	return r.async(wire.CmdDispatch, func(e *wire.Encoder) {
		e.U64(cb)
		e.U32(kernel)
		e.U32(0)
		for _, x := range b {
			e.U64(x.mem)
			e.U64(x.off)
		}
		e.U32(p0)
		e.U32(p1)
		e.U32(0)
		e.U32(0)
	})
}

// load allocates and maps the memory objects, uploads the weights, creates fences and command
// buffers, and ends on a sync point.
func (r *llmRun) load() error {
	r.vocab = r.cfg.LogitsBytes / 4
	for _, step := range []func() error{r.mapCoherent, r.uploadWeights, r.createObjects} {
		if err := step(); err != nil {
			return err
		}
	}
	r.planInvalidate()
	return r.loadSync()
}

// mapCoherent allocates and maps the host-coherent objects (state, logits, parameters), each
// with its client shadow copy.
func (r *llmRun) mapCoherent() error {
	c := r.cfg
	coherent := uint32(wire.MemHostVisible | wire.MemHostCoherent)
	for _, m := range []struct {
		h     uint64
		size  int
		props uint32
	}{{hState, c.StateBytes, coherent}, {hLogits, c.LogitsBytes, coherent}, {hParams, c.ParamsBytes, coherent}} {
		if err := r.alloc(m.h, m.size, m.props); err != nil {
			return err
		}
		if err := r.mapMem(m.h); err != nil {
			return err
		}
		r.maps = append(r.maps, &mapping{handle: m.h, shadow: make([]byte, m.size)})
	}
	return nil
}

// weight is one weight matrix of the model: its memory object, size in bytes, and the seed and
// scale of its values.
type weight struct {
	h     uint64
	size  int
	seed  uint64
	scale float32
}

// uploadWeights allocates each weight matrix, uploads it in UploadChunk pieces, flushes and
// unmaps it.
func (r *llmRun) uploadWeights() error {
	c := r.cfg
	H := c.Hidden
	weights := []weight{{hEmbed, r.vocab * H * 4, 1, 1}}
	for l := 0; l < c.SubmitsPerToken; l++ {
		weights = append(weights, weight{hLayer0 + uint64(l), H * H * 4, uint64(10 + l), 2 / float32(math.Sqrt(float64(H)))})
	}
	weights = append(weights, weight{hOutput, r.vocab * H * 4, 2, 1 / float32(math.Sqrt(float64(H)))})
	buf := make([]byte, c.UploadChunk&^3)
	for _, w := range weights {
		if err := r.uploadWeight(w, buf); err != nil {
			return err
		}
	}
	return nil
}

// uploadWeight allocates, maps, fills (through buf), flushes and unmaps one weight matrix.
func (r *llmRun) uploadWeight(w weight, buf []byte) error {
	visible := uint32(wire.MemHostVisible)
	if err := r.alloc(w.h, w.size, visible); err != nil {
		return err
	}
	if err := r.mapMem(w.h); err != nil {
		return err
	}
	for off, chunk := 0, 0; off < w.size; off, chunk = off+len(buf), chunk+1 {
		n := min(len(buf), w.size-off)
		fillFloats(buf[:n], splitmix64(r.cfg.Seed^w.seed<<32^uint64(chunk)), w.scale)
		if err := r.transfer(w.h, off, buf[:n]); err != nil {
			return err
		}
	}
	if err := r.async(wire.CmdFlushMappedMemoryRanges, func(e *wire.Encoder) {
		e.U32(1)
		e.U64(w.h)
		e.U64(0)
		e.U64(device.WholeSize)
	}); err != nil {
		return err
	}
	return r.async(wire.CmdUnmapMemory, func(e *wire.Encoder) { e.U64(w.h) })
}

// createObjects allocates and maps the staging memory, and creates the command buffers and
// fences of the token loop.
func (r *llmRun) createObjects() error {
	c := r.cfg
	stagingSize := (c.SubmitMaxBytes + 3) &^ 3
	r.stage = make([]byte, stagingSize)
	if err := r.alloc(hStaging, stagingSize, uint32(wire.MemHostVisible)); err != nil {
		return err
	}
	if err := r.mapMem(hStaging); err != nil {
		return err
	}
	for s := 0; s < c.SubmitsPerToken; s++ {
		if err := r.async(wire.CmdAllocateCommandBuffers, func(e *wire.Encoder) { e.U64(hCmdBuf0 + uint64(s)) }); err != nil {
			return err
		}
	}
	for w := 0; w < c.WaitsPerToken; w++ {
		if err := r.async(wire.CmdCreateFence, func(e *wire.Encoder) { e.U64(hFence0 + uint64(w)); e.U32(0) }); err != nil {
			return err
		}
	}
	return nil
}

// planInvalidate decides the auto-invalidate batch once (the mappings do not change during
// the loop): the mappings the policy allows, within its byte cap.
func (r *llmRun) planInvalidate() {
	sort.Slice(r.maps, func(i, j int) bool { return r.maps[i].handle < r.maps[j].handle })
	r.stats = Invalidate{Enabled: r.inv.enabled, CapBytes: r.inv.cap, Handles: r.inv.list}
	if !r.inv.enabled {
		return
	}
	total := int64(0)
	for _, m := range r.maps {
		if r.inv.handles != nil && !r.inv.handles[m.handle] {
			r.stats.SkippedHandle++
			continue
		}
		if total+int64(len(m.shadow)) > r.inv.cap {
			r.stats.SkippedLarge++
			continue
		}
		total += int64(len(m.shadow))
		r.ranges = append(r.ranges, memRange{m.handle, 0, uint64(len(m.shadow))})
	}
	r.stats.Eligible = len(r.ranges)
	r.stats.BytesPerWait = total
}

// loadSync ends the load on a sync point, where its deferred errors surface.
func (r *llmRun) loadSync() error {
	e := r.x.start(wire.CmdGetFenceStatus, kindSync)
	e.U64(hFence0)
	rs, err := r.x.done(kindSync)
	if err != nil {
		return err
	}
	if res := findResult(rs, wire.CmdGetFenceStatus); res != wire.VkNotReady {
		return fmt.Errorf("load: vkGetFenceStatus: %s, want VK_NOT_READY", wire.ResultName(res))
	}
	return nil
}

func findReply(rs []reply, t wire.CommandType) *reply {
	for i := range rs {
		if rs[i].cmd == t && !rs[i].deferred {
			return &rs[i]
		}
	}
	return nil
}

func findResult(rs []reply, t wire.CommandType) int32 {
	if r := findReply(rs, t); r != nil {
		return r.result
	}
	return wire.VkErrorUnknown
}

func (r *llmRun) shadow(h uint64) []byte {
	for _, m := range r.maps {
		if m.handle == h {
			return m.shadow
		}
	}
	return nil
}

// waitAndInvalidate waits for fence and, when it signalled, reads the auto-invalidate batch
// back into the shadow copies. Coalescing ICDs send both in one frame and drop the data if the
// wait did not succeed.
func (r *llmRun) waitAndInvalidate(fence uint64) error {
	waitArgs := func(e *wire.Encoder) {
		e.U32(1)                // waitAll
		e.U64(uint64(1e9) * 10) // timeout ns
		e.U32(1)
		e.U64(fence)
	}
	readArgs := func(e *wire.Encoder) {
		e.U32(uint32(len(r.ranges)))
		for _, g := range r.ranges {
			e.U64(g.mem)
			e.U64(g.off)
			e.U64(g.size)
		}
	}
	var rs []reply
	var err error
	if r.x.coalescing() && len(r.ranges) > 0 {
		waitArgs(r.x.start(wire.CmdWaitForFences, kindSync))
		r.x.finishCmd()
		readArgs(r.x.start(wire.CmdReadMemoryData, kindSync))
		if rs, err = r.x.done(kindSync); err != nil {
			return err
		}
		if res := findResult(rs, wire.CmdWaitForFences); res != wire.VkSuccess {
			return fmt.Errorf("vkWaitForFences: %s", wire.ResultName(res))
		}
	} else {
		waitArgs(r.x.start(wire.CmdWaitForFences, kindSync))
		if rs, err = r.x.done(kindSync); err != nil {
			return err
		}
		if res := findResult(rs, wire.CmdWaitForFences); res != wire.VkSuccess {
			return fmt.Errorf("vkWaitForFences: %s", wire.ResultName(res))
		}
		if len(r.ranges) == 0 {
			r.stats.Waits++
			return nil
		}
		readArgs(r.x.start(wire.CmdReadMemoryData, kindSync))
		if rs, err = r.x.done(kindSync); err != nil {
			return err
		}
	}
	rd := findReply(rs, wire.CmdReadMemoryData)
	if rd == nil || rd.result != wire.VkSuccess {
		return fmt.Errorf("auto-invalidate: vnReadMemoryData: %s", wire.ResultName(findResult(rs, wire.CmdReadMemoryData)))
	}
	data := rd.data
	for _, g := range r.ranges {
		if uint64(len(data)) < g.size {
			return fmt.Errorf("auto-invalidate: reply of %d bytes is short", len(rd.data))
		}
		copy(r.shadow(g.mem)[g.off:], data[:g.size])
		data = data[g.size:]
	}
	r.stats.Waits++
	return nil
}

func (r *llmRun) mix(b []byte) {
	h := fnv.New64a()
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], r.hash)
	h.Write(s[:])
	h.Write(b)
	r.hash = h.Sum64()
}

// token runs one token: parameters, submits, waits, sampling.
func (r *llmRun) token(t int, tok uint32) (uint32, error) {
	c := r.cfg
	H := uint32(c.Hidden)
	params := r.shadow(hParams)
	binary.LittleEndian.PutUint32(params[0:], tok)
	binary.LittleEndian.PutUint32(params[4:], uint32(t))
	if err := r.transfer(hParams, 0, params[:8]); err != nil {
		return 0, err
	}
	perWait := c.SubmitsPerToken / c.WaitsPerToken
	cur, other := uint64(0), uint64(4*H)
	for s := 0; s < c.SubmitsPerToken; s++ {
		g := s / perWait
		fence := hFence0 + uint64(g)
		if s%perWait == 0 {
			if err := r.async(wire.CmdResetFences, func(e *wire.Encoder) { e.U32(1); e.U64(fence) }); err != nil {
				return 0, err
			}
		}
		n := r.submitBytes(t, s)
		fillFloats(r.stage[:n], splitmix64(c.Seed^0x5747^uint64(t)<<16^uint64(s)), 1)
		if err := r.transfer(hStaging, 0, r.stage[:n]); err != nil {
			return 0, err
		}
		cb := hCmdBuf0 + uint64(s)
		var err error
		if cur, other, err = r.recordSubmit(cb, s, n, cur, other); err != nil {
			return 0, err
		}
		last := s%perWait == perWait-1
		e := r.x.start(wire.CmdQueueSubmit, kindSubmit)
		e.U64(queueID)
		if last {
			e.U64(fence)
		} else {
			e.U64(0)
		}
		e.U32(1)
		e.U64(cb)
		if _, err := r.x.done(kindSubmit); err != nil {
			return 0, err
		}
		if last {
			if err := r.waitAndInvalidate(fence); err != nil {
				return 0, err
			}
			r.mix(r.shadow(hState)[:8*H])
		}
	}
	return r.sample(), nil
}

// recordSubmit records submit s (of n staged bytes) into command buffer cb: the embedding on
// the first submit, the staged data and one layer on each, the output projection on the last.
// cur and other are the offsets of the two halves of the state; the layer swaps them, and
// recordSubmit returns them swapped.
func (r *llmRun) recordSubmit(cb uint64, s, n int, cur, other uint64) (uint64, uint64, error) {
	H := uint32(r.cfg.Hidden)
	if err := r.async(wire.CmdBeginCommandBuffer, func(e *wire.Encoder) { e.U64(cb) }); err != nil {
		return cur, other, err
	}
	if s == 0 {
		if err := r.dispatch(cb, device.KernelEmbed, [3]memRange{{mem: hEmbed}, {mem: hParams}, {mem: hState, off: cur}}, H, uint32(r.vocab)); err != nil {
			return cur, other, err
		}
	}
	if err := r.dispatch(cb, device.KernelStage, [3]memRange{{mem: hStaging}, {mem: hStaging}, {mem: hState, off: cur}}, H, uint32(n/4)); err != nil {
		return cur, other, err
	}
	if err := r.dispatch(cb, device.KernelMatVecTanh, [3]memRange{{mem: hLayer0 + uint64(s)}, {mem: hState, off: cur}, {mem: hState, off: other}}, H, H); err != nil {
		return cur, other, err
	}
	cur, other = other, cur
	if s == r.cfg.SubmitsPerToken-1 {
		if err := r.dispatch(cb, device.KernelMatVec, [3]memRange{{mem: hOutput}, {mem: hState, off: cur}, {mem: hLogits}}, uint32(r.vocab), H); err != nil {
			return cur, other, err
		}
	}
	err := r.async(wire.CmdEndCommandBuffer, func(e *wire.Encoder) { e.U64(cb) })
	return cur, other, err
}

// sample picks the next token greedily from what the application sees, its shadow copy of the
// logits, and mixes it (and its logit) into the checksum.
func (r *llmRun) sample() uint32 {
	lg := r.shadow(hLogits)
	logits := unsafe.Slice((*float32)(unsafe.Pointer(&lg[0])), r.vocab)
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], uint32(best))
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(logits[best]))
	r.mix(b[:])
	return uint32(best)
}

// run runs the whole workload and returns the checksum.
func (r *llmRun) run() (uint64, error) {
	if err := r.load(); err != nil {
		return 0, fmt.Errorf("load: %w", err)
	}
	if r.onLoaded != nil {
		r.onLoaded()
	}
	tok := uint32(splitmix64(r.cfg.Seed^0x70) % uint64(r.vocab))
	for t := 0; t < r.cfg.Tokens; t++ {
		if r.onToken != nil {
			r.onToken(t, true)
		}
		next, err := r.token(t, tok)
		if err != nil {
			return 0, fmt.Errorf("token %d: %w", t, err)
		}
		tok = next
		if r.onToken != nil {
			r.onToken(t, false)
		}
	}
	return r.hash, nil
}

// localICD runs commands on an in-process device: the same encoding, decoding and kernels as
// the server, without a network or framing.
type localICD struct {
	dev    *device.Device
	enc    wire.Encoder
	curOff int
	rep    wire.Encoder
}

func newLocalICD() *localICD {
	l := &localICD{dev: device.New(DefaultMaxObjects, DefaultMaxMemoryBytes, DefaultMaxFrameBytes, nil)}
	l.enc.Reset()
	l.rep.Reset()
	return l
}

func (l *localICD) start(t wire.CommandType, k callKind) *wire.Encoder {
	l.enc.Reset()
	l.curOff = l.enc.Begin(t, wire.FlagReplyWanted, 1)
	return &l.enc
}

func (l *localICD) finishCmd()       { l.enc.End(l.curOff) }
func (l *localICD) coalescing() bool { return false }

func (l *localICD) done(k callKind) ([]reply, error) {
	l.enc.End(l.curOff)
	it := wire.NewCommandIter(l.enc.Payload())
	var c wire.Command
	if !it.Next(&c) {
		return nil, fmt.Errorf("local: %v", it.Err())
	}
	l.rep.Reset()
	res, err := l.dev.Exec(&c, &l.rep)
	if err != nil {
		return nil, err
	}
	if k != kindSync && res < 0 {
		return nil, &wire.VkError{Cmd: c.Type, ReqID: c.ReqID, Result: res}
	}
	return []reply{{cmd: c.Type, req: c.ReqID, result: res, data: l.rep.Payload()}}, nil
}

// ReferenceChecksum runs the llm workload in-process, without a network, with auto-invalidate
// on and uncapped: the checksum every mode and transport must reproduce.
func ReferenceChecksum(cfg LLMConfig) (string, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return "", err
	}
	r := &llmRun{cfg: cfg, x: newLocalICD(), inv: invalidatePolicy{enabled: true, cap: math.MaxInt64}}
	sum, err := r.run()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%016x", sum), nil
}
