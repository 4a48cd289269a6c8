package compare

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// GateSchema is the schema name of `perflab gate --format json`.
const GateSchema = "perflab.gate/v1"

// Gate defaults. MinSamples is 6 because with 5 runs per side no Mann-Whitney p-value can go
// below 0.0079 two-sided (1/252 one-sided), so after a correction over several metrics no
// regression could ever be shown; 6 per side reach 1/924. MaxCV is the noise above which a
// sample cannot show a change of the size rules usually allow. MinEffect keeps a statistically
// clear but tiny change from failing a build.
const (
	DefaultMinSamples = 6
	DefaultMaxCV      = 0.10
	DefaultMinEffect  = 0.02
	// DefaultFewRunsMargin is how far apart two runs of one build may be assumed to lie (1 =
	// a factor 2): with fewer runs than MinSamples, a timed rule is decided from the samples
	// within the runs (per-token times, round trips), which say nothing about the drift from
	// one run to the next, so the change must exceed the allowance by this factor as well.
	DefaultFewRunsMargin = 1.0
)

// Rule is one gate rule: metric may not get worse (in Direction) by more than Allowed.
type Rule struct {
	Metric    string  `json:"metric"`
	Direction string  `json:"direction"`            // "lower" (lower is better), "higher", or "zero" (must be 0)
	Allowed   float64 `json:"allowed"`              // allowed change in the bad direction, fraction (0.1 = 10%)
	Alpha     float64 `json:"alpha,omitempty"`      // significance after correction; 0 = the config's
	MinEffect float64 `json:"min_effect,omitempty"` // smallest change that may fail; 0 = the config's
	MaxCV     float64 `json:"max_cv,omitempty"`     // noise ceiling; 0 = the config's
	// Optional rules (the defaults) are skipped, with a warning, when neither side measures
	// their metric; a configured rule whose metric is missing is inconclusive.
	Optional bool `json:"-"`
}

// GateConfig is a gate's rules and policies.
type GateConfig struct {
	Rules          []Rule  `json:"rules"`
	Alpha          float64 `json:"alpha"`
	MinSamples     int     `json:"min_samples"`
	MaxCV          float64 `json:"max_cv"`
	MinEffect      float64 `json:"min_effect"`
	FewRunsMargin  float64 `json:"few_runs_margin"` // see DefaultFewRunsMargin
	AllowLost      bool    `json:"allow_lost"`      // lost events: a rule decides, instead of refusing the input
	AllowDamaged   bool    `json:"allow_damaged"`   // damaged or cut traces are accepted
	OnInconclusive string  `json:"on_inconclusive"` // "pass" or "fail"
}

// DefaultGateConfig returns the rules used without a config file: round-trip p50 and p99,
// messages per token, tokens/s, and no lost events.
func DefaultGateConfig() *GateConfig {
	return &GateConfig{
		Alpha: DefaultAlpha, MinSamples: DefaultMinSamples, MaxCV: DefaultMaxCV, MinEffect: DefaultMinEffect,
		FewRunsMargin: DefaultFewRunsMargin, OnInconclusive: "pass",
		Rules: []Rule{
			{Metric: MetricRTTP50, Direction: "lower", Allowed: 0.10, Optional: true},
			{Metric: MetricRTTP99, Direction: "lower", Allowed: 0.25, Optional: true},
			{Metric: MetricMessages, Direction: "lower", Allowed: 0, Optional: true},
			{Metric: MetricTokensPerS, Direction: "higher", Allowed: 0.10, Optional: true},
			{Metric: MetricLost, Direction: "zero", Optional: true},
		},
	}
}

