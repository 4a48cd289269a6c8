package analyzers

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/protocol"
)

// realVenus is where the Venus Plus recordings with their ground truth live (fixtures/README.md).
const realVenus = "../fixtures/real/venusplus"

// TestVenusMesaSummaryNamesAll analyses the Venus Plus recordings: every command in the
// Commands table has its name (no cmdN), and the batch counts are those of the ground truth.
func TestVenusMesaSummaryNamesAll(t *testing.T) {
	for _, tc := range []struct {
		file                      string
		frames, commands, notSplt uint64
	}{
		{"server-phase2.plt", 54, 54, 0},
		{"client-phase2.plt", 54, 54, 0},
		// 106 Venus frames holding 116 of the 123 commands within the capture, 12 Venus Plus frames
		{"server-phase9.plt", 118, 116 + 12, 3},
		{"client-phase9.plt", 118, 116 + 12, 3},
	} {
		s, err := Analyze(protocol.Files([]string{filepath.Join(realVenus, tc.file)}, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Protocol != "venus-mesa" {
			t.Errorf("%s: protocol %q", tc.file, s.Protocol)
		}
		for _, c := range s.Commands {
			if strings.HasPrefix(c.Name, "cmd") || strings.HasPrefix(c.Name, "(") {
				t.Errorf("%s: command %d shows as %q", tc.file, c.ID, c.Name)
			}
		}
		b := s.Batches
		if b == nil || b.Frames != tc.frames || b.Commands != tc.commands || b.NotSplit != tc.notSplt {
			t.Errorf("%s: batches %+v, want %d frames, %d commands, %d not split", tc.file, b, tc.frames, tc.commands, tc.notSplt)
		}
	}
}
