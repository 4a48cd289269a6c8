// Package ggmlpeer is a small client and server that speak llama.cpp's ggml-rpc wire protocol
// as real ones do, for testing perflab's decoder: a request is a 1-byte command, a u64 payload
// size and the payload, each written with its own system call; a reply is a u64 size and the
// payload; there is no request id; HELLO is always first and its reply carries the protocol
// version, which decides which commands get no reply (docs/protocol-spec.md).
package ggmlpeer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Commands at protocol 5.0.
const (
	CmdAllocBuffer = iota
	CmdGetAlignment
	CmdGetMaxSize
	CmdBufferGetBase
	CmdFreeBuffer
	CmdBufferClear
	CmdSetTensor
	CmdSetTensorHash
	CmdGetTensor
	CmdCopyTensor
	CmdGraphCompute
	CmdGetDeviceMemory
	CmdInitTensor
	CmdGetAllocSize
	CmdHello
	CmdDeviceCount
	CmdGraphRecompute
	CmdMemsetTensor
	cmdCount
)

// MaxPayload bounds a payload this peer accepts, bytes.
const MaxPayload = 16 << 20

// Version is a protocol version.
type Version struct{ Major, Minor, Patch uint8 }

// NoReply reports whether cmd gets no reply at version v: SET_TENSOR from 2.0,
// GRAPH_COMPUTE and GRAPH_RECOMPUTE from 3.0.
func (v Version) NoReply(cmd byte) bool {
	switch cmd {
	case CmdSetTensor:
		return v.Major >= 2
	case CmdGraphCompute, CmdGraphRecompute:
		return v.Major >= 3
	}
	return false
}

// Server answers ggml-rpc requests with fixed, plausible replies; it keeps no tensors.
type Server struct {
	Version Version
	wg      sync.WaitGroup
}

// Serve accepts connections on ln until it is closed, serving each in its own goroutine, and
// waits for them to end.
func (s *Server) Serve(ln net.Listener) error {
	defer s.wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			_ = s.ServeConn(c)
		}()
	}
}

// ServeConn serves one connection until the peer closes it; HELLO must come first.
func (s *Server) ServeConn(c io.ReadWriter) error {
	var hdr [8]byte
	first := true
	for {
		var cmd [1]byte
		if _, err := io.ReadFull(c, cmd[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return err
		}
		size := binary.LittleEndian.Uint64(hdr[:])
		if size > MaxPayload {
			return fmt.Errorf("payload of %d bytes: too large", size)
		}
		if cmd[0] >= cmdCount {
			return fmt.Errorf("unknown command %d", cmd[0])
		}
		if first != (cmd[0] == CmdHello) {
			return fmt.Errorf("command %d: HELLO must come first, and only once", cmd[0])
		}
		first = false
		payload := make([]byte, size)
		if _, err := io.ReadFull(c, payload); err != nil {
			return err
		}
		if s.Version.NoReply(cmd[0]) {
			continue
		}
		var reply []byte
		switch cmd[0] {
		case CmdHello:
			reply = []byte{s.Version.Major, s.Version.Minor, s.Version.Patch, 0}
		case CmdGetTensor:
			n := uint64(0)
			if len(payload) >= 8 {
				n = binary.LittleEndian.Uint64(payload[len(payload)-8:])
			}
			reply = make([]byte, min(n, MaxPayload))
		case CmdAllocBuffer, CmdGetDeviceMemory:
			reply = make([]byte, 16)
		case CmdGetAlignment, CmdGetMaxSize, CmdBufferGetBase, CmdGetAllocSize:
			reply = make([]byte, 8)
		case CmdDeviceCount:
			reply = []byte{1, 0, 0, 0}
		case CmdSetTensorHash, CmdCopyTensor, CmdGraphCompute:
			reply = []byte{1}
		}
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(reply)))
		if _, err := c.Write(hdr[:]); err != nil {
			return err
		}
		if len(reply) > 0 {
			if _, err := c.Write(reply); err != nil {
				return err
			}
		}
	}
}

// Client is a ggml-rpc client over one connection.
type Client struct {
	rw      io.ReadWriter
	Version Version // learned from HELLO
}

// Dial connects to a server and says HELLO.
func Dial(rw io.ReadWriter) (*Client, error) {
	c := &Client{rw: rw}
	reply, err := c.Call(CmdHello, nil)
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if len(reply) < 3 {
		return nil, fmt.Errorf("hello: reply of %d bytes", len(reply))
	}
	c.Version = Version{reply[0], reply[1], reply[2]}
	return c, nil
}

// Call sends a request — the command byte, the size and the payload in three writes — and,
// when the command gets a reply at the server's version, reads it (size, then payload).
func (c *Client) Call(cmd byte, payload []byte) ([]byte, error) {
	var hdr [8]byte
	if _, err := c.rw.Write([]byte{cmd}); err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(payload)))
	if _, err := c.rw.Write(hdr[:]); err != nil {
		return nil, err
	}
	if len(payload) > 0 {
		if _, err := c.rw.Write(payload); err != nil {
			return nil, err
		}
	}
	if cmd != CmdHello && c.Version.NoReply(cmd) {
		return nil, nil
	}
	if _, err := io.ReadFull(c.rw, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n > MaxPayload {
		return nil, fmt.Errorf("reply of %d bytes: too large", n)
	}
	reply := make([]byte, n)
	if _, err := io.ReadFull(c.rw, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// Workload runs a llama.cpp-like session: loading (every command once, weights with
// SET_TENSOR), then tokens decode steps of SET_TENSOR (the input), GRAPH_COMPUTE (the first
// step) or GRAPH_RECOMPUTE (the others), and GET_TENSOR of the logits — the only command of a
// step that waits for a reply — and finally FREE_BUFFER.
func (c *Client) Workload(tokens int) error {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	load := []struct {
		cmd     byte
		payload []byte
	}{
		{CmdDeviceCount, nil},
		{CmdGetAlignment, u64(0)[:4]},
		{CmdGetMaxSize, u64(0)[:4]},
		{CmdGetDeviceMemory, u64(0)[:4]},
		{CmdAllocBuffer, append(u64(0)[:4], u64(1<<20)...)},
		{CmdBufferGetBase, u64(1)},
		{CmdBufferClear, append(u64(1), 0)},
		{CmdGetAllocSize, make([]byte, 64)},
		{CmdInitTensor, make([]byte, 48)},
		{CmdSetTensor, make([]byte, 4096)},
		{CmdSetTensor, make([]byte, 8192)},
		{CmdSetTensorHash, make([]byte, 64)},
		{CmdCopyTensor, make([]byte, 96)},
		{CmdMemsetTensor, make([]byte, 40)},
	}
	for _, l := range load {
		if _, err := c.Call(l.cmd, l.payload); err != nil {
			return fmt.Errorf("load command %d: %w", l.cmd, err)
		}
	}
	getLogits := append(make([]byte, 48), u64(512)...)
	for i := 0; i < tokens; i++ {
		if _, err := c.Call(CmdSetTensor, make([]byte, 64)); err != nil {
			return err
		}
		cmd, graph := byte(CmdGraphRecompute), u64(0)[:4]
		if i == 0 {
			cmd, graph = CmdGraphCompute, make([]byte, 1024)
		}
		if _, err := c.Call(cmd, graph); err != nil {
			return err
		}
		if _, err := c.Call(CmdGetTensor, getLogits); err != nil {
			return err
		}
	}
	_, err := c.Call(CmdFreeBuffer, u64(1))
	return err
}
