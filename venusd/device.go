package venusd

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"
)

// Kernels a vkCmdDispatch can run (the "pipeline" of the dispatch). Every kernel reads and writes
// float32 little-endian values in device memory.
const (
	KernelEmbed      = 1 // out[0:H] = table[tok*H : tok*H+H], tok = u32 at binding 1
	KernelStage      = 2 // out[j%H] += in[j] / 1024 for j < P1
	KernelMatVecTanh = 3 // out[0:P0] = tanh(W[P0×P1] · x[0:P1])
	KernelMatVec     = 4 // out[0:P0] = W[P0×P1] · x[0:P1]
)

const (
	maxOpsPerCmdBuf = 4096    // dispatches recorded in one command buffer
	maxKernelDim    = 1 << 24 // rows or cols of a kernel
	wholeSize       = ^uint64(0)
)

// binding is a (memory object, byte offset) pair of a dispatch.
type binding struct {
	mem uint64
	off uint64
}

// dispatchOp is one recorded vkCmdDispatch.
type dispatchOp struct {
	kernel uint32
	b      [3]binding
	p      [4]uint32
}

type memObj struct {
	data    []byte
	props   uint32
	mapped  bool
	mapOff  uint64
	mapSize uint64
}

type cmdBufState uint8

const (
	cbInitial cmdBufState = iota
	cbRecording
	cbExecutable
)

type cmdBuf struct {
	state cmdBufState
	ops   []dispatchOp
}

// liveCounters are shared by the devices of a server.
type liveCounters struct {
	objects  atomic.Int64
	bytes    atomic.Int64
	maxBytes int64 // device memory of all connections together; 0: no limit
}

// room returns the bytes left in the budget (a large number when there is no limit).
func (l *liveCounters) room() int {
	if l.maxBytes <= 0 {
		return 1 << 62
	}
	return int(max(0, l.maxBytes-l.bytes.Load()))
}

// device is the emulated GPU of one connection: its own handle table and quotas. It is not safe
// for concurrent use: one connection's commands run in order on one goroutine.
type device struct {
	maxObjects int
	maxBytes   int64
	maxReply   int

	mem    map[uint64]*memObj
	fences map[uint64]bool // signaled
	cbs    map[uint64]*cmdBuf

	objects int
	bytes   int64
	live    *liveCounters
}

func newDevice(maxObjects int, maxBytes int64, maxReply int, live *liveCounters) *device {
	if live == nil {
		live = &liveCounters{}
	}
	return &device{
		maxObjects: maxObjects, maxBytes: maxBytes, maxReply: maxReply,
		mem: map[uint64]*memObj{}, fences: map[uint64]bool{}, cbs: map[uint64]*cmdBuf{},
		live: live,
	}
}

// release frees every object of the device (the client disconnected).
func (d *device) release() {
	d.live.objects.Add(-int64(d.objects))
	d.live.bytes.Add(-d.bytes)
	d.objects, d.bytes = 0, 0
	d.mem, d.fences, d.cbs = map[uint64]*memObj{}, map[uint64]bool{}, map[uint64]*cmdBuf{}
}

// addObject accounts for a new object of n bytes against the connection's and the server's
// quotas, before it is allocated.
func (d *device) addObject(n int64) int32 {
	if d.objects >= d.maxObjects {
		return VkErrorTooManyObjects
	}
	if total := d.live.bytes.Add(n); d.live.maxBytes > 0 && total > d.live.maxBytes {
		d.live.bytes.Add(-n)
		return VkErrorOutOfDeviceMemory
	}
	d.objects++
	d.bytes += n
	d.live.objects.Add(1)
	return VkSuccess
}

func (d *device) dropObject(n int64) {
	d.objects--
	d.bytes -= n
	d.live.objects.Add(-1)
	d.live.bytes.Add(-n)
}

// rangeOK reports whether [off, off+size) lies in a buffer of length n, without overflow.
func rangeOK(off, size uint64, n int) bool {
	return off <= uint64(n) && size <= uint64(n)-off
}

