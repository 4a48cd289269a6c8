//go:build linux

package cli

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// rawTerminal switches the terminal on in to single-key input without echo (Ctrl-C still
// sends SIGINT) and returns the function that restores it.
func rawTerminal(in io.Reader) (restore func(), err error) {
	f, ok := in.(*os.File)
	if !ok {
		return nil, errors.New("stdin is not a file")
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
