package auto

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the profile loader. It must never
// panic, must reject with the package's typed error, and whatever it
// accepts must be valid, build a planner for every layer, and survive a
// save and load unchanged.
func FuzzLoad(f *testing.F) {
	var good bytes.Buffer
	if err := Save(&good, sampleProfile()); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:good.Len()/2])
	f.Add([]byte(`{"version":3}`))
	f.Add([]byte(`{"version":7,"layers":[]}`))
	f.Add([]byte(`{"version":3,"method":"auto","block_q":128,"block_k":64,"budget":0.05,"margin":0.1,"head_cap":0.15,"layers":[{"name":"a","l1":0.01,"sparsity":0.5,"heads":[{"method":"window","knob":-1}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrProfile) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted an invalid profile: %v", err)
		}
		for _, l := range p.Layers {
			for _, hd := range l.Heads {
				if _, err := NewMethod(hd.Method, hd.Knob, hd.Lambda); err != nil {
					t.Fatalf("accepted head %+v: %v", hd, err)
				}
			}
		}
		var out bytes.Buffer
		if err := Save(&out, p); err != nil {
			t.Fatalf("cannot save an accepted profile: %v", err)
		}
		back, err := Load(&out)
		if err != nil {
			t.Fatalf("reloading a saved profile: %v", err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Fatalf("round trip changed the profile:\n got %+v\nwant %+v", back, p)
		}
	})
}
