package progress

import (
	"bytes"
	"strings"
	"testing"
)

func TestSilentWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, 3)
	b.Label("x")
	b.Step("y")
	b.Finish()
	if buf.Len() != 0 {
		t.Fatalf("wrote %q to a non-terminal", buf.String())
	}
}

func TestDrawsOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(nil, 4)
	b.w = &buf // what New does for a terminal
	b.Step("dense")
	b.Step("window")
	if s := buf.String(); !strings.Contains(s, "2/4 window") || !strings.Contains(s, "[############............]") {
		t.Fatalf("bar drew %q", s)
	}
	for range 10 {
		b.Step("over")
	}
	if !strings.Contains(buf.String(), "4/4 over") {
		t.Fatalf("bar overflowed: %q", buf.String())
	}
}
