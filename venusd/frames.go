package venusd

import "github.com/perflab/perflab/venusd/wire"

// directFrames writes and reads frames straight on the transport.
type directFrames struct {
	c   conn
	fr  *frameReader
	rb  []byte
	shm bool // c is a shared-memory ring: frames are announced to shmFrameOut/shmFrameIn
}

func newDirectFrames(c conn, maxFrame int) *directFrames {
	_, shm := c.(*shmConn)
	return &directFrames{c: c, fr: newFrameReader(c, maxFrame), shm: shm}
}

func (d *directFrames) WriteFrame(frame []byte) error {
	_, err := d.c.Write(frame)
	if d.shm && err == nil {
		shmFrameOut(frame)
	}
	return err
}

func (d *directFrames) ReadFrame() ([]byte, error) {
	p, err := d.fr.read()
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

func (d *directFrames) Close() error { return d.c.Close() }
