package trace

import (
	"encoding/binary"
	"hash/crc32"
)

// The byte layout is described in docs/trace-format.md. In short:
//
//	file   = header chunk*
//	header = magic "PLTRACE\x00" (8 bytes), format version u16 LE
//	chunk  = sync u32 | type u8 | body length u32 | seq u32 | body CRC32C u32 | header CRC32C u32 | body
//
// All integers in chunk headers are little-endian. The header CRC covers the bytes before it, so
// a reader can trust a chunk's length and sequence number before it reads the body; the body
// CRC covers the body. seq numbers the chunks of a file from 0 (the meta chunk); the footer's is
// the count of chunks before it. Format version 1 had no seq (a 17-byte chunk header); readers
// still read it.

// Magic opens every trace file.
const Magic = "PLTRACE\x00"

// FormatVersion is the version of the byte layout this package writes and the newest it reads.
const FormatVersion = 2

// MaxChunkBody is the largest chunk body a reader accepts, in bytes. A Writer cuts chunks far
// smaller (see maxBodyTarget), so the cap only bounds what a damaged or hostile file can make a
// reader buffer.
const MaxChunkBody = 16 << 20

// MaxString is the longest string (marker name or text, connection address, lost source) a
// Writer accepts and a Reader decodes, in bytes.
const MaxString = 1 << 16

const (
	headerSize        = len(Magic) + 2 // magic + u16 version
	chunkHeaderSize   = 21             // sync, type, length, seq, body crc, header crc
	chunkHeaderSizeV1 = 17             // format version 1: sync, type, length, body crc, header crc
	// maxOutOfOrder bounds how many chunk sequence numbers a Reader remembers above the ones
	// it has seen in a row, so that a file of chunks in a hostile order costs bounded memory
	// (a few MiB); a chunk that would need more is skipped as bad.
	maxOutOfOrder = 1 << 16
	syncWord      = 0x434C50AB // "\xabPLC" on disk
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

// putChunkHeader fills h (chunkHeaderSize bytes) for chunk number seq, of type typ, holding
// body.
func putChunkHeader(h []byte, typ byte, seq uint32, body []byte) {
	binary.LittleEndian.PutUint32(h[0:], syncWord)
	h[4] = typ
	binary.LittleEndian.PutUint32(h[5:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[9:], seq)
	binary.LittleEndian.PutUint32(h[13:], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(h[17:], crc32.Checksum(h[:17], castagnoli))
}

// chunkHeader is a decoded chunk header.
type chunkHeader struct {
	typ     byte
	length  uint32
	seq     uint32 // 0 in format version 1
	bodyCRC uint32
}

// parseChunkHeader decodes h (at least hdrSize bytes: chunkHeaderSize, or chunkHeaderSizeV1
// for a version 1 file) and reports whether its sync word and header CRC are right.
func parseChunkHeader(h []byte, hdrSize int) (chunkHeader, bool) {
	if binary.LittleEndian.Uint32(h[0:]) != syncWord {
		return chunkHeader{}, false
	}
	crcAt := hdrSize - 4
	if crc32.Checksum(h[:crcAt], castagnoli) != binary.LittleEndian.Uint32(h[crcAt:]) {
		return chunkHeader{}, false
	}
	c := chunkHeader{typ: h[4], length: binary.LittleEndian.Uint32(h[5:])}
	if hdrSize == chunkHeaderSizeV1 {
		c.bodyCRC = binary.LittleEndian.Uint32(h[9:])
	} else {
		c.seq = binary.LittleEndian.Uint32(h[9:])
		c.bodyCRC = binary.LittleEndian.Uint32(h[13:])
	}
	return c, true
}

var syncBytes = binary.LittleEndian.AppendUint32(nil, syncWord)
