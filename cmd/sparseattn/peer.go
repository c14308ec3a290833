package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/sparseattn/sparseattn/tensor"
)

// runPeer runs the --peer command on geometry g and returns the settings
// it reported (everything but its rows) and its median time in ms.
func runPeer(ctx context.Context, cmdline string, g tensor.Geometry, causal bool, f runFlags) (map[string]any, float64, error) {
	args := strings.Fields(cmdline)
	if len(args) == 0 {
		return nil, 0, fmt.Errorf("%w: --peer is empty", errUsage)
	}
	args = append(args, "--n", strconv.Itoa(g.Nk), "--nq", strconv.Itoa(g.Nq),
		"--heads", strconv.Itoa(g.Hq), "--kv-heads", strconv.Itoa(g.Hkv), "--d", strconv.Itoa(g.D),
		"--causal", strconv.FormatBool(causal), "--repeat", strconv.Itoa(f.repeat), "--warmup", strconv.Itoa(f.warmup))
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, 0, fmt.Errorf("peer %q: %w: %s", cmdline, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, 0, fmt.Errorf("peer %q: %w", cmdline, err)
	}
	var rep map[string]any
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, 0, fmt.Errorf("peer %q printed no JSON report: %w", cmdline, err)
	}
	rows, _ := rep["rows"].([]any)
	if len(rows) != 1 {
		return nil, 0, fmt.Errorf("peer %q reported %d rows, want 1", cmdline, len(rows))
	}
	row, _ := rows[0].(map[string]any)
	t, _ := row["ms"].(float64)
	if !(t > 0) {
		return nil, 0, fmt.Errorf("peer %q reported no positive \"ms\"", cmdline)
	}
	delete(rep, "rows")
	return rep, t, nil
}

// peerCols formats a row's peer time and our speedup over it, or dashes.
func peerCols(r benchRow) string {
	if r.PeerMS == 0 {
		return "-\t-"
	}
	return fmt.Sprintf("%.3f\t%.2f×", r.PeerMS, r.PeerRatio)
}
