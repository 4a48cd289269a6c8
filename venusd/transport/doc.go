// Package transport is venusd's byte transports and framing I/O: tcp://, unix:// and shm:///
// addresses, Dial, Listen and Accept (the shm handshake, TCP tuning, peer credentials), sockets
// read and written one counted system call at a time, the shared-memory rings (a sealed memfd
// with two single-producer single-consumer rings, no system call per message), DirectFrames,
// which writes and reads whole frames and announces shm frames to the uprobe attach points
// shmFrameOut and shmFrameIn, and FrameReader, which reads whole frames under idle and frame
// deadlines and counts large ones against a memory Budget. It knows the frame header
// (venusd/wire), never the commands.
package transport
