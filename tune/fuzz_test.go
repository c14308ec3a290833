package tune

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/sparseattn/sparseattn/method/sparge"
)

// FuzzLoad feeds arbitrary bytes to the profile loader. It must never
// panic, must reject with one of the package's typed errors, and whatever
// it accepts must be valid and survive a save and load unchanged.
func FuzzLoad(f *testing.F) {
	var good bytes.Buffer
	if err := Save(&good, sampleProfile()); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:good.Len()/2])
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":99,"layers":[]}`))
	f.Add([]byte(`{"version":1,"method":"sparge","block_q":128,"block_k":64,"l1":0.05,"l2":0.06,"layers":[{"name":"a","heads":[{"cdf":2}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(bytes.NewReader(data))
		if err != nil {
			var ve *VersionError
			if !errors.Is(err, ErrProfile) && !errors.Is(err, ErrBudget) && !errors.Is(err, sparge.ErrParams) && !errors.As(err, &ve) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted an invalid profile: %v", err)
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
