package protocol

import (
	"encoding/binary"
	"hash/maphash"
)

// digestSeed seeds Message.Digest: digests are compared within one run of perflab only.
var digestSeed = maphash.MakeSeed()

// digestOf returns the digest of b, never 0 (0 says that no bytes were seen).
func digestOf(b []byte) uint64 {
	if d := maphash.Bytes(digestSeed, b); d != 0 {
		return d
	}
	return 1
}

// requestDigest returns the digest of a request frame's captured bytes seen, with the request
// ids of the spec's header and of the records within seen left out (zeroed in a copy): the
// same request sent again, under a new id, has the same digest. 0 when nothing was seen.
func (c *connDecoder) requestDigest(seen []byte) uint64 {
	if len(seen) == 0 {
		return 0
	}
	sp := c.spec
	var hid, rid *Field
	if sp.Request != nil {
		hid = sp.Request.ReqID
	}
	if sp.Records != nil {
		rid = sp.Records.ReqID
	}
	if hid == nil && rid == nil {
		return digestOf(seen)
	}
	b := c.d.digestBuf[:copy(c.d.digestBuf[:], seen)]
	if hid != nil && hid.Offset+hid.Size <= len(b) {
		clear(b[hid.Offset : hid.Offset+hid.Size])
	}
	if r := sp.Records; rid != nil {
		for off, k := r.Offset, 0; off+r.Bytes <= len(b) && k < 1<<10; k++ {
			rec := b[off : off+r.Bytes]
			next := r.next(rec, off, sp.Endian == "big")
			clear(rec[rid.Offset : rid.Offset+rid.Size])
			if next <= uint64(off) || next > uint64(len(b)) {
				break
			}
			off = int(next)
		}
	}
	return digestOf(b)
}

// next returns the offset of the record after rec, the record at off: its header and the
// bytes its size field counts.
func (r *RecordLayout) next(rec []byte, off int, big bool) uint64 {
	return uint64(off) + uint64(r.Bytes) + fieldValue(rec, &r.Size, big)
}

// fieldValue reads field f of b (within b: checked when the spec was loaded), big-endian when
// big is set.
func fieldValue(b []byte, f *Field, big bool) uint64 {
	order := binary.ByteOrder(binary.LittleEndian)
	if big {
		order = binary.BigEndian
	}
	x := b[f.Offset : f.Offset+f.Size]
	switch f.Size {
	case 1:
		return uint64(x[0])
	case 2:
		return uint64(order.Uint16(x))
	case 4:
		return uint64(order.Uint32(x))
	}
	return order.Uint64(x)
}