// ParseGateConfig reads a gate config: one setting or rule per line, '#' starts a comment.
//
//	alpha 0.05               significance level, after Holm's correction over the rules
//	min_samples 6            runs per side below which a rule is inconclusive (at least 6)
//	max_cv 10%               noise ceiling: a side noisier than this is inconclusive
//	min_effect 2%            smallest change that may fail
//	few_runs_margin 100%     with fewer runs, a timed change must also exceed this factor
//	allow_lost yes|no        lost events go to the "lost" rule instead of refusing the input
//	allow_damaged yes|no     accept damaged or cut traces
//	on_inconclusive pass|fail
//	rule METRIC lower|higher ALLOWED [alpha=A] [min_effect=E] [max_cv=C]
//	rule METRIC zero
//
// Percentages may be written as 10% or 0.10. A config with no rule lines uses the default rules.
func ParseGateConfig(r io.Reader, name string) (*GateConfig, error) {
	c := DefaultGateConfig()
	c.Rules = nil
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if err := c.set(f); err != nil {
			return nil, fmt.Errorf("%s:%d: %s", name, line, err.Error())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(c.Rules) == 0 {
		c.Rules = DefaultGateConfig().Rules
	}
	return c, nil
}

// set applies one line of a gate config, split into fields (f[0] names the setting).
func (c *GateConfig) set(f []string) error {
	if f[0] == "rule" {
		rl, err := parseRule(f[1:])
		if err != nil {
			return err
		}
		c.Rules = append(c.Rules, rl)
		return nil
	}
	setting, ok := gateSettings[f[0]]
	if !ok {
		return fmt.Errorf("unknown setting %q", f[0])
	}
	if len(f) != 2 {
		return fmt.Errorf("%s takes one value", f[0])
	}
	return setting(c, f[0], f[1])
}

// gateSettings sets, by name, the gate config settings that take one value (v).
var gateSettings = map[string]func(c *GateConfig, name, v string) error{
	"few_runs_margin": setFewRunsMargin,
	"alpha":           setFraction,
	"max_cv":          setFraction,
	"min_effect":      setFraction,
	"min_samples":     setMinSamples,
	"allow_lost":      setAllow,
	"allow_damaged":   setAllow,
	"on_inconclusive": setOnInconclusive,
}

func setFewRunsMargin(c *GateConfig, _, v string) error {
	x, err := parseFrac(v)
	if err != nil || x < 0 || x > 100 {
		return fmt.Errorf("few_runs_margin must be ≥ 0, got %q", v)
	}
	c.FewRunsMargin = x
	return nil
}

// setFraction sets alpha, max_cv or min_effect (name): a fraction in (0, 1).
func setFraction(c *GateConfig, name, v string) error {
	x, err := parseFrac(v)
	if err != nil || x <= 0 || x >= 1 {
		return fmt.Errorf("%s must be in (0, 1), got %q", name, v)
	}
	switch name {
	case "alpha":
		c.Alpha = x
	case "max_cv":
		c.MaxCV = x
	default:
		c.MinEffect = x
	}
	return nil
}

func setMinSamples(c *GateConfig, _, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < DefaultMinSamples || n > 100000 {
		return fmt.Errorf("min_samples must be an integer ≥ %d, got %q", DefaultMinSamples, v)
	}
	c.MinSamples = n
	return nil
}

// setAllow sets allow_lost or allow_damaged (name): yes or no.
func setAllow(c *GateConfig, name, v string) error {
	b, err := parseYes(v)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if name == "allow_lost" {
		c.AllowLost = b
	} else {
		c.AllowDamaged = b
	}
	return nil
}

func setOnInconclusive(c *GateConfig, _, v string) error {
	if v != "pass" && v != "fail" {
		return fmt.Errorf("on_inconclusive must be pass or fail, got %q", v)
	}
	c.OnInconclusive = v
	return nil
}

func parseRule(f []string) (Rule, error) {
	if len(f) < 2 {
		return Rule{}, errors.New("rule needs METRIC DIRECTION [ALLOWED]")
	}
	r := Rule{Metric: f[0], Direction: f[1]}
	switch r.Direction {
	case "zero":
		if len(f) != 2 {
			return Rule{}, errors.New("a zero rule takes no allowance")
		}
		return r, nil
	case "lower", "higher":
	default:
		return Rule{}, fmt.Errorf("direction must be lower, higher or zero, got %q", f[1])
	}
	if len(f) < 3 {
		return Rule{}, fmt.Errorf("rule %s %s needs an allowed change", r.Metric, r.Direction)
	}
	x, err := parseFrac(f[2])
	if err != nil || x < 0 || x >= 10 {
		return Rule{}, fmt.Errorf("allowed change must be a fraction or percentage ≥ 0, got %q", f[2])
	}
	r.Allowed = x
	for _, opt := range f[3:] {
		k, v, ok := strings.Cut(opt, "=")
		if !ok {
			return Rule{}, fmt.Errorf("option %q is not key=value", opt)
		}
		x, err := parseFrac(v)
		if err != nil || x <= 0 || x >= 1 {
			return Rule{}, fmt.Errorf("%s must be in (0, 1), got %q", k, v)
		}
		switch k {
		case "alpha":
			r.Alpha = x
		case "min_effect":
			r.MinEffect = x
		case "max_cv":
			r.MaxCV = x
		default:
			return Rule{}, fmt.Errorf("unknown rule option %q", k)
		}
	}
	return r, nil
}

func parseFrac(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

func parseYes(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "yes", "true", "1", "on":
		return true, nil
	case "no", "false", "0", "off":
		return false, nil
	}
	return false, fmt.Errorf("want yes or no, got %q", s)
}

// GateResult is the decision of a gate.
type GateResult struct {
	Schema         string       `json:"schema"`
	Verdict        string       `json:"verdict"` // "pass", "regression", "inconclusive"
	Baseline       []string     `json:"baseline"`
	Current        []string     `json:"current"`
	Relative       bool         `json:"relative"` // metrics are ratios to reference runs
	Alpha          float64      `json:"alpha"`
	OnInconclusive string       `json:"on_inconclusive"`
	Rules          []RuleResult `json:"rules"`
	Warnings       []string     `json:"warnings"`
}

// RuleResult is the verdict of one rule.
type RuleResult struct {
	Metric    string   `json:"metric"`
	Direction string   `json:"direction"`
	Allowed   float64  `json:"allowed"`
	Verdict   string   `json:"verdict"` // "pass", "regression", "inconclusive"
	Detail    string   `json:"detail"`
	Baseline  *float64 `json:"baseline"` // median of the baseline runs
	Current   *float64 `json:"current"`  // median of the current runs
	Change    *float64 `json:"change"`   // current/baseline − 1
	PValue    *float64 `json:"p_value"`  // one-sided Mann-Whitney U against the baseline moved by the allowance
	PAdjusted *float64 `json:"p_adjusted"`
	// CV is the robust coefficient of variation (1.4826·MAD/median) of baseline and current:
	// one outlier run on a shared machine does not make a rank test blind, so it should not
	// make the gate inconclusive either.
	CV [2]float64 `json:"cv"`
	N  [2]int     `json:"n"` // runs of baseline and current (samples, for Basis tokens or messages)
	// Basis is what decided: "runs" (one value per run, U test), "counts" (an exact count,
	// the same in every run of each side: no test), "tokens" or "messages" (fewer runs than
	// min_samples: a bootstrap of the samples within the runs).
	Basis string `json:"basis,omitempty"`
}

// BadInputError is input a gate refuses: lost events, a damaged trace.
type BadInputError struct{ Msg string }

func (e *BadInputError) Error() string { return e.Msg }

// CheckInputs returns a *BadInputError for the first run that the config does not allow: a
// trace that lost events (unless AllowLost) or a damaged one (unless AllowDamaged).
func CheckInputs(runs []Run, cfg *GateConfig) error {
	for _, r := range runs {
		if r.Lost > 0 && !cfg.AllowLost {
			return &BadInputError{fmt.Sprintf("%s: trace lost %d events (set allow_lost in the gate config to let the lost rule decide)", r.Path, r.Lost)}
		}
		if r.Damage != "" && !cfg.AllowDamaged {
			return &BadInputError{fmt.Sprintf("%s: damaged trace: %s (set allow_damaged in the gate config to accept it)", r.Path, r.Damage)}
		}
	}
	return nil
}

// Gate decides whether current regressed against base under cfg. Each rule takes one value
// per run on each side. A rule is tested when both sides have cfg.MinSamples runs and noise
// under the ceiling: a one-sided Mann-Whitney U test of current against the baseline moved by
// the allowance (so the null hypothesis is "no worse than allowed"); the p-values of all tested
// rules are corrected with Holm's method. A rule is a regression when its corrected p is below
// alpha and its median changed in the bad direction by more than both the allowance and the
// minimum effect; inconclusive when it could not be tested, or changed that much without
// significance; else pass. Same inputs, same result: there is no randomness.
func Gate(base, cur []Run, cfg *GateConfig) *GateResult {
	if cfg == nil {
		cfg = DefaultGateConfig()
	}
	res := &GateResult{Schema: GateSchema, Alpha: cfg.Alpha, OnInconclusive: cfg.OnInconclusive, Warnings: []string{}}
	for _, r := range base {
		res.Baseline = append(res.Baseline, r.Path)
	}
	for _, r := range cur {
		res.Current = append(res.Current, r.Path)
	}
	res.Warnings = append(res.Warnings, runWarnings(base, cur)...)
	var tested []pendingTest
	for _, rule := range cfg.Rules {
		if rule.Optional && len(values(base, rule.Metric)) == 0 && len(values(cur, rule.Metric)) == 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: not measured by these inputs; default rule skipped", rule.Metric))
			continue
		}
		rr, pt := gateRule(rule, base, cur, cfg)
		if pt != nil {
			pt.i = len(res.Rules)
			tested = append(tested, *pt)
		}
		res.Rules = append(res.Rules, rr)
	}
	decideTested(res, tested)
	for i := range res.Rules {
		res.Rules[i].bounded(base, cur)
	}
	gateVerdict(res, cfg)
	return res
}

