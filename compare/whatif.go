package compare

import (
	"fmt"
	"time"

	"github.com/perflab/perflab/models"
)

// DefaultBatchK is the batch size assumed for coalescing with a batch fit when none is given:
// a batch model has no sync points to coalesce up to.
const DefaultBatchK = 8

// Scenarios returns the what-ifs asked for: the preset mode (a models.Modes name, "" for none)
// changed by coalescing k and pipelining d (negative: not given); with none of them, the four
// venusd modes. It fails only on an unknown mode.
func Scenarios(mode string, k, d int) ([]Scenario, error) {
	if mode == "" && k < 0 && d < 0 {
		var out []Scenario
		for _, m := range models.Modes {
			out = append(out, Scenario{Name: m.Name, WhatIf: m.WhatIf()})
		}
		return out, nil
	}
	m := models.Mode{Name: "custom", Coalesce: 1, Pipeline: 1}
	if mode != "" {
		var err error
		if m, err = models.LookupMode(mode); err != nil {
			return nil, err
		}
	}
	if k >= 0 {
		m.Coalesce = k
	}
	if d > 0 {
		m.Pipeline = d
	}
	name := m.Name
	if k >= 0 || d > 0 {
		name = fmt.Sprintf("%s K=%d D=%d", m.Name, m.Coalesce, m.Pipeline)
	}
	return []Scenario{{Name: name, WhatIf: m.WhatIf()}}, nil
}

// PredictBatchWhatIf predicts scenarios from a batch fit (perflab model --fit): a scenario that
// coalesces up to its sync point puts k requests in a cycle (DefaultBatchK when k ≤ 0, said in
// the assumptions); a what-if link (link not nil) is ignored, and the report says so.
func PredictBatchWhatIf(b models.Batch, scenarios []Scenario, k int, link *models.Link) *ModelReport {
	givenK := k > 0
	for i := range scenarios {
		if scenarios[i].WhatIf.Coalesce <= 0 {
			if k <= 0 {
				k = DefaultBatchK
			}
			scenarios[i].WhatIf.Coalesce = k
		}
	}
	rep := PredictBatch(b, scenarios)
	if !givenK && k == DefaultBatchK {
		rep.Assumptions = append(rep.Assumptions, fmt.Sprintf("coalescing puts K=%d requests in a cycle (set --coalesce)", DefaultBatchK))
	}
	if link != nil {
		rep.Assumptions = append(rep.Assumptions, "--rtt, --link and --bandwidth were ignored: a batch fit has no link of its own")
	}
	return rep
}

// PredictLoopOn predicts scenarios on a calibrated loop, each moved onto the what-if link when
// link is not nil (a negative RTTUS keeps the recorded link's RTT) and named for it.
func PredictLoopOn(source string, fit *LoopFit, scenarios []Scenario, link *models.Link) *ModelReport {
	if link != nil {
		if link.RTTUS < 0 {
			link.RTTUS = fit.Loop.Link.RTTUS
		}
		for i := range scenarios {
			scenarios[i].WhatIf.Link = link
			scenarios[i].Name += " @ " + LinkLabel(link)
		}
	}
	return PredictLoop(source, fit, scenarios)
}

// LinkLabel names a what-if link: its preset name, else its RTT and bandwidth (B/s).
func LinkLabel(l *models.Link) string {
	if l.Name != "" && l.Name != "what-if" {
		return l.Name
	}
	s := time.Duration(l.RTTUS * 1e3).String()
	if l.BandwidthBps > 0 {
		s += fmt.Sprintf(", %.3g B/s", l.BandwidthBps)
	}
	return s
}
