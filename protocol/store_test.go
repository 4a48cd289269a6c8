package protocol

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// junkStore is a Sink that keeps messages (MessageStore) in slots left dirty by earlier
// messages: every field of a fresh slot is set to something other than its zero value, so that
// a field the decoder forgets to set shows.
type junkStore struct {
	msgSink
	slot Message
	got  []Message
}

func (s *junkStore) NextMessage() *Message {
	v := reflect.ValueOf(&s.slot).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(-7)
		case reflect.Uint8, reflect.Uint32, reflect.Uint64:
			f.SetUint(7)
		case reflect.String:
			f.SetString("junk")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			panic("junkStore: set field " + v.Type().Field(i).Name)
		}
	}
	return &s.slot
}

func (s *junkStore) Message(m *Message) {
	if m != &s.slot {
		panic("message not built in the slot given")
	}
	s.got = append(s.got, *m)
}

// TestMessageStoreSlots: messages built in a MessageStore's slots are those built in the
// decoder's own storage, whatever the slots held before, for every decoder (framed binary,
// tracer frames, text, RESP, raw).
func TestMessageStoreSlots(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, src := range []trace.Source{trace.SourceEBPF, trace.SourceTracer} {
		path := filepath.Join(dir, src.String()+".plt")
		w, err := trace.Create(path, fixtures.Meta(src.String(), ""), fixtures.Options())
		if err != nil {
			t.Fatal(err)
		}
		if err := fixtures.Venus(w, fixtures.VenusOptions{Tokens: 4, Uploads: 2, Source: src}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	real, err := filepath.Glob(filepath.Join("..", "fixtures", "real", "*", "*.plt"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, real...)
	for _, name := range []string{"", "venus", "resp", "http", "memcached", "raw"} {
		var spec *Spec
		if name != "" {
			if spec, err = BuiltinSpec(name); err != nil {
				t.Fatal(err)
			}
		}
		ins := Files(paths, nil)
		var want []Message
		if err := Messages(ins, spec, func(m *Message) error { want = append(want, *m); return nil }); err != nil {
			t.Fatal(err)
		}
		store := &junkStore{}
		if err := Scan(ins, spec, store); err != nil {
			t.Fatal(err)
		}
		if len(store.got) != len(want) || len(want) == 0 {
			t.Fatalf("protocol %q: %d messages in slots, %d in the decoder", name, len(store.got), len(want))
		}
		for i := range want {
			if g, w := store.got[i], want[i]; !reflect.DeepEqual(g, w) {
				t.Fatalf("protocol %q: message %d built in a slot\n%+v\nwant\n%+v", name, i, g, w)
			}
		}
	}
}