// bounded makes a rule's verdict on a metric counted from messages inconclusive where the
// counts that are lower bounds (messages pipelined past the captured payload heads) could
// overturn it. A side's true value is at least what was counted, and at most that times its
// CountsUpTo when known: the true ratio current/baseline lies in [r/ub, r·uc]. A current count
// too high (where lower is better) or a baseline too high is a regression all the more; a pass,
// or a regression the other way, stands only if the bounds keep it within (or beyond) the
// allowance.
func (rr *RuleResult) bounded(base, cur []Run) {
	if !Info(rr.Metric).Counted || rr.Verdict == "inconclusive" || rr.Direction == "zero" {
		return
	}
	lowBase, lowCur := lowerBound(base), lowerBound(cur)
	if !lowBase && !lowCur {
		return
	}
	ub, uc := upTo(base), upTo(cur)
	r := math.NaN()
	if rr.Change != nil {
		r = 1 + *rr.Change
	}
	stands := false
	switch higher := rr.Direction == "higher"; {
	case rr.Verdict == "pass" && higher:
		stands = ub == 1 || r/ub >= 1-rr.Allowed
	case rr.Verdict == "pass":
		stands = uc == 1 || r*uc <= 1+rr.Allowed
	case rr.Verdict == "regression" && higher:
		stands = uc == 1 || r*uc < 1-rr.Allowed
	case rr.Verdict == "regression":
		stands = ub == 1 || r/ub > 1+rr.Allowed
	}
	if stands {
		return
	}
	side := "the current runs'"
	switch {
	case lowBase && lowCur:
		side = "both sides'"
	case lowBase:
		side = "the baseline's"
	}
	rr.Verdict = "inconclusive"
	rr.Detail += "; " + side + " counts are lower bounds (messages pipelined past the captured payload heads, not counted), which could overturn this"
}

