package transport

import "github.com/perflab/perflab/venusd/wire"

// DirectFrames writes and reads frames straight on the transport.
type DirectFrames struct {
	c   Conn
	fr  *FrameReader
	rb  []byte
	shm bool // c is a shared-memory ring: frames are announced to shmFrameOut/shmFrameIn
}

func NewDirectFrames(c Conn, maxFrame int) *DirectFrames {
	_, shm := c.(*shmConn)
	return &DirectFrames{c: c, fr: NewFrameReader(c, maxFrame), shm: shm}
}

func (d *DirectFrames) WriteFrame(frame []byte) error {
	_, err := d.c.Write(frame)
	if d.shm && err == nil {
		shmFrameOut(frame)
	}
	return err
}

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

func (d *DirectFrames) Close() error { return d.c.Close() }
