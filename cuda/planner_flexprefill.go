package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/method/flexprefill"
)

// newFlexprefillPlanner returns the device planner of p.
func newFlexprefillPlanner(p flexprefill.Planner) (devicePlanner, error) {
	return nil, fmt.Errorf("%w: the %s planner runs on the CPU only", ErrUnsupported, p.Name())
}