// pendingTest is a rule whose verdict waits for the p-values of all the tested rules (Holm).
type pendingTest struct {
	i       int // the rule's index in GateResult.Rules
	p       float64
	alpha   float64
	beyond  bool // changed in the bad direction by more than allowed and the minimum effect
	unsure  bool // changed that much, or (few runs) beyond the allowance but not the margin
	summary string
	stats   string // how the samples were tested, when not one value per run
}

// gateRule judges one rule on the baseline and current runs: a verdict, or a test whose
// verdict decideTested gives once every rule's p-value is known.
func gateRule(rule Rule, base, cur []Run, cfg *GateConfig) (rr RuleResult, pt *pendingTest) {
	rr = RuleResult{Metric: rule.Metric, Direction: rule.Direction, Allowed: rule.Allowed}
	bv, cv := values(base, rule.Metric), values(cur, rule.Metric)
	rr.N = [2]int{len(bv), len(cv)}
	if rule.Direction == "zero" {
		return zeroRule(rr, rule, cv), nil
	}
	if len(bv) == 0 || len(cv) == 0 {
		side := "baseline"
		if len(bv) > 0 {
			side = "current runs"
		}
		rr.Verdict, rr.Detail = "inconclusive", fmt.Sprintf("%s missing in the %s", rule.Metric, side)
		return rr, nil
	}
	j := measureRule(&rr, rule, base, cur, bv, cv, cfg)
	switch {
	case j.mi.Count && Exact(bv, j.mi.Whole) && Exact(cv, j.mi.Whole):
		countRule(&rr, rule, j)
	case j.few && len(j.xs) >= bootstrapMinN(j.q) && len(j.ys) >= bootstrapMinN(j.q):
		// Too few runs for a test of run values, but the runs hold samples (traces): test
		// the samples, and ask for a change beyond run-to-run drift as well.
		pt = sampleTest(&rr, rule, cfg, j.xs, j.ys, j.q, j.nb, j.nc, j.higher, j.bad, j.minEff, j.alpha, j.summary)
	case j.few:
		fewRunsRule(&rr, cfg, j)
	case j.cvb > j.maxCV || j.cvc > j.maxCV:
		rr.Verdict = "inconclusive"
		rr.Detail = fmt.Sprintf("%s; too noisy: robust CV baseline %.1f%%, current %.1f%% (ceiling %.1f%%)", j.summary, 100*j.cvb, 100*j.cvc, 100*j.maxCV)
	default:
		pt = runTest(&rr, rule, bv, cv, j)
	}
	return rr, pt
}

