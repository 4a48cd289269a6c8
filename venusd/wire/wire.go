// Package wire is the VPLS frame format venusd speaks (docs/venus-protocol.md): the magic, the
// frame and command headers, the command ids and names, the VkResult codes, and the Encoder and
// decoders of frames and command arguments. It is the one place these are written; a test checks
// them against the venus protocol spec that perflab analyze decodes with.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The VPLS framing (docs/venus-protocol.md).
const (
	Magic          = 0x56504C53 // "VPLS" as a little-endian u32: the bytes on the wire read "SLPV"
	HeaderSize     = 8          // u32 magic, u32 payload size
	CmdHeaderSize  = 16         // u32 type, u32 flags, u32 args size, u32 request id
	ReplyFixedSize = 4          // a reply record's i32 VkResult, after its command header
)

// Command flags.
const (
	FlagReplyWanted = 1 << 0 // request: the sender wants a reply record for this command
	FlagReply       = 1 << 1 // this record is a reply
	FlagDeferred    = 1 << 2 // reply: reports the failure of an earlier command that wanted no reply
	flagsKnown      = FlagReplyWanted | FlagReply | FlagDeferred
)

// CommandType is a VkCommandTypeEXT of the Venus protocol, or a Venus Plus command (from
// 0x10000000 up).
type CommandType uint32

// The commands venusd speaks. Vulkan numbers follow the Venus protocol's VkCommandTypeEXT.
const (
	CmdQueueSubmit                  CommandType = 18
	CmdAllocateMemory               CommandType = 21
	CmdFreeMemory                   CommandType = 22
	CmdMapMemory                    CommandType = 23
	CmdUnmapMemory                  CommandType = 24
	CmdFlushMappedMemoryRanges      CommandType = 25
	CmdInvalidateMappedMemoryRanges CommandType = 26
	CmdCreateFence                  CommandType = 35
	CmdDestroyFence                 CommandType = 36
	CmdResetFences                  CommandType = 37
	CmdGetFenceStatus               CommandType = 38
	CmdWaitForFences                CommandType = 39
	CmdAllocateCommandBuffers       CommandType = 88
	CmdFreeCommandBuffers           CommandType = 89
	CmdBeginCommandBuffer           CommandType = 90
	CmdEndCommandBuffer             CommandType = 91
	CmdDispatch                     CommandType = 110
	// Venus Plus's own commands.
	CmdTransferMemoryData CommandType = 0x10000000 // host → device bytes of a memory object
	CmdReadMemoryData     CommandType = 0x10000001 // device → host bytes of ranges (the auto-invalidate batch)
	CmdPing               CommandType = 0x10000002 // echo of a given reply size (the ping workload)
)

var cmdNames = map[CommandType]string{
	CmdQueueSubmit:                  "vkQueueSubmit",
	CmdAllocateMemory:               "vkAllocateMemory",
	CmdFreeMemory:                   "vkFreeMemory",
	CmdMapMemory:                    "vkMapMemory",
	CmdUnmapMemory:                  "vkUnmapMemory",
	CmdFlushMappedMemoryRanges:      "vkFlushMappedMemoryRanges",
	CmdInvalidateMappedMemoryRanges: "vkInvalidateMappedMemoryRanges",
	CmdCreateFence:                  "vkCreateFence",
	CmdDestroyFence:                 "vkDestroyFence",
	CmdResetFences:                  "vkResetFences",
	CmdGetFenceStatus:               "vkGetFenceStatus",
	CmdWaitForFences:                "vkWaitForFences",
	CmdAllocateCommandBuffers:       "vkAllocateCommandBuffers",
	CmdFreeCommandBuffers:           "vkFreeCommandBuffers",
	CmdBeginCommandBuffer:           "vkBeginCommandBuffer",
	CmdEndCommandBuffer:             "vkEndCommandBuffer",
	CmdDispatch:                     "vkCmdDispatch",
	CmdTransferMemoryData:           "vnTransferMemoryData",
	CmdReadMemoryData:               "vnReadMemoryData",
	CmdPing:                         "vnPing",
}

// String returns the command's Vulkan or Venus Plus name, or "cmd<N>".
func (c CommandType) String() string {
	if n, ok := cmdNames[c]; ok {
		return n
	}
	return fmt.Sprintf("cmd%d", uint32(c))
}

// Known reports whether venusd implements the command.
func (c CommandType) Known() bool { _, ok := cmdNames[c]; return ok }

// VkResult values used on the wire.
const (
	VkSuccess                 int32 = 0
	VkNotReady                int32 = 1
	VkTimeout                 int32 = 2
	VkErrorOutOfHostMemory    int32 = -1
	VkErrorOutOfDeviceMemory  int32 = -2
	VkErrorDeviceLost         int32 = -4
	VkErrorMemoryMapFailed    int32 = -5
	VkErrorFeatureNotPresent  int32 = -8
	VkErrorTooManyObjects     int32 = -10
	VkErrorUnknown            int32 = -13
	VkErrorValidationFailed   int32 = -1000011001
	VkErrorInvalidExternalHnd int32 = -1000072003
)

