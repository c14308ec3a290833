//go:build !amd64

package kernel

// archPaths is empty: only the portable implementation exists here.
var archPaths []path
