// Package device is venusd's emulated GPU: one Device per connection runs the Vulkan commands
// of the wire format (memory objects, mappings, fences, command buffers, dispatches of a few
// float32 kernels) against its quotas and a Budget of device memory shared by a server's
// connections.
package device

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/perflab/perflab/venusd/wire"
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
)

// WholeSize is VK_WHOLE_SIZE: a mapping or range to the end of the memory object.
const WholeSize = ^uint64(0)

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

// Budget counts the objects and bytes of memory of all the devices and frames of a server.
type Budget struct {
	Objects  atomic.Int64
	Bytes    atomic.Int64
	MaxBytes int64 // device memory of all connections together, bytes; 0: no limit
}

// Room returns the bytes left in the budget (a large number when there is no limit).
func (l *Budget) Room() int {
	if l.MaxBytes <= 0 {
		return 1 << 62
	}
	return int(max(0, l.MaxBytes-l.Bytes.Load()))
}

// Reserve counts n bytes against the budget, waiting until deadline for room; it reports
// whether it did.
func (l *Budget) Reserve(n int64, deadline time.Time) bool {
	for {
		total := l.Bytes.Add(n)
		if l.MaxBytes <= 0 || total <= l.MaxBytes {
			return true
		}
		l.Bytes.Add(-n)
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// Free gives back n bytes that Reserve counted.
func (l *Budget) Free(n int64) { l.Bytes.Add(-n) }

// Device is the emulated GPU of one connection: its own handle table and quotas. It is not safe
// for concurrent use: one connection's commands run in order on one goroutine.
type Device struct {
	maxObjects int
	maxBytes   int64
	maxReply   int

	mem    map[uint64]*memObj
	fences map[uint64]bool // signaled
	cbs    map[uint64]*cmdBuf

	objects int
	bytes   int64
	live    *Budget
}

// New returns a device that holds at most maxObjects objects and maxBytes bytes of memory,
// returns at most maxReply bytes in one reply, and counts its memory in live (nil: a budget of
// its own, without limit).
func New(maxObjects int, maxBytes int64, maxReply int, live *Budget) *Device {
	if live == nil {
		live = &Budget{}
	}
	return &Device{
		maxObjects: maxObjects, maxBytes: maxBytes, maxReply: maxReply,
		mem: map[uint64]*memObj{}, fences: map[uint64]bool{}, cbs: map[uint64]*cmdBuf{},
		live: live,
	}
}

// Release frees every object of the device (the client disconnected).
func (d *Device) Release() {
	d.live.Objects.Add(-int64(d.objects))
	d.live.Bytes.Add(-d.bytes)
	d.objects, d.bytes = 0, 0
	d.mem, d.fences, d.cbs = map[uint64]*memObj{}, map[uint64]bool{}, map[uint64]*cmdBuf{}
}

// addObject accounts for a new object of n bytes against the connection's and the server's
// quotas, before it is allocated.
// SetMaxReply bounds what one command may return from now on, in bytes (the room left in the
// reply frame).
func (d *Device) SetMaxReply(n int) { d.maxReply = n }

func (d *Device) addObject(n int64) int32 {
	if d.objects >= d.maxObjects {
		return wire.VkErrorTooManyObjects
	}
	if total := d.live.Bytes.Add(n); d.live.MaxBytes > 0 && total > d.live.MaxBytes {
		d.live.Bytes.Add(-n)
		return wire.VkErrorOutOfDeviceMemory
	}
	d.objects++
	d.bytes += n
	d.live.Objects.Add(1)
	return wire.VkSuccess
}

func (d *Device) dropObject(n int64) {
	d.objects--
	d.bytes -= n
	d.live.Objects.Add(-1)
	d.live.Bytes.Add(-n)
}

// rangeOK reports whether [off, off+size) lies in a buffer of length n, without overflow.
func rangeOK(off, size uint64, n int) bool {
	return off <= uint64(n) && size <= uint64(n)-off
}

// Exec runs one command. When out is not nil the command wants a reply: Exec appends its reply
// data to out (the caller has written the record header). It returns the VkResult, and a non-nil
// error for a protocol error (malformed arguments, unknown command) after which the connection
// is closed.
func (d *Device) Exec(c *wire.Command, out *wire.Encoder) (int32, error) {
	r := wire.NewArgReader(c.Args)
	switch c.Type {
	case wire.CmdAllocateMemory:
		return d.allocateMemory(c, &r, out)
	case wire.CmdFreeMemory:
		return d.freeMemory(c, &r, out)
	case wire.CmdMapMemory:
		return d.mapMemory(c, &r, out)
	case wire.CmdUnmapMemory:
		return d.unmapMemory(c, &r, out)
	case wire.CmdFlushMappedMemoryRanges, wire.CmdInvalidateMappedMemoryRanges, wire.CmdReadMemoryData:
		return d.memoryRanges(c, &r, out)
	case wire.CmdTransferMemoryData:
		return d.transferMemoryData(c, &r, out)
	case wire.CmdPing:
		return d.ping(c, &r, out)
	case wire.CmdCreateFence:
		return d.createFence(c, &r, out)
	case wire.CmdDestroyFence:
		return d.destroyFence(c, &r, out)
	case wire.CmdResetFences:
		return d.resetFences(c, &r, out)
	case wire.CmdGetFenceStatus:
		return d.getFenceStatus(c, &r, out)
	case wire.CmdWaitForFences:
		return d.waitForFences(c, &r, out)
	case wire.CmdAllocateCommandBuffers:
		return d.allocateCommandBuffers(c, &r, out)
	case wire.CmdFreeCommandBuffers:
		return d.freeCommandBuffers(c, &r, out)
	case wire.CmdBeginCommandBuffer, wire.CmdEndCommandBuffer:
		return d.recordCommandBuffer(c, &r, out)
	case wire.CmdDispatch:
		return d.dispatch(c, &r, out)
	case wire.CmdQueueSubmit:
		return d.queueSubmit(c, &r, out)
	}
	return wire.VkErrorFeatureNotPresent, fmt.Errorf("unknown command type %d (request %d)", uint32(c.Type), c.ReqID)
}

// malformed is the answer to a command whose arguments do not match its layout: a protocol
// error, after which the connection closes.
func malformed(c *wire.Command) (int32, error) {
	return wire.VkErrorValidationFailed, fmt.Errorf("%w: %s request %d: %d bytes of arguments do not match its layout", wire.ErrMalformed, c.Type, c.ReqID, len(c.Args))
}

// allocateMemory runs vkAllocateMemory: a new memory object, within the quotas.
func (d *Device) allocateMemory(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id, size, props := r.U64(), r.U64(), r.U32()
	if !r.Done() {
		return malformed(c)
	}
	if id == 0 || d.mem[id] != nil {
		return wire.VkErrorValidationFailed, nil
	}
	if size == 0 || size > uint64(d.maxBytes-d.bytes) {
		return wire.VkErrorOutOfDeviceMemory, nil
	}
	if res := d.addObject(int64(size)); res != wire.VkSuccess {
		return res, nil
	}
	d.mem[id] = &memObj{data: make([]byte, size), props: props}
	return wire.VkSuccess, nil
}

// freeMemory runs vkFreeMemory.
func (d *Device) freeMemory(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id := r.U64()
	if !r.Done() {
		return malformed(c)
	}
	m := d.mem[id]
	if m == nil {
		return wire.VkErrorValidationFailed, nil
	}
	delete(d.mem, id)
	d.dropObject(int64(len(m.data)))
	return wire.VkSuccess, nil
}

// mapMemory runs vkMapMemory of a host-visible object.
func (d *Device) mapMemory(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id, off, size := r.U64(), r.U64(), r.U64()
	if !r.Done() {
		return malformed(c)
	}
	m := d.mem[id]
	if m == nil || m.mapped {
		return wire.VkErrorValidationFailed, nil
	}
	if m.props&wire.MemHostVisible == 0 {
		return wire.VkErrorMemoryMapFailed, nil
	}
	if size == WholeSize && off <= uint64(len(m.data)) {
		size = uint64(len(m.data)) - off
	}
	if size == 0 || !rangeOK(off, size, len(m.data)) {
		return wire.VkErrorValidationFailed, nil
	}
	m.mapped, m.mapOff, m.mapSize = true, off, size
	return wire.VkSuccess, nil
}

// unmapMemory runs vkUnmapMemory.
func (d *Device) unmapMemory(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id := r.U64()
	if !r.Done() {
		return malformed(c)
	}
	m := d.mem[id]
	if m == nil || !m.mapped {
		return wire.VkErrorValidationFailed, nil
	}
	m.mapped = false
	return wire.VkSuccess, nil
}

// memoryRanges runs vkFlushMappedMemoryRanges, vkInvalidateMappedMemoryRanges and vnReadMemoryData:
// the ranges are checked, and read back into the reply for the last two.
func (d *Device) memoryRanges(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	n := r.Count(24)
	type rng struct {
		m         *memObj
		off, size uint64
	}
	res := wire.VkSuccess
	total := uint64(0)
	// Validate every range before writing any reply byte.
	var first [8]rng
	ranges := first[:0]
	for i := 0; i < n; i++ {
		id, off, size := r.U64(), r.U64(), r.U64()
		m := d.mem[id]
		if m == nil || !m.mapped {
			res = wire.VkErrorValidationFailed
			continue
		}
		if size == WholeSize && off >= m.mapOff && off <= m.mapOff+m.mapSize {
			size = m.mapOff + m.mapSize - off
		}
		if off < m.mapOff || !rangeOK(off-m.mapOff, size, int(m.mapSize)) {
			res = wire.VkErrorValidationFailed
			continue
		}
		total += size
		ranges = append(ranges, rng{m, off, size})
	}
	if !r.Done() {
		return malformed(c)
	}
	if res != wire.VkSuccess {
		return res, nil
	}
	if c.Type == wire.CmdFlushMappedMemoryRanges || out == nil {
		return wire.VkSuccess, nil
	}
	if total > uint64(d.maxReply) {
		return wire.VkErrorOutOfHostMemory, nil
	}
	for _, g := range ranges {
		copy(out.Grow(int(g.size)), g.m.data[g.off:g.off+g.size])
	}
	return wire.VkSuccess, nil
}

// transferMemoryData runs vnTransferMemoryData: bytes from the host into a memory object.
func (d *Device) transferMemoryData(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id, off, size := r.U64(), r.U64(), r.U64()
	data := r.Bytes(size)
	if !r.Done() {
		return malformed(c)
	}
	m := d.mem[id]
	if m == nil || !m.mapped || off < m.mapOff || !rangeOK(off-m.mapOff, size, int(m.mapSize)) {
		return wire.VkErrorValidationFailed, nil
	}
	copy(m.data[off:], data)
	return wire.VkSuccess, nil
}

// ping runs vnPing: a reply of the size asked.
func (d *Device) ping(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	n := r.U32()
	if r.Bad() {
		return malformed(c)
	}
	if out != nil {
		if int64(n) > int64(d.maxReply) {
			return wire.VkErrorOutOfHostMemory, nil
		}
		clear(out.Grow(int(n)))
	}
	return wire.VkSuccess, nil
}

// createFence runs vkCreateFence.
func (d *Device) createFence(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id, flags := r.U64(), r.U32()
	if !r.Done() {
		return malformed(c)
	}
	if id == 0 {
		return wire.VkErrorValidationFailed, nil
	}
	if _, dup := d.fences[id]; dup {
		return wire.VkErrorValidationFailed, nil
	}
	if res := d.addObject(0); res != wire.VkSuccess {
		return res, nil
	}
	d.fences[id] = flags&1 != 0
	return wire.VkSuccess, nil
}

// destroyFence runs vkDestroyFence.
func (d *Device) destroyFence(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id := r.U64()
	if !r.Done() {
		return malformed(c)
	}
	if _, ok := d.fences[id]; !ok {
		return wire.VkErrorValidationFailed, nil
	}
	delete(d.fences, id)
	d.dropObject(0)
	return wire.VkSuccess, nil
}

// resetFences runs vkResetFences.
func (d *Device) resetFences(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	n := r.Count(8)
	res := wire.VkSuccess
	for i := 0; i < n; i++ {
		id := r.U64()
		if _, ok := d.fences[id]; !ok {
			res = wire.VkErrorValidationFailed
			continue
		}
		d.fences[id] = false
	}
	if !r.Done() {
		return malformed(c)
	}
	return res, nil
}

// getFenceStatus runs vkGetFenceStatus.
func (d *Device) getFenceStatus(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id := r.U64()
	if !r.Done() {
		return malformed(c)
	}
	sig, ok := d.fences[id]
	if !ok {
		return wire.VkErrorValidationFailed, nil
	}
	if sig {
		return wire.VkSuccess, nil
	}
	return wire.VkNotReady, nil
}

// waitForFences runs vkWaitForFences (every fence is signaled by the submit that names it).
func (d *Device) waitForFences(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	waitAll, _ := r.U32(), r.U64() // timeout: the queue runs in order, so an unsignaled fence never signals later
	n := r.Count(8)
	all, any := true, false
	res := wire.VkSuccess
	for i := 0; i < n; i++ {
		sig, ok := d.fences[r.U64()]
		if !ok {
			res = wire.VkErrorValidationFailed
		}
		all = all && sig
		any = any || sig
	}
	if !r.Done() {
		return malformed(c)
	}
	if res != wire.VkSuccess || n == 0 {
		return wire.VkErrorValidationFailed, nil
	}
	if (waitAll != 0 && all) || (waitAll == 0 && any) {
		return wire.VkSuccess, nil
	}
	return wire.VkTimeout, nil
}

// allocateCommandBuffers runs vkAllocateCommandBuffers.
func (d *Device) allocateCommandBuffers(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id := r.U64()
	if !r.Done() {
		return malformed(c)
	}
	if id == 0 || d.cbs[id] != nil {
		return wire.VkErrorValidationFailed, nil
	}
	if res := d.addObject(0); res != wire.VkSuccess {
		return res, nil
	}
	d.cbs[id] = &cmdBuf{}
	return wire.VkSuccess, nil
}

// freeCommandBuffers runs vkFreeCommandBuffers.
func (d *Device) freeCommandBuffers(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id := r.U64()
	if !r.Done() {
		return malformed(c)
	}
	if d.cbs[id] == nil {
		return wire.VkErrorValidationFailed, nil
	}
	delete(d.cbs, id)
	d.dropObject(0)
	return wire.VkSuccess, nil
}

// recordCommandBuffer runs vkBeginCommandBuffer and vkEndCommandBuffer.
func (d *Device) recordCommandBuffer(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	id := r.U64()
	if !r.Done() {
		return malformed(c)
	}
	cb := d.cbs[id]
	if cb == nil {
		return wire.VkErrorValidationFailed, nil
	}
	if c.Type == wire.CmdBeginCommandBuffer {
		cb.state, cb.ops = cbRecording, cb.ops[:0]
		return wire.VkSuccess, nil
	}
	if cb.state != cbRecording {
		return wire.VkErrorValidationFailed, nil
	}
	cb.state = cbExecutable
	return wire.VkSuccess, nil
}

// dispatch records a vkCmdDispatch into a recording command buffer.
func (d *Device) dispatch(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	var op dispatchOp
	id := r.U64()
	op.kernel = r.U32()
	_ = r.U32() // reserved
	for i := range op.b {
		op.b[i] = binding{r.U64(), r.U64()}
	}
	for i := range op.p {
		op.p[i] = r.U32()
	}
	if !r.Done() {
		return malformed(c)
	}
	cb := d.cbs[id]
	if cb == nil || cb.state != cbRecording || len(cb.ops) >= maxOpsPerCmdBuf {
		return wire.VkErrorValidationFailed, nil
	}
	if err := d.runOp(&op, false); err != nil {
		return wire.VkErrorValidationFailed, nil
	}
	cb.ops = append(cb.ops, op)
	return wire.VkSuccess, nil
}

// queueSubmit runs vkQueueSubmit: the dispatches of its command buffers, then its fence.
func (d *Device) queueSubmit(c *wire.Command, r *wire.ArgReader, out *wire.Encoder) (int32, error) {
	queue, fence := r.U64(), r.U64()
	n := r.Count(8)
	var first [8]*cmdBuf
	list := first[:0]
	res := wire.VkSuccess
	for i := 0; i < n; i++ {
		cb := d.cbs[r.U64()]
		if cb == nil || cb.state != cbExecutable {
			res = wire.VkErrorValidationFailed
			continue
		}
		list = append(list, cb)
	}
	if !r.Done() {
		return malformed(c)
	}
	if queue != 1 || res != wire.VkSuccess {
		return wire.VkErrorValidationFailed, nil
	}
	if fence != 0 {
		sig, ok := d.fences[fence]
		if !ok || sig {
			return wire.VkErrorValidationFailed, nil
		}
	}
	for _, cb := range list {
		for i := range cb.ops {
			if err := d.runOp(&cb.ops[i], true); err != nil {
				return wire.VkErrorDeviceLost, nil
			}
		}
	}
	if fence != 0 {
		d.fences[fence] = true
	}
	return wire.VkSuccess, nil
}

// f32view returns n float32 values of m at byte offset off, or an error when they do not fit
// or are misaligned.
func (d *Device) f32view(b binding, n uint64) ([]float32, error) {
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
func (d *Device) runOp(op *dispatchOp, run bool) error {
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
