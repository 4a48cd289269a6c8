package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/units"
)

// Flag errors. Every invalid flag value of every verb is bad input (exit 2) reported in one
// line that names the flag, the value given and what is allowed, then where the usage is:
//
//	perflab venus run: --requests -1: want 1 to 1000000000; run 'perflab venus run -h' for usage
//
// Ranges are declared next to the flag with IntRange, DurationRange, FloatRange, Choice or
// FlagCheck; they are checked while the command line is parsed, so a verb sees only values in
// range. Checks that involve several flags, or that happen after parsing, return FlagError.

// FlagError returns a bad-input error for flag name (without dashes) given value: "--NAME
// VALUE: want WANT", where want is a format for a, saying what is allowed.
func FlagError(name string, value any, want string, a ...any) error {
	return BadInput("%s %v: want %s", dashed(name), flagValueString(value), fmt.Sprintf(want, a...))
}

// dashed writes a flag's name as its usage does: -p, -o, --format.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func flagValueString(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" || strings.ContainsAny(x, " \t\n\"'") {
			return strconv.Quote(x)
		}
		return x
	case time.Duration:
		return x.String()
	}
	return fmt.Sprint(v)
}

// wantError is a flag value's complaint: what the flag allows.
type wantError struct{ want string }

func (e *wantError) Error() string { return "want " + e.want }

// checkedValue wraps a flag's Value with a check of the parsed value.
type checkedValue struct {
	flag.Value
	want  string                // what is allowed, for the error of a value that does not parse
	check func(flag.Value) bool // reports whether the parsed value is allowed
	bytes bool                  // the value is a byte count: sizes like 4K or 1MiB are read (units)
}

func (v *checkedValue) Set(s string) error {
	if v.bytes {
		if n, err := units.ParseBytes(s); err == nil {
			s = strconv.FormatInt(n, 10)
		}
	}
	if err := v.Value.Set(s); err != nil {
		var we *wantError
		if errors.As(err, &we) {
			return err
		}
		return &wantError{v.want}
	}
	if v.check != nil && !v.check(v.Value) {
		return &wantError{v.want}
	}
	return nil
}

// String returns the wrapped value's text ("" for the zero checkedValue that flag's
// PrintDefaults makes to find zero defaults).
func (v *checkedValue) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

// IsBoolFlag keeps a wrapped boolean flag usable without a value.
func (v *checkedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Get returns the wrapped value's, so that flag.Getter keeps working.
func (v *checkedValue) Get() any {
	if g, ok := v.Value.(flag.Getter); ok {
		return g.Get()
	}
	return v.Value.String()
}

func wrapFlag(fs *flag.FlagSet, name, want string, check func(flag.Value) bool) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cli: range for undefined flag -" + name)
	}
	// The wrapper hides the flag's type from flag.UnquoteUsage: name it in the usage, with
	// what is allowed, so that -h shows both.
	if strings.Contains(f.Usage, "`") {
		f.Usage += " [" + want + "]"
	} else {
		f.Usage += " [`" + typeName(f.Value) + "`: " + want + "]"
	}
	f.Value = &checkedValue{Value: f.Value, want: want, check: check}
}

// typeName is the word -h shows for a flag's value.
func typeName(v flag.Value) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return "value"
	}
	switch g.Get().(type) {
	case int, int64:
		return "int"
	case uint, uint64:
		return "uint"
	case float64:
		return "float"
	case time.Duration:
		return "duration"
	case string:
		return "string"
	}
	return "value"
}

