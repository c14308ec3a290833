package cuda

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sparseattn/sparseattn/cuda/driver"
	"github.com/sparseattn/sparseattn/internal/testutil"
	"github.com/sparseattn/sparseattn/method/sparge"
	"github.com/sparseattn/sparseattn/plan"
	"github.com/sparseattn/sparseattn/tensor"
)

// TestAssembleOrder checks the device's CSR assembly on both of its paths
// (csr_rows up to csrRowsMax rows, the three launches above; csr_rows ranks
// from shared memory and, where a block's heads exceed CSR_ROWS_WIN, from
// row_len): the plan the runner downloads
// validates and lists, row by row, what the planner wrote, and where the
// variant reads a launch order, the order on the device is longestFirst's
// over each head's rows. Rows of unequal lengths come from sparge on
// random inputs, causal and not, with ragged N and GQA.
func TestAssembleOrder(t *testing.T) {
	e := openOrSkip(t)
	ctx := context.Background()
	r := testutil.Rand(t)
	for _, tc := range []struct {
		hq, hkv, n, bq int
		causal         bool
	}{
		{4, 2, 1000, 128, true},   // csr_rows: 8 rows a head, four heads in one block of 32 rows
		{32, 8, 8192, 128, true},  // csr_rows: 2048 rows, 64 a head
		{2, 1, 20000, 64, false},  // csr_rows: 313 rows a head, heads straddling blocks, rows past 128 entries
		{40, 8, 12800, 128, true}, // csr_rows: 4000 rows, 100 a head
		{3, 1, 300, 64, true},     // csr_rows: 15 rows, the block part empty (a warp with one live row)
		{32, 8, 32768, 128, true}, // csr_rows: 8192 rows, 256 a head, rows of up to 512 entries (four rounds of loads)
		{2, 1, 100000, 64, true},  // csr_rows: 1563 rows a head; the block across the heads ranks from row_len (3126 > CSR_ROWS_WIN)
		{64, 8, 20000, 64, true},  // three launches: 20032 rows
	} {
		t.Run(fmt.Sprintf("Hq%d_Hkv%d_N%d_bq%d_causal%v", tc.hq, tc.hkv, tc.n, tc.bq, tc.causal), func(t *testing.T) {
			g := tensor.Geometry{B: 1, Hq: tc.hq, Hkv: tc.hkv, Nq: tc.n, Nk: tc.n, D: 64, Dv: 64}
			tl := plan.Tiling{Geometry: g, Causal: tc.causal, BlockQ: tc.bq, BlockK: 64}
			var dev [3]*Tensor
			for i, h := range []int{tc.hq, tc.hkv, tc.hkv} {
				x, err := tensor.New(tensor.BFloat16, tensor.BHND, tensor.Shape{B: 1, H: h, N: tc.n, D: 64})
				if err != nil {
					t.Fatal(err)
				}
				bits := x.Bits16()
				for j := range bits {
					bits[j] = tensor.Float32ToBF16(float32(r.NormFloat64()) + 1.5) // the offset makes blocks self-similar (CosSim about 0.6 > θ), so that rows are predicted
				}
				if dev[i], err = e.Upload(ctx, x); err != nil {
					t.Fatal(err)
				}
				defer dev[i].Free()
			}
			run, err := e.NewRunner(ctx, tl, tensor.BFloat16, sparge.Planner{Params: sparge.Params{CDF: 0.9}})
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			if _, err := run.Plan(ctx, dev[0], dev[1], dev[2]); err != nil {
				t.Fatal(err)
			}
			p, err := run.DownloadPlan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rows, qb := len(p.RowStart)-1, p.QBlocks()
			var lens []int32
			var lists []int32
			var order []int32
			vr, err := run.variant(run.outType())
			if err != nil {
				t.Fatal(err)
			}
			ordered := vr.ws && vr.dynamic && e.order == OrderAuto
			err = e.dev.Do(ctx, func(c *driver.Ctx) error {
				lens, lists = make([]int32, rows), make([]int32, rows*kBlocks(tl))
				if err := driver.CopyOut(c, lens, run.bufs.rowLen.ptr); err != nil {
					return err
				}
				if err := driver.CopyOut(c, lists, run.bufs.lists.ptr); err != nil {
					return err
				}
				if ordered {
					order = make([]int32, rows)
					return driver.CopyOut(c, order, run.bufs.order.ptr)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			distinct := map[int]bool{}
			for i := range rows {
				got := p.KVBlock[p.RowStart[i]:p.RowStart[i+1]]
				want := lists[i*kBlocks(tl) : i*kBlocks(tl)+int(lens[i])]
				if !slices.Equal(got, want) {
					t.Fatalf("row %d: CSR %v, planner's list %v", i, got, want)
				}
				distinct[len(got)] = true
			}
			if len(distinct) < 2 {
				t.Fatalf("every row has the same length: the order test would be vacuous")
			}
			if ordered {
				if want := longestFirst(p.RowStart, qb); !slices.Equal(order, want) {
					t.Errorf("device order differs from longestFirst (first rows %v, want %v)", order[:min(8, rows)], want[:min(8, rows)])
				}
			}
			t.Logf("%d rows, %d entries, %d distinct lengths, ordered %v, csr_rows %v", rows, p.RowStart[rows], len(distinct), ordered, rows <= csrRowsMax)
		})
	}
}

// TestCsrRowsLaunch checks that csrRowsRows and csrRowsThreads, the launch
// of csr_rows, are kernels/runtime.cu's CSR_ROWS_ROWS and
// CSR_ROWS_THREADS (no GPU is needed).
func TestCsrRowsLaunch(t *testing.T) {
	src, err := auxSources.ReadFile("kernels/runtime.cu")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("#define CSR_ROWS_ROWS %d ", csrRowsRows),
		"#define CSR_ROWS_THREADS (CSR_ROWS_ROWS * 16) ",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("runtime.cu has no %q: csr_rows's launch (runner_plan.go) and its defines disagree", want)
		}
	}
	if csrRowsThreads != csrRowsRows*16 {
		t.Errorf("csrRowsThreads %d, want a half warp for each of %d rows", csrRowsThreads, csrRowsRows)
	}
}
