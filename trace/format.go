package trace

import (
	"encoding/binary"
	"hash/crc32"
)

// The byte layout is described in docs/trace-format.md. In short:
//
//	file   = header chunk*
//	header = magic "PLTRACE\x00" (8 bytes), format version u16 LE
//	chunk  = sync u32 | type u8 | body length u32 | body CRC32C u32 | header CRC32C u32 | body
//
// All integers in chunk headers are little-endian. The header CRC covers the 13 bytes before it,
// so a reader can trust a chunk's length before it reads the body; the body CRC covers the body.

// Magic opens every trace file.
const Magic = "PLTRACE\x00"

// FormatVersion is the version of the byte layout this package writes and the newest it reads.
const FormatVersion = 1

// MaxChunkBody is the largest chunk body a reader accepts, in bytes. A Writer cuts chunks far
// smaller (see maxBodyTarget), so the cap only bounds what a damaged or hostile file can make a
// reader buffer.
const MaxChunkBody = 16 << 20

// MaxString is the longest string (marker name or text, connection address, lost source) a
// Writer accepts and a Reader decodes, in bytes.
const MaxString = 1 << 16

const (
	headerSize      = len(Magic) + 2 // magic + u16 version
	chunkHeaderSize = 17             // sync, type, length, body crc, header crc
	syncWord        = 0x434C50AB     // "\xabPLC" on disk
	// maxBodyTarget is the body size at which a Writer cuts a chunk regardless of its record
	// count, so that one chunk stays small next to MaxChunkBody even with long payload heads.
	maxBodyTarget = 1 << 20
	// maxJSONBody bounds the meta and footer chunks, so that decoding their JSON (maps, lists)
	// stays small whatever a file holds; writers never come near it.
	maxJSONBody = 256 << 10
)

// Chunk types. Numbers are part of the format: append, never renumber. A reader skips types it
// does not know (by their length) and counts them in Recovery.UnknownChunks.
const (
	chunkMeta    = 1 // Meta as JSON; the first chunk of a file
	chunkRecords = 2 // a sequence of tagged records, self-contained
	chunkFooter  = 3 // Footer as JSON; the last chunk of a cleanly closed file
)

// Record tags inside a records chunk. A tag byte with the high bit set is an event, whose other
// bits carry flags (below); otherwise the tag names the record kind.
const (
	tagConnection = 1
	tagMarker     = 2
	tagLost       = 3

	tagEvent = 0x80
	// Bits 5-6 of an event tag hold its Dir (0..2); 3 means an explicit Dir byte follows.
	evDirShift = 5
	evDirMask  = 3
	evDirEsc   = 3
	// Event flags, bits 0-4.
	evSamePIDTID = 1 << 0 // pid and tid as the previous event of the chunk
	evSameConn   = 1 << 1 // connection as the previous event of the chunk
	evSameOpSrc  = 1 << 2 // op and source as the previous event of the chunk with the same Dir
	evErrno      = 1 << 3 // an errno follows
	evExtra      = 1 << 4 // an extra flag byte follows the tag
	// Extra flags.
	exCommand = 1 << 0
	exReqID   = 1 << 1
	exPayload = 1 << 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// putChunkHeader fills h (chunkHeaderSize bytes) for a chunk of type typ holding body.
func putChunkHeader(h []byte, typ byte, body []byte) {
	binary.LittleEndian.PutUint32(h[0:], syncWord)
	h[4] = typ
	binary.LittleEndian.PutUint32(h[5:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[9:], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(h[13:], crc32.Checksum(h[:13], castagnoli))
}

// chunkHeader is a decoded chunk header.
type chunkHeader struct {
	typ     byte
	length  uint32
	bodyCRC uint32
}

// parseChunkHeader decodes h (at least chunkHeaderSize bytes) and reports whether its sync word
// and header CRC are right.
func parseChunkHeader(h []byte) (chunkHeader, bool) {
	if binary.LittleEndian.Uint32(h[0:]) != syncWord {
		return chunkHeader{}, false
	}
	if crc32.Checksum(h[:13], castagnoli) != binary.LittleEndian.Uint32(h[13:]) {
		return chunkHeader{}, false
	}
	return chunkHeader{
		typ:     h[4],
		length:  binary.LittleEndian.Uint32(h[5:]),
		bodyCRC: binary.LittleEndian.Uint32(h[9:]),
	}, true
}

var syncBytes = binary.LittleEndian.AppendUint32(nil, syncWord)
