//go:build linux

package cli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/venusd"
)

// RELIABILITY D9 through the real command: `perflab venus serve` (this test binary acting as
// perflab) stops on SIGTERM and on SIGINT while clients are busy: exit 0 within the grace
// period, the unix socket removed.
func TestVenusServeSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "v.sock")
			cmd := exec.Command(os.Args[0], "venus", "serve", "--listen", "unix://"+sock)
			cmd.Env = append(os.Environ(), recordMainEnv+"=1")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(stderr)
			if !lines.Scan() || !strings.Contains(lines.Text(), "listening on") {
				t.Fatalf("serve said %q", lines.Text())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			clients := make(chan error, 4)
			for i := 0; i < 4; i++ {
				go func() {
					_, err := venusd.RunWorkload(ctx, venusd.ClientConfig{Connect: "unix://" + sock, Workload: "ping",
						Mode: venusd.ModePipeline, Depth: 32, Ping: venusd.PingConfig{Duration: 20 * time.Second},
						Getenv: func(string) string { return "" }})
					clients <- err
				}()
			}
			time.Sleep(300 * time.Millisecond)
			start := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var rest strings.Builder
			for lines.Scan() {
				rest.WriteString(lines.Text() + "\n")
			}
			err = cmd.Wait()
			if err != nil || time.Since(start) > venusd.DefaultShutdownGrace+2*time.Second {
				t.Errorf("serve after %v: %v (took %v): %s", sig, err, time.Since(start), rest.String())
			}
			if !strings.Contains(rest.String(), "stopped") || strings.Contains(rest.String(), "panic") {
				t.Errorf("serve's last words: %q", rest.String())
			}
			if _, err := os.Stat(sock); !os.IsNotExist(err) {
				t.Errorf("socket left behind: %v", err)
			}
			for i := 0; i < 4; i++ {
				if err := <-clients; err == nil {
					t.Error("a client did not notice the server going away")
				}
			}
		})
	}
}