// exec runs one command. When out is not nil the command wants a reply: exec appends its reply
// data to out (the caller has written the record header). It returns the VkResult, and a non-nil
// error for a protocol error (malformed arguments, unknown command) after which the connection
// is closed.
func (d *device) exec(c *Command, out *encoder) (int32, error) {
	r := argReader{b: c.Args}
	bad := func() (int32, error) {
		return VkErrorValidationFailed, fmt.Errorf("%w: %s request %d: %d bytes of arguments do not match its layout", ErrMalformed, c.Type, c.ReqID, len(c.Args))
	}
	switch c.Type {
	case CmdAllocateMemory:
		id, size, props := r.u64(), r.u64(), r.u32()
		if !r.done() {
			return bad()
		}
		if id == 0 || d.mem[id] != nil {
			return VkErrorValidationFailed, nil
		}
		if size == 0 || size > uint64(d.maxBytes-d.bytes) {
			return VkErrorOutOfDeviceMemory, nil
		}
		if res := d.addObject(int64(size)); res != VkSuccess {
			return res, nil
		}
		d.mem[id] = &memObj{data: make([]byte, size), props: props}
		return VkSuccess, nil

	case CmdFreeMemory:
		id := r.u64()
		if !r.done() {
			return bad()
		}
		m := d.mem[id]
		if m == nil {
			return VkErrorValidationFailed, nil
		}
		delete(d.mem, id)
		d.dropObject(int64(len(m.data)))
		return VkSuccess, nil

	case CmdMapMemory:
		id, off, size := r.u64(), r.u64(), r.u64()
		if !r.done() {
			return bad()
		}
		m := d.mem[id]
		if m == nil || m.mapped {
			return VkErrorValidationFailed, nil
		}
		if m.props&MemHostVisible == 0 {
			return VkErrorMemoryMapFailed, nil
		}
		if size == wholeSize && off <= uint64(len(m.data)) {
			size = uint64(len(m.data)) - off
		}
		if size == 0 || !rangeOK(off, size, len(m.data)) {
			return VkErrorValidationFailed, nil
		}
		m.mapped, m.mapOff, m.mapSize = true, off, size
		return VkSuccess, nil

	case CmdUnmapMemory:
		id := r.u64()
		if !r.done() {
			return bad()
		}
		m := d.mem[id]
		if m == nil || !m.mapped {
			return VkErrorValidationFailed, nil
		}
		m.mapped = false
		return VkSuccess, nil

	case CmdFlushMappedMemoryRanges, CmdInvalidateMappedMemoryRanges, CmdReadMemoryData:
		n := r.count(24)
		type rng struct {
			m         *memObj
			off, size uint64
		}
		res := VkSuccess
		total := uint64(0)
		// Validate every range before writing any reply byte.
		var first [8]rng
		ranges := first[:0]
		for i := 0; i < n; i++ {
			id, off, size := r.u64(), r.u64(), r.u64()
			m := d.mem[id]
			if m == nil || !m.mapped {
				res = VkErrorValidationFailed
				continue
			}
			if size == wholeSize && off >= m.mapOff && off <= m.mapOff+m.mapSize {
				size = m.mapOff + m.mapSize - off
			}
			if off < m.mapOff || !rangeOK(off-m.mapOff, size, int(m.mapSize)) {
				res = VkErrorValidationFailed
				continue
			}
			total += size
			ranges = append(ranges, rng{m, off, size})
		}
		if !r.done() {
			return bad()
		}
		if res != VkSuccess {
			return res, nil
		}
		if c.Type == CmdFlushMappedMemoryRanges || out == nil {
			return VkSuccess, nil
		}
		if total > uint64(d.maxReply) {
			return VkErrorOutOfHostMemory, nil
		}
		for _, g := range ranges {
			copy(out.grow(int(g.size)), g.m.data[g.off:g.off+g.size])
		}
		return VkSuccess, nil

	case CmdTransferMemoryData:
		id, off, size := r.u64(), r.u64(), r.u64()
		data := r.bytes(size)
		if !r.done() {
			return bad()
		}
		m := d.mem[id]
		if m == nil || !m.mapped || off < m.mapOff || !rangeOK(off-m.mapOff, size, int(m.mapSize)) {
			return VkErrorValidationFailed, nil
		}
		copy(m.data[off:], data)
		return VkSuccess, nil

	case CmdPing:
		n := r.u32()
		if r.bad {
			return bad()
		}
		if out != nil {
			if int64(n) > int64(d.maxReply) {
				return VkErrorOutOfHostMemory, nil
			}
			clear(out.grow(int(n)))
		}
		return VkSuccess, nil

	case CmdCreateFence:
		id, flags := r.u64(), r.u32()
		if !r.done() {
			return bad()
		}
		if id == 0 {
			return VkErrorValidationFailed, nil
		}
		if _, dup := d.fences[id]; dup {
			return VkErrorValidationFailed, nil
		}
		if res := d.addObject(0); res != VkSuccess {
			return res, nil
		}
		d.fences[id] = flags&1 != 0
		return VkSuccess, nil

	case CmdDestroyFence:
		id := r.u64()
		if !r.done() {
			return bad()
		}
		if _, ok := d.fences[id]; !ok {
			return VkErrorValidationFailed, nil
		}
		delete(d.fences, id)
		d.dropObject(0)
		return VkSuccess, nil

	case CmdResetFences:
		n := r.count(8)
		res := VkSuccess
		for i := 0; i < n; i++ {
			id := r.u64()
			if _, ok := d.fences[id]; !ok {
				res = VkErrorValidationFailed
				continue
			}
			d.fences[id] = false
		}
		if !r.done() {
			return bad()
		}
		return res, nil

	case CmdGetFenceStatus:
		id := r.u64()
		if !r.done() {
			return bad()
		}
		sig, ok := d.fences[id]
		if !ok {
			return VkErrorValidationFailed, nil
		}
		if sig {
			return VkSuccess, nil
		}
		return VkNotReady, nil

	case CmdWaitForFences:
		waitAll, _ := r.u32(), r.u64() // timeout: the queue runs in order, so an unsignaled fence never signals later
		n := r.count(8)
		all, any := true, false
		res := VkSuccess
		for i := 0; i < n; i++ {
			sig, ok := d.fences[r.u64()]
			if !ok {
				res = VkErrorValidationFailed
			}
			all = all && sig
			any = any || sig
		}
		if !r.done() {
			return bad()
		}
		if res != VkSuccess || n == 0 {
			return VkErrorValidationFailed, nil
		}
		if (waitAll != 0 && all) || (waitAll == 0 && any) {
			return VkSuccess, nil
		}
		return VkTimeout, nil

	case CmdAllocateCommandBuffers:
		id := r.u64()
		if !r.done() {
			return bad()
		}
		if id == 0 || d.cbs[id] != nil {
			return VkErrorValidationFailed, nil
		}
		if res := d.addObject(0); res != VkSuccess {
			return res, nil
		}
		d.cbs[id] = &cmdBuf{}
		return VkSuccess, nil

	case CmdFreeCommandBuffers:
		id := r.u64()
		if !r.done() {
			return bad()
		}
		if d.cbs[id] == nil {
			return VkErrorValidationFailed, nil
		}
		delete(d.cbs, id)
		d.dropObject(0)
		return VkSuccess, nil

	case CmdBeginCommandBuffer, CmdEndCommandBuffer:
		id := r.u64()
		if !r.done() {
			return bad()
		}
		cb := d.cbs[id]
		if cb == nil {
			return VkErrorValidationFailed, nil
		}
		if c.Type == CmdBeginCommandBuffer {
			cb.state, cb.ops = cbRecording, cb.ops[:0]
			return VkSuccess, nil
		}
		if cb.state != cbRecording {
			return VkErrorValidationFailed, nil
		}
		cb.state = cbExecutable
		return VkSuccess, nil

	case CmdDispatch:
		var op dispatchOp
		id := r.u64()
		op.kernel = r.u32()
		_ = r.u32() // reserved
		for i := range op.b {
			op.b[i] = binding{r.u64(), r.u64()}
		}
		for i := range op.p {
			op.p[i] = r.u32()
		}
		if !r.done() {
			return bad()
		}
		cb := d.cbs[id]
		if cb == nil || cb.state != cbRecording || len(cb.ops) >= maxOpsPerCmdBuf {
			return VkErrorValidationFailed, nil
		}
		if err := d.runOp(&op, false); err != nil {
			return VkErrorValidationFailed, nil
		}
		cb.ops = append(cb.ops, op)
		return VkSuccess, nil

	case CmdQueueSubmit:
		queue, fence := r.u64(), r.u64()
		n := r.count(8)
		var first [8]*cmdBuf
		list := first[:0]
		res := VkSuccess
		for i := 0; i < n; i++ {
			cb := d.cbs[r.u64()]
			if cb == nil || cb.state != cbExecutable {
				res = VkErrorValidationFailed
				continue
			}
			list = append(list, cb)
		}
		if !r.done() {
			return bad()
		}
		if queue != 1 || res != VkSuccess {
			return VkErrorValidationFailed, nil
		}
		if fence != 0 {
			sig, ok := d.fences[fence]
			if !ok || sig {
				return VkErrorValidationFailed, nil
			}
		}
		for _, cb := range list {
			for i := range cb.ops {
				if err := d.runOp(&cb.ops[i], true); err != nil {
					return VkErrorDeviceLost, nil
				}
			}
		}
		if fence != 0 {
			d.fences[fence] = true
		}
		return VkSuccess, nil
	}
	return VkErrorFeatureNotPresent, fmt.Errorf("unknown command type %d (request %d)", uint32(c.Type), c.ReqID)
}

