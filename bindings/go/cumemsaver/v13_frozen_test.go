// SPDX-License-Identifier: MIT

// The 1.3 API on the host simulation: frozen regions (Region.Freeze, Region.Thaw,
// RegionInfo.Frozen, RegionStats.BytesUnchanged, ErrFrozen). On the simulation a device
// pointer is a host address (read-only while frozen: only read).
package cumemsaver

import "testing"

func TestFrozenRegionPausesCopyNothingAfterTheFirst(t *testing.T) {
	ctx := newCtx(t)
	r := must(ctx.NewRegion("fr-w", &RegionOptions{Policy: PolicyHost}))
	p := must(r.Alloc(mib))
	fill(p, mib, 5)
	if err := r.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := r.Freeze(); err != nil { // frozen already: nothing
		t.Fatal(err)
	}
	if !must(r.Info()).Frozen {
		t.Fatal("not frozen")
	}
	_, err := r.Alloc(mib)
	wantStatus(t, err, ErrFrozen)
	for i := 0; i < 3; i++ { // the first pause after the freeze copies, the later ones not
		must(r.Pause())
		must(r.Resume())
	}
	if s := must(r.Stats()); s.BytesToStore != mib || s.BytesUnchanged != 2*mib {
		t.Fatalf("to store %d, unchanged %d", s.BytesToStore, s.BytesUnchanged)
	}
	if !holds(p, mib, 5) {
		t.Fatal("content changed")
	}
	if err := r.Thaw(); err != nil {
		t.Fatal(err)
	}
	if must(r.Info()).Frozen {
		t.Fatal("still frozen")
	}
	fill(p, mib, 6) // writable again
	must(r.Pause())
	must(r.Resume())
	if s := must(r.Stats()); s.BytesToStore != 2*mib || !holds(p, mib, 6) {
		t.Fatalf("after the thaw: to store %d", s.BytesToStore)
	}
}