// ruleMeasure is what gateRule measured of one rule's runs before judging it.
type ruleMeasure struct {
	mi            MetricInfo
	nb, nc        int     // baseline and current runs with the metric
	higher        bool    // higher is better
	bad           float64 // the change in the bad direction, > 0 is worse
	beyond        bool    // worse than allowed and than the minimum effect
	minEff, maxCV float64
	alpha         float64
	cvb, cvc      float64 // robust CVs of the baseline and current values
	summary       string  // "before → after (change, allowed)"
	few           bool    // fewer runs than a test of run values needs
	xs, ys        []float64
	q             float64 // the statistic of the samples, as bootstrapRatios takes it
}

// measureRule fills rr's medians, change and CVs from the run values bv and cv, and returns
// what judging the rule needs.
func measureRule(rr *RuleResult, rule Rule, base, cur []Run, bv, cv []float64, cfg *GateConfig) *ruleMeasure {
	j := &ruleMeasure{nb: len(bv), nc: len(cv), higher: rule.Direction == "higher"}
	mb, mc := median(bv), median(cv)
	rr.Baseline, rr.Current = fptr(mb), fptr(mc)
	ch := ratio(mc, mb) - 1
	rr.Change = fptr(ch)
	j.cvb, j.cvc = robustCV(bv), robustCV(cv)
	rr.CV = [2]float64{j.cvb, j.cvc}
	j.bad = ch
	if j.higher {
		j.bad = -ch
	}
	j.minEff = pick(rule.MinEffect, cfg.MinEffect)
	j.beyond = j.bad > rule.Allowed && j.bad > j.minEff
	j.maxCV = pick(rule.MaxCV, cfg.MaxCV)
	j.alpha = pick(rule.Alpha, cfg.Alpha)
	j.summary = fmt.Sprintf("%s → %s (%s, allowed %s)", num(mb), num(mc), pct(ch), allowed(rule.Allowed, j.higher))
	rr.Basis = "runs"
	j.mi = Info(rule.Metric)
	j.few = len(bv) < cfg.MinSamples || len(cv) < cfg.MinSamples
	if j.few && j.mi.Sample != "" { // samples within the runs, for a rule with too few runs
		j.xs, j.ys = pooled(base, j.mi.Sample), pooled(cur, j.mi.Sample)
	}
	j.q = j.mi.Quantile
	if j.mi.Rate {
		j.q = -1 // mean token time (or gap between requests)
	}
	return j
}

