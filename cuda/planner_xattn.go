package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/method/xattn"
)

// newXattnPlanner returns the device planner of p.
func newXattnPlanner(p xattn.Planner) (devicePlanner, error) {
	return nil, fmt.Errorf("%w: the %s planner runs on the CPU only", ErrUnsupported, p.Name())
}
