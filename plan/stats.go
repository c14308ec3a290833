package plan

// Stats counts the work an executor really did. Counts are block products:
// one BlockQ×BlockK tile of QKᵀ, or one tile of P̃V. A pooled level-h block
// counts 1/2^(h-1) of a product, and a λ-filtered row group counts its share
// of the block's rows, so the numbers track arithmetic actually performed.
type Stats struct {
	DenseBlocks float64 // products a dense causal-aware pass needs, for QK (and as many for PV)
	QKBlocks    float64 // QKᵀ products computed
	PVBlocks    float64 // P̃V products computed
	Stopped     int64   // rows ended early by a StopRule
}

// Sparsity is the skipped fraction of the QK plus PV block products that a
// dense causal-aware pass needs: 1 − (QK + PV)/(2·Dense).
func (s Stats) Sparsity() float64 {
	if s.DenseBlocks == 0 {
		return 0
	}
	return 1 - (s.QKBlocks+s.PVBlocks)/(2*s.DenseBlocks)
}

// QKSkipped is the number of QKᵀ block products skipped: Dense − QK.
func (s Stats) QKSkipped() float64 { return s.DenseBlocks - s.QKBlocks }

// PVSkipped is the number of P̃V block products skipped: Dense − PV.
func (s Stats) PVSkipped() float64 { return s.DenseBlocks - s.PVBlocks }

// Add accumulates o into s.
func (s *Stats) Add(o Stats) {
	s.DenseBlocks += o.DenseBlocks
	s.QKBlocks += o.QKBlocks
	s.PVBlocks += o.PVBlocks
	s.Stopped += o.Stopped
}