// countRule judges an exact count: no noise, so no test and no minimum effect; the allowance
// decides.
func countRule(rr *RuleResult, rule Rule, j *ruleMeasure) {
	rr.Basis = "counts"
	how := fmt.Sprintf("exact count (one value in all %d baseline and %d current runs): no test needed", j.nb, j.nc)
	if j.nb == 1 || j.nc == 1 {
		how = fmt.Sprintf("exact count (a whole number per unit; %d baseline, %d current runs): no test needed", j.nb, j.nc)
	}
	if j.bad > rule.Allowed+1e-12 {
		rr.Verdict, rr.Detail = "regression", j.summary+"; "+how
	} else {
		rr.Verdict, rr.Detail = "pass", j.summary+"; "+how
	}
}

// fewRunsRule leaves a rule with too few runs, and too few samples in them, inconclusive,
// saying how many samples the traces hold when they hold some.
func fewRunsRule(rr *RuleResult, cfg *GateConfig, j *ruleMeasure) {
	rr.Verdict = "inconclusive"
	rr.Detail = fmt.Sprintf("%s; need ≥ %d runs per side, have %d baseline and %d current (with these n no test can reach p < %.2g)", j.summary, cfg.MinSamples, j.nb, j.nc, MinPValue(j.nb, j.nc, TwoSided))
	if j.mi.Sample != "" && (len(j.xs) > 0 || len(j.ys) > 0) {
		rr.Detail += fmt.Sprintf("; the traces hold %d/%d samples, a bootstrap needs ≥ %d per side", len(j.xs), len(j.ys), bootstrapMinN(j.q))
	}
}

// runTest tests the run values: is the current median worse than the baseline's moved by the
// allowance (Mann-Whitney)? The verdict waits for decideTested.
func runTest(rr *RuleResult, rule Rule, bv, cv []float64, j *ruleMeasure) *pendingTest {
	moved := make([]float64, len(bv))
	alt := Greater
	for k, v := range bv {
		if j.higher {
			moved[k] = v * (1 - rule.Allowed)
		} else {
			moved[k] = v * (1 + rule.Allowed)
		}
	}
	if j.higher {
		alt = Less
	}
	_, p := MannWhitney(cv, moved, alt)
	rr.PValue = fptr(p)
	return &pendingTest{p: p, alpha: j.alpha, beyond: j.beyond, unsure: j.beyond, summary: j.summary}
}

// sampleTest tests a rule with too few runs on the samples within them (xs before, ys after;
// q the statistic, as bootstrapRatios takes it): rr says what was tested, and the test waits
// for decideTested; nil when the samples could not be resampled (rr is then inconclusive).
func sampleTest(rr *RuleResult, rule Rule, cfg *GateConfig, xs, ys []float64, q float64, nb, nc int, higher bool, bad, minEff, alpha float64, summary string) *pendingTest {
	rr.Basis = "messages"
	if q < 0 {
		rr.Basis = "tokens"
	}
	rr.N = [2]int{len(xs), len(ys)}
	// The ratio of the samples' statistic that counts as "worse than allowed": the
	// samples are latencies or token times, so lower is better for them.
	limit := 1 + rule.Allowed
	if higher {
		limit = 1 / math.Max(1-rule.Allowed, 1e-9)
	}
	margin := 1 + cfg.FewRunsMargin
	ratios := bootstrapRatios(xs, ys, q)
	if ratios == nil {
		rr.Verdict, rr.Detail = "inconclusive", summary+"; the samples could not be resampled"
		return nil
	}
	sr := ratio(statistic(append([]float64(nil), ys...), q), statistic(append([]float64(nil), xs...), q))
	p := bootstrapP(ratios, limit*margin, Greater)
	rr.PValue = fptr(p)
	what := "round trips"
	if rr.Basis == "tokens" {
		what = "token times"
	}
	stats := fmt.Sprintf("%d/%d runs: %s within them as samples (%d/%d), which do not show how far runs drift apart, so a regression must also exceed the allowance by ×%.3g", nb, nc, what, len(xs), len(ys), margin)
	return &pendingTest{p: p, alpha: alpha, beyond: sr > limit*margin && bad > minEff,
		unsure: sr > limit && bad > minEff, summary: summary, stats: stats}
}

