package reports

import (
	"bytes"
	"testing"

	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/models"
)

func TestModelGolden(t *testing.T) {
	var sc []compare.Scenario
	for _, m := range models.Modes {
		sc = append(sc, compare.Scenario{Name: m.Name, WhatIf: m.WhatIf()})
	}
	r := compare.PredictBatch(models.Batch{TFixedUS: 90, TPerReqUS: 10}, sc)
	for _, f := range []string{"table", "json"} {
		var buf bytes.Buffer
		if err := Model(&buf, r, f); err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, "model-fit."+map[string]string{"table": "txt", "json": "json"}[f], buf.Bytes())
	}
}
