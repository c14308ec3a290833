package cuda

import (
	"fmt"

	"github.com/sparseattn/sparseattn/method/oracle"
)

// newOraclePlanner returns the device planner of p.
func newOraclePlanner(p oracle.Planner) (devicePlanner, error) {
	return nil, fmt.Errorf("%w: the %s planner runs on the CPU only", ErrUnsupported, p.Name())
}
