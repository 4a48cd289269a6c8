package transport

import "github.com/perflab/perflab/venusd/wire"

// DirectFrames writes and reads whole frames straight on a Conn (venusd/link's Frames with no
// emulated link); on shm it announces each frame to shmFrameOut and shmFrameIn.
type DirectFrames struct {
	c   Conn
	fr  *FrameReader
	rb  []byte
	shm bool // c is a shared-memory ring: frames are announced to shmFrameOut/shmFrameIn
}

// NewDirectFrames returns the frames of c; a frame whose payload is over maxFrame bytes is a
// read error.
func NewDirectFrames(c Conn, maxFrame int) *DirectFrames {
	_, shm := c.(*shmConn)
	return &DirectFrames{c: c, fr: NewFrameReader(c, maxFrame), shm: shm}
}

// WriteFrame writes one whole frame (header included).
func (d *DirectFrames) WriteFrame(frame []byte) error {
	_, err := d.c.Write(frame)
	if d.shm && err == nil {
		shmFrameOut(frame)
	}
	return err
}

// ReadFrame returns the next whole frame, header included, valid until the next call.
func (d *DirectFrames) ReadFrame() ([]byte, error) {
	p, err := d.fr.Read()
	if err != nil {
		return nil, err
	}
	// Rebuild header+payload contiguously for the caller; small frames are the common case.
	need := wire.HeaderSize + len(p)
	if cap(d.rb) < need {
		d.rb = make([]byte, need)
	}
	d.rb = d.rb[:need]
	copy(d.rb, d.fr.hdr[:])
	copy(d.rb[wire.HeaderSize:], p)
	if d.shm {
		shmFrameIn(d.rb)
	}
	return d.rb, nil
}

// Close closes the Conn.
func (d *DirectFrames) Close() error { return d.c.Close() }