// f32view returns n float32 values of m at byte offset off, or an error when they do not fit
// or are misaligned.
func (d *device) f32view(b binding, n uint64) ([]float32, error) {
	m := d.mem[b.mem]
	if m == nil {
		return nil, fmt.Errorf("bad memory handle 0x%x", b.mem)
	}
	if b.off%4 != 0 || n > maxKernelDim*64 || !rangeOK(b.off, n*4, len(m.data)) {
		return nil, fmt.Errorf("range %d+%d*4 outside memory 0x%x of %d bytes", b.off, n, b.mem, len(m.data))
	}
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&m.data[b.off])), n), nil
}

// runOp checks a dispatch's bindings and, with run, executes it.
func (d *device) runOp(op *dispatchOp, run bool) error {
	p0, p1 := uint64(op.p[0]), uint64(op.p[1])
	switch op.kernel {
	case KernelEmbed:
		if p0 == 0 || p0 > maxKernelDim || p1 == 0 || p1 > maxKernelDim {
			return fmt.Errorf("embed: bad dims %d×%d", p1, p0)
		}
		table, err := d.f32view(op.b[0], p0*p1)
		if err != nil {
			return err
		}
		tokv, err := d.f32view(op.b[1], 1)
		if err != nil {
			return err
		}
		out, err := d.f32view(op.b[2], p0)
		if err != nil {
			return err
		}
		if !run {
			return nil
		}
		tok := uint64(math.Float32bits(tokv[0]))
		if tok >= p1 {
			return fmt.Errorf("embed: token %d outside vocabulary of %d", tok, p1)
		}
		copy(out, table[tok*p0:(tok+1)*p0])
	case KernelStage:
		if p0 == 0 || p0 > maxKernelDim || p1 > maxKernelDim*4 {
			return fmt.Errorf("stage: bad dims %d, %d", p0, p1)
		}
		in, err := d.f32view(op.b[0], p1)
		if err != nil {
			return err
		}
		out, err := d.f32view(op.b[2], p0)
		if err != nil {
			return err
		}
		if run {
			stageKernel(out, in)
		}
	case KernelMatVecTanh, KernelMatVec:
		if p0 == 0 || p0 > maxKernelDim || p1 == 0 || p1 > maxKernelDim || p0*p1 > maxKernelDim*64 {
			return fmt.Errorf("matvec: bad dims %d×%d", p0, p1)
		}
		w, err := d.f32view(op.b[0], p0*p1)
		if err != nil {
			return err
		}
		x, err := d.f32view(op.b[1], p1)
		if err != nil {
			return err
		}
		out, err := d.f32view(op.b[2], p0)
		if err != nil {
			return err
		}
		if run {
			matVec(out, w, x, op.kernel == KernelMatVecTanh)
		}
	default:
		return fmt.Errorf("unknown kernel %d", op.kernel)
	}
	return nil
}

func stageKernel(out, in []float32) {
	h := len(out)
	for j, v := range in {
		out[j%h] += float32(v * (1.0 / 1024)) // the conversion forbids a fused multiply-add: results are the same on every architecture
	}
}

// matVec computes out = W·x (optionally tanh'd). x is copied first so that out may alias it.
func matVec(out, w, x []float32, tanh bool) {
	xs := make([]float32, len(x))
	copy(xs, x)
	cols := len(xs)
	for i := range out {
		row := w[i*cols : (i+1)*cols]
		var s float32
		for j, v := range row {
			s += float32(v * xs[j]) // no fused multiply-add (see stageKernel)
		}
		if tanh {
			s = float32(math.Tanh(float64(s)))
		}
		out[i] = s
	}
}
