package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/method/unisparse"
)

// newUnisparsePlanner returns the device planner of p.
func newUnisparsePlanner(p unisparse.Planner) (devicePlanner, error) {
	return nil, fmt.Errorf("%w: the %s planner runs on the CPU only", ErrUnsupported, p.Name())
}
