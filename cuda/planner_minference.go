package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/method/minference"
)

// newMinferencePlanner returns the device planner of p.
func newMinferencePlanner(p minference.Planner) (devicePlanner, error) {
	return nil, fmt.Errorf("%w: the %s planner runs on the CPU only", ErrUnsupported, p.Name())
}
