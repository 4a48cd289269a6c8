package venusd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestZGenBatchCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzBatchExecFrame")
	os.MkdirAll(dir, 0o755)
	for i, s := range fuzzSeeds() {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte("go test fuzz v1\n[]byte("+strconv.Quote(string(s))+")\n"), 0o644)
	}
}