// intRangeText says which integers from lo to hi are allowed.
func intRangeText(lo, hi int64) string {
	switch {
	case hi == math.MaxInt64 || hi == math.MaxInt:
		return fmt.Sprintf("an integer of at least %d", lo)
	case lo == hi:
		return fmt.Sprintf("%d", lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// IntRange limits the integer flag name (an int, int64, uint or uint64 flag) to lo..hi,
// inclusive; hi math.MaxInt64 means no upper bound.
func IntRange(fs *flag.FlagSet, name string, lo, hi int64) {
	wrapFlag(fs, name, intRangeText(lo, hi), func(v flag.Value) bool {
		switch x := v.(flag.Getter).Get().(type) {
		case int:
			return int64(x) >= lo && int64(x) <= hi
		case int64:
			return x >= lo && x <= hi
		case uint:
			return uintIn(uint64(x), lo, hi)
		case uint64:
			return uintIn(x, lo, hi)
		}
		return false
	})
}

// ByteRange is IntRange for a byte count: it also reads sizes with a unit, as every verb does
// (units.ParseBytes: 4K and 4KiB are 4096, 4KB is 4000).
func ByteRange(fs *flag.FlagSet, name string, lo, hi int64) {
	IntRange(fs, name, lo, hi)
	f := fs.Lookup(name)
	f.Value.(*checkedValue).bytes = true
	f.Usage += " (or a size like 4K, 1MiB)"
}

// powerOfTwo further limits the integer flag name, already limited by IntRange or ByteRange, to
// powers of two.
func powerOfTwo(fs *flag.FlagSet, name string) {
	v := fs.Lookup(name).Value.(*checkedValue)
	inRange := v.check
	v.want = "a power of two, " + v.want
	v.check = func(x flag.Value) bool {
		n, ok := x.(flag.Getter).Get().(int)
		return ok && n > 0 && n&(n-1) == 0 && inRange(x)
	}
}

func uintIn(x uint64, lo, hi int64) bool {
	if lo > 0 && x < uint64(lo) {
		return false
	}
	return hi == math.MaxInt64 || hi >= 0 && x <= uint64(hi)
}

// DurationRange limits the duration flag name to lo..hi, inclusive; hi math.MaxInt64 means no
// upper bound.
func DurationRange(fs *flag.FlagSet, name string, lo, hi time.Duration) {
	want := fmt.Sprintf("a duration from %s to %s (like 250us, 2ms, 1.5s)", durText(lo), durText(hi))
	if hi == math.MaxInt64 {
		want = fmt.Sprintf("a duration of at least %s (like 250us, 2ms, 1.5s)", durText(lo))
	}
	wrapFlag(fs, name, want, func(v flag.Value) bool {
		d, ok := v.(flag.Getter).Get().(time.Duration)
		return ok && d >= lo && d <= hi
	})
}

// durText writes d shortly: 24h rather than 24h0m0s.
func durText(d time.Duration) string {
	for _, u := range []struct {
		d time.Duration
		s string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d != 0 && d%u.d == 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.s)
		}
	}
	if d == 0 {
		return "0"
	}
	return d.String()
}

// FloatRange limits the float flag name to lo..hi; with open the bounds themselves are not
// allowed. NaN never is.
func FloatRange(fs *flag.FlagSet, name string, lo, hi float64, open bool) {
	want := fmt.Sprintf("a number from %g to %g", lo, hi)
	if open {
		want = fmt.Sprintf("a number between %g and %g, exclusive", lo, hi)
	}
	wrapFlag(fs, name, want, func(v flag.Value) bool {
		x, ok := v.(flag.Getter).Get().(float64)
		if !ok || math.IsNaN(x) {
			return false
		}
		if open {
			return x > lo && x < hi
		}
		return x >= lo && x <= hi
	})
}

// Choice limits the string flag name to one of choices.
func Choice(fs *flag.FlagSet, name string, choices ...string) {
	want := "one of " + strings.Join(choices, ", ")
	wrapFlag(fs, name, want, func(v flag.Value) bool {
		s := v.String()
		for _, c := range choices {
			if s == c {
				return true
			}
		}
		return false
	})
}

// FlagCheck checks the flag name's text with valid, which returns nil or an error saying what
// is allowed ("want ..." is added in front of its message when it lacks one).
func FlagCheck(fs *flag.FlagSet, name string, valid func(string) error) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cli: check for undefined flag -" + name)
	}
	f.Value = &funcChecked{Value: f.Value, valid: valid}
}

type funcChecked struct {
	flag.Value
	valid func(string) error
}

// String returns the wrapped value's text ("" for a zero funcChecked).
func (v *funcChecked) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

func (v *funcChecked) Set(s string) error {
	if err := v.valid(s); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "want ") {
			msg = "want " + msg
		}
		return errors.New(msg)
	}
	return v.Value.Set(s)
}

// Get returns the wrapped value's, so that flag.Getter keeps working.
func (v *funcChecked) Get() any {
	if g, ok := v.Value.(flag.Getter); ok {
		return g.Get()
	}
	return v.Value.String()
}

// flagParseError turns an error of flag.FlagSet.Parse into one line naming the flag: the
// standard library's messages name it with one dash and, for a value that does not parse, end
// in strconv's "parse error".
func flagParseError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "VALUE" for flag -NAME: WHY
		if val, err := strconv.QuotedPrefix(rest); err == nil {
			rest = rest[len(val):]
			uq, _ := strconv.Unquote(val)
			if after, ok := strings.CutPrefix(rest, " for flag -"); ok {
				name, why, _ := strings.Cut(after, ": ")
				if !strings.HasPrefix(why, "want ") {
					why = "want " + typeWant(fs.Lookup(name))
				}
				return BadInput("%s %s: %s", dashed(name), flagValueString(uq), why)
			}
		}
	}
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		if val, err := strconv.QuotedPrefix(rest); err == nil {
			name, _, _ := strings.Cut(strings.TrimPrefix(rest[len(val):], " for -"), ":")
			uq, _ := strconv.Unquote(val)
			return BadInput("%s %s: want true or false", dashed(name), flagValueString(uq))
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return BadInput("unknown flag %s", dashed(strings.TrimPrefix(name, "-")))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		want := typeWant(fs.Lookup(name))
		return BadInput("%s needs a value: want %s", dashed(name), want)
	}
	return BadInput("%s", msg)
}

// typeWant says what a flag of f's type accepts, for a value that does not parse.
func typeWant(f *flag.Flag) string {
	if f == nil {
		return "a valid value"
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "a valid value"
	}
	switch g.Get().(type) {
	case int, int64:
		return "an integer"
	case uint, uint64:
		return "a non-negative integer"
	case float64:
		return "a number"
	case time.Duration:
		return "a duration like 250us, 2ms or 1.5s"
	case bool:
		return "true or false"
	}
	return "a valid value"
}
