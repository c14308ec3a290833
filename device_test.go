package sparseattn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sparseattn/sparseattn"
	"github.com/sparseattn/sparseattn/cuda"
	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/metrics"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestDeviceSelection checks each Device against the CPU result, on this
// machine whether or not it has a GPU: cuda either runs or fails with
// ErrUnavailable; auto always runs, logging one line when it falls back.
func TestDeviceSelection(t *testing.T) {
	r := testutil.Rand(t)
	s := tensor.Shape{B: 1, H: 2, N: 200, D: 64}
	q := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, s, 1)
	k := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, s, 1)
	v := testutil.Gaussian(t, r, tensor.BFloat16, tensor.BHND, s, 1)
	ctx := context.Background()
	want, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	_, gpuErr := cuda.Default()
	for _, tc := range []struct {
		device  sparseattn.Device
		blockQ  int // 32 is a block size the GPU kernel does not take
		wantDev sparseattn.Device
		logs    int
	}{
		{sparseattn.DeviceCPU, 0, sparseattn.DeviceCPU, 0},
		{sparseattn.DeviceAuto, 0, map[bool]sparseattn.Device{true: sparseattn.DeviceCUDA, false: sparseattn.DeviceCPU}[gpuErr == nil], map[bool]int{true: 0, false: 1}[gpuErr == nil]},
		{sparseattn.DeviceAuto, 32, sparseattn.DeviceCPU, 1},
		{sparseattn.DeviceCUDA, 0, sparseattn.DeviceCUDA, 0},
	} {
		t.Run(fmt.Sprintf("%s/q%d", tc.device, tc.blockQ), func(t *testing.T) {
			var logs []string
			res, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{Causal: true, Device: tc.device, BlockQ: tc.blockQ,
				Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
			if tc.device == sparseattn.DeviceCUDA && gpuErr != nil {
				if !errors.Is(err, driver.ErrUnavailable) && !errors.Is(err, driver.ErrUnsupportedDevice) {
					t.Fatalf("cuda without a GPU: got %v, want ErrUnavailable", err)
				}
				t.Logf("as expected: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Device != tc.wantDev || len(logs) != tc.logs {
				t.Fatalf("ran on %s with logs %q; want %s with %d lines", res.Device, logs, tc.wantDev, tc.logs)
			}
			e, err := metrics.CompareTensors(want.Out, res.Out)
			if err != nil {
				t.Fatal(err)
			}
			// bf16 P̃ on the GPU: see cuda.TolBF16.
			dense := res.Stats.QKBlocks == res.Stats.DenseBlocks && res.Stats.PVBlocks == res.Stats.DenseBlocks
			if !(e.RelL1 <= cuda.TolBF16) || !dense || (tc.blockQ == 0 && res.Stats != want.Stats) {
				t.Fatalf("rel L1 %.3g, stats %+v; want ≤ %g and %+v", e.RelL1, res.Stats, cuda.TolBF16, want.Stats)
			}
		})
	}
	if _, err := sparseattn.Attention(ctx, q, k, v, sparseattn.Options{Device: "tpu"}); !errors.Is(err, sparseattn.ErrOptions) {
		t.Errorf("device tpu: got %v, want ErrOptions", err)
	}
}