// ResultName returns the VkResult's name.
func ResultName(r int32) string {
	switch r {
	case VkSuccess:
		return "VK_SUCCESS"
	case VkNotReady:
		return "VK_NOT_READY"
	case VkTimeout:
		return "VK_TIMEOUT"
	case VkErrorOutOfHostMemory:
		return "VK_ERROR_OUT_OF_HOST_MEMORY"
	case VkErrorOutOfDeviceMemory:
		return "VK_ERROR_OUT_OF_DEVICE_MEMORY"
	case VkErrorDeviceLost:
		return "VK_ERROR_DEVICE_LOST"
	case VkErrorMemoryMapFailed:
		return "VK_ERROR_MEMORY_MAP_FAILED"
	case VkErrorFeatureNotPresent:
		return "VK_ERROR_FEATURE_NOT_PRESENT"
	case VkErrorTooManyObjects:
		return "VK_ERROR_TOO_MANY_OBJECTS"
	case VkErrorUnknown:
		return "VK_ERROR_UNKNOWN"
	case VkErrorValidationFailed:
		return "VK_ERROR_VALIDATION_FAILED_EXT"
	}
	return fmt.Sprintf("VkResult(%d)", r)
}

// Memory property flags (VkMemoryPropertyFlagBits).
const (
	MemDeviceLocal  = 0x1
	MemHostVisible  = 0x2
	MemHostCoherent = 0x4
)

// Protocol errors.
var (
	ErrBadMagic      = errors.New("bad frame magic")
	ErrFrameTooLarge = errors.New("frame too large")
	ErrMalformed     = errors.New("malformed command")
)

// VkError is a Vulkan error returned by the server for one command.
type VkError struct {
	Cmd    CommandType
	ReqID  uint32
	Result int32
	// Deferred is set when the command wanted no reply and its failure surfaced at a later sync
	// point.
	Deferred bool
}

func (e *VkError) Error() string {
	d := ""
	if e.Deferred {
		d = " (deferred)"
	}
	return fmt.Sprintf("%s request %d: %s%s", e.Cmd, e.ReqID, ResultName(e.Result), d)
}

// FrameHeader is the 8-byte header of a frame.
type FrameHeader struct {
	Magic uint32
	Size  uint32
}

// ParseFrameHeader decodes b (at least HeaderSize bytes) and checks magic and size against max.
func ParseFrameHeader(b []byte, max int) (FrameHeader, error) {
	if len(b) < HeaderSize {
		return FrameHeader{}, io.ErrUnexpectedEOF
	}
	h := FrameHeader{Magic: binary.LittleEndian.Uint32(b), Size: binary.LittleEndian.Uint32(b[4:])}
	if h.Magic != Magic {
		return h, fmt.Errorf("%w 0x%08x", ErrBadMagic, h.Magic)
	}
	if uint64(h.Size) > uint64(max) {
		return h, fmt.Errorf("%w: %d bytes, cap %d", ErrFrameTooLarge, h.Size, max)
	}
	return h, nil
}

// Command is one decoded command or reply record of a frame. Args aliases the frame.
type Command struct {
	Type  CommandType
	Flags uint32
	ReqID uint32
	Args  []byte
}

// CommandIter walks the commands of a frame payload.
type CommandIter struct {
	p   []byte
	off int
	err error
}

// NewCommandIter returns an iterator over the commands of payload.
func NewCommandIter(payload []byte) *CommandIter { return &CommandIter{p: payload} }

// Next decodes the next command into c; it returns false at the end or on an error (see Err).
func (it *CommandIter) Next(c *Command) bool {
	if it.err != nil || it.off >= len(it.p) {
		return false
	}
	rest := it.p[it.off:]
	if len(rest) < CmdHeaderSize {
		it.err = fmt.Errorf("%w: %d bytes left at offset %d, need a %d-byte command header", ErrMalformed, len(rest), it.off, CmdHeaderSize)
		return false
	}
	size := binary.LittleEndian.Uint32(rest[8:])
	if uint64(size) > uint64(len(rest)-CmdHeaderSize) {
		it.err = fmt.Errorf("%w: args size %d past the end of the frame at offset %d", ErrMalformed, size, it.off)
		return false
	}
	c.Type = CommandType(binary.LittleEndian.Uint32(rest))
	c.Flags = binary.LittleEndian.Uint32(rest[4:])
	c.ReqID = binary.LittleEndian.Uint32(rest[12:])
	c.Args = rest[CmdHeaderSize : CmdHeaderSize+int(size)]
	it.off += CmdHeaderSize + int(size)
	return true
}

