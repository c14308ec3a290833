package tensor

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers can test with errors.Is and still print a message that says what
// to fix.
var (
	// ErrShape reports a shape that is invalid or disagrees with another.
	ErrShape = errors.New("tensor: bad shape")
	// ErrDType reports an unsupported or mismatched element type.
	ErrDType = errors.New("tensor: bad dtype")
	// ErrNonFinite reports a NaN or infinite element.
	ErrNonFinite = errors.New("tensor: non-finite value")
)

// NonFiniteError locates the first NaN or Inf found by CheckFinite.
type NonFiniteError struct {
	Name       string // the tensor's role, e.g. "q"; may be empty
	B, H, N, D int    // logical index of the element
	Value      float32
}

// Error says which element is not finite and what to do about it.
func (e *NonFiniteError) Error() string {
	name := e.Name
	if name == "" {
		name = "tensor"
	}
	return fmt.Sprintf("%s has %v at [b=%d h=%d n=%d d=%d]; clean or clamp the input before attention",
		name, e.Value, e.B, e.H, e.N, e.D)
}

// Unwrap makes errors.Is(err, ErrNonFinite) true.
func (e *NonFiniteError) Unwrap() error { return ErrNonFinite }
