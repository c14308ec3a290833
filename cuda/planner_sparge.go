package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/method/sparge"
)

// newSpargePlanner returns the device planner of p.
func newSpargePlanner(p sparge.Planner) (devicePlanner, error) {
	return nil, fmt.Errorf("%w: the %s planner runs on the CPU only", ErrUnsupported, p.Name())
}