// Err returns the error that stopped the iteration, or nil.
func (it *CommandIter) Err() error { return it.err }

// Offset is the byte offset of the next command in the payload.
func (it *CommandIter) Offset() int { return it.off }

// Encoder appends commands to a frame buffer. The first HeaderSize bytes are the frame header,
// filled by Finish.
type Encoder struct {
	b []byte
}

// Reset empties the frame, keeping its buffer.
func (e *Encoder) Reset() {
	if cap(e.b) < HeaderSize {
		e.b = make([]byte, HeaderSize, 4096)
	}
	e.b = e.b[:HeaderSize]
}

// ResetOn empties the frame and builds the next one in buf's spare capacity (a new buffer when
// it has less than a header's room).
func (e *Encoder) ResetOn(buf []byte) {
	e.b = buf
	e.Reset()
}

// Len is the frame's length so far in bytes, header included.
func (e *Encoder) Len() int { return len(e.b) }

// Cap is the capacity of the frame's buffer in bytes.
func (e *Encoder) Cap() int { return cap(e.b) }

// Free drops the buffer (an idle connection keeps no large one); the next Reset allocates.
func (e *Encoder) Free() { e.b = nil }

// Truncate cuts the frame to its first n bytes (n ≤ Len), dropping what was written after.
func (e *Encoder) Truncate(n int) { e.b = e.b[:n] }

// PutI32 overwrites the little-endian i32 at byte offset off of the frame (a result written
// before its value was known).
func (e *Encoder) PutI32(off int, v int32) { binary.LittleEndian.PutUint32(e.b[off:], uint32(v)) }

// Payload is the frame's bytes after the header, so far (aliases the buffer).
func (e *Encoder) Payload() []byte { return e.b[HeaderSize:] }

// Empty reports whether the frame holds no command.
func (e *Encoder) Empty() bool { return len(e.b) <= HeaderSize }

// Begin starts a command and returns the offset of its header, for End.
func (e *Encoder) Begin(t CommandType, flags uint32, req uint32) int {
	off := len(e.b)
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(t))
	e.b = binary.LittleEndian.AppendUint32(e.b, flags)
	e.b = binary.LittleEndian.AppendUint32(e.b, 0)
	e.b = binary.LittleEndian.AppendUint32(e.b, req)
	return off
}

// End fills the args size of the command begun at off.
func (e *Encoder) End(off int) {
	binary.LittleEndian.PutUint32(e.b[off+8:], uint32(len(e.b)-off-CmdHeaderSize))
}

// U32, U64, I32 and Bytes append little-endian arguments.
func (e *Encoder) U32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *Encoder) U64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *Encoder) I32(v int32)  { e.b = binary.LittleEndian.AppendUint32(e.b, uint32(v)) }
func (e *Encoder) Bytes(p []byte) {
	e.b = append(e.b, p...)
}

// Grow appends n bytes and returns them for the caller to fill.
func (e *Encoder) Grow(n int) []byte {
	l := len(e.b)
	if cap(e.b)-l < n {
		nb := make([]byte, l, 2*cap(e.b)+n)
		copy(nb, e.b)
		e.b = nb
	}
	e.b = e.b[:l+n]
	return e.b[l:]
}

// Finish fills the frame header and returns the whole frame.
func (e *Encoder) Finish() []byte {
	binary.LittleEndian.PutUint32(e.b, Magic)
	binary.LittleEndian.PutUint32(e.b[4:], uint32(len(e.b)-HeaderSize))
	return e.b
}

// ArgReader decodes a command's arguments with bounds checks; the first failure sticks.
type ArgReader struct {
	b   []byte
	off int
	bad bool
}

func (r *ArgReader) need(n int) bool {
	if r.bad || n < 0 || n > len(r.b)-r.off {
		r.bad = true
		return false
	}
	return true
}

// NewArgReader returns a reader of args.
func NewArgReader(args []byte) ArgReader { return ArgReader{b: args} }

// U32 and U64 read the next little-endian value (0 once out of bounds).
func (r *ArgReader) U32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *ArgReader) U64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// Bytes returns the next n bytes, n checked against what remains (never allocates).
func (r *ArgReader) Bytes(n uint64) []byte {
	if n > uint64(len(r.b)) || !r.need(int(n)) {
		r.bad = true
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v
}

// Count reads a u32 element count and checks that count*elem bytes remain.
func (r *ArgReader) Count(elem int) int {
	n := r.U32()
	if r.bad || uint64(n)*uint64(elem) > uint64(len(r.b)-r.off) {
		r.bad = true
		return 0
	}
	return int(n)
}

// Bad reports whether a read went out of bounds.
func (r *ArgReader) Bad() bool { return r.bad }

// Done reports whether every byte was consumed and nothing was out of bounds.
func (r *ArgReader) Done() bool { return !r.bad && r.off == len(r.b) }
