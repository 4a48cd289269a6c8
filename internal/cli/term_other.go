//go:build !linux

package cli

import (
	"errors"
	"io"
)

// rawTerminal is only implemented on Linux, where perflab records.
func rawTerminal(in io.Reader) (restore func(), err error) {
	return nil, errors.New("no raw terminal on this platform")
}
