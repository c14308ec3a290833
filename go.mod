module github.com/sparseattn/sparseattn

go 1.26.8

require (
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
