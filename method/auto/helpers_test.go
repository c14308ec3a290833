package auto

import "errors"

// isTyped reports whether err wraps one of the package's sentinels.
func isTyped(err error) bool {
	for _, e := range []error{ErrProfile, ErrPlan, ErrBudget, ErrInput} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