// zeroRule judges a rule that wants the metric 0 in every current run.
func zeroRule(rr RuleResult, rule Rule, cv []float64) RuleResult {
	worst := 0.0
	for _, v := range cv {
		worst = math.Max(worst, v)
	}
	rr.Current = fptr(worst)
	if len(cv) == 0 {
		rr.Verdict, rr.Detail = "inconclusive", "no current run reports "+rule.Metric
	} else if worst > 0 {
		rr.Verdict, rr.Detail = "regression", fmt.Sprintf("%s is %g in a current run, must be 0", rule.Metric, worst)
	} else {
		rr.Verdict, rr.Detail = "pass", fmt.Sprintf("%s is 0 in all %d current runs", rule.Metric, len(cv))
	}
	return rr
}

// decideTested gives the tested rules their verdicts, their p-values adjusted over all of them
// (Holm).
func decideTested(res *GateResult, tested []pendingTest) {
	if len(tested) == 0 {
		return
	}
	ps := make([]float64, len(tested))
	for j, t := range tested {
		ps[j] = t.p
	}
	adj := Holm(ps)
	m := len(tested)
	for j, t := range tested {
		rr := &res.Rules[t.i]
		rr.PAdjusted = fptr(adj[j])
		minP := MinPValue(rr.N[0], rr.N[1], Greater)
		stats := fmt.Sprintf("p=%.3g, Holm-adjusted %.3g over %d rules, n=%d/%d, CV %.1f%%/%.1f%%", t.p, adj[j], m, rr.N[0], rr.N[1], 100*rr.CV[0], 100*rr.CV[1])
		if t.stats != "" {
			minP = 1 / float64(DefaultBootstrap+1)
			stats = fmt.Sprintf("p=%.3g (bootstrap), Holm-adjusted %.3g over %d rules; %s", t.p, adj[j], m, t.stats)
		}
		switch {
		case adj[j] < t.alpha && t.beyond:
			rr.Verdict = "regression"
			rr.Detail = t.summary + "; " + stats
		case t.unsure && t.stats != "" && !t.beyond:
			// One run per side can only check changes beyond run-to-run drift: say so.
			rr.Verdict = "pass"
			rr.Detail = t.summary + "; beyond the allowance but within the run-drift margin, all that these runs can check: " + stats
		case t.unsure:
			rr.Verdict = "inconclusive"
			rr.Detail = t.summary + "; not significant: " + stats
			if minP*float64(m) >= t.alpha {
				rr.Detail += fmt.Sprintf("; with these n the smallest p is %.3g, too large for alpha %.3g over %d rules: add runs", minP, t.alpha, m)
			}
		default:
			rr.Verdict = "pass"
			rr.Detail = t.summary + "; " + stats
		}
	}
}

// gateVerdict sets the gate's verdict from its rules' (a regression wins, then inconclusive)
// and its closing warnings.
func gateVerdict(res *GateResult, cfg *GateConfig) {
	res.Verdict = "pass"
	for _, r := range res.Rules {
		if r.Verdict == "regression" {
			res.Verdict = "regression"
			break
		}
		if r.Verdict == "inconclusive" {
			res.Verdict = "inconclusive"
		}
	}
	few := 0
	for _, r := range res.Rules {
		if r.Basis == "tokens" || r.Basis == "messages" {
			few++
		}
	}
	if few > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d rules decided from the samples within fewer than %d runs per side: only changes beyond their allowance ×%.3g (the margin for runs drifting apart) can fail; give ≥ %d runs per side to gate the allowance itself", few, cfg.MinSamples, 1+cfg.FewRunsMargin, cfg.MinSamples))
	}
	if res.Verdict == "inconclusive" {
		res.Warnings = append(res.Warnings, fmt.Sprintf("INCONCLUSIVE: the gate could not decide every rule; treated as %s (on_inconclusive)", cfg.OnInconclusive))
	}
}

func pick(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func pct(ch float64) string {
	if math.IsInf(ch, 0) || math.IsNaN(ch) {
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", 100*ch)
}

func allowed(a float64, higher bool) string {
	if higher {
		return fmt.Sprintf("-%.0f%%", 100*a)
	}
	return fmt.Sprintf("+%.0f%%", 100*a)
}
