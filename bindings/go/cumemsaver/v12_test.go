// SPDX-License-Identifier: MIT

// The 1.2 API on the host simulation: a region's cumulative counters after a known
// sequence of pauses, resumes and a swap (Region.Stats), the list of a context's regions
// (Context.Regions) and guarded regions (RegionGuard: a paused range reads zeros).
package cumemsaver

import (
	"reflect"
	"testing"
)

func noFailures(t *testing.T, s RegionStats) {
	t.Helper()
	if s.Failures != 0 || s.FailuresByStatus != [StatsStatusSlots]uint64{} {
		t.Fatalf("failures counted: %+v", s)
	}
}

func TestStatsCountAKnownPauseResumeSequence(t *testing.T) {
	ctx := newCtx(t)
	w := must(ctx.NewRegion("st-w", &RegionOptions{Policy: PolicyHost}))
	const sa, sb = 3*mib + 4096, mib
	a, b := must(w.Alloc(sa)), must(w.Alloc(sb))
	fill(a, sa, 3)
	fill(b, sb, 9)
	phys := must(w.Info()).PhysicalBytes
	if phys < sa+sb {
		t.Fatalf("physical bytes %d", phys)
	}

	s0 := must(w.Stats())
	if s0.Tag != "st-w" || s0.Device != 0 || s0.Policy != PolicyHost || s0.State != StateActive ||
		s0.Pauses != 0 || s0.Resumes != 0 || s0.Swaps != 0 || s0.BytesReleased != 0 ||
		s0.BytesBacked != 0 || s0.BytesToStore != 0 || s0.BytesFromStore != 0 {
		t.Fatalf("fresh region: %+v", s0)
	}
	noFailures(t, s0)

	// Pause by tag: one pause, the region's physical bytes released.
	p1 := must(ctx.Pause("st-w"))
	s1 := must(w.Stats())
	if s1.Pauses != 1 || s1.Resumes != 0 || s1.State != StatePaused || s1.RegionID != s0.RegionID {
		t.Fatalf("after a pause: %+v", s1)
	}
	if s1.BytesReleased != phys || s1.BytesReleased != p1.BytesReleased {
		t.Fatalf("released %d, physical %d, pause result %d", s1.BytesReleased, phys, p1.BytesReleased)
	}
	if p1.BytesBackedUp == 0 || s1.BytesToStore != p1.BytesBackedUp {
		t.Fatalf("to store %d, backed up %d", s1.BytesToStore, p1.BytesBackedUp)
	}

	// A pause of a paused region skips it: it counts nothing, not even a failure.
	_, err := w.Pause()
	wantStatus(t, err, ErrAlreadyPaused)
	if s := must(w.Stats()); !reflect.DeepEqual(s, s1) {
		t.Fatalf("a skipped pause changed the stats:\n%+v\n%+v", s1, s)
	}

	// Resume the region, pause it by handle, resume every tag.
	r1 := must(w.Resume())
	p2 := must(w.Pause())
	r2 := must(ctx.ResumeAll())
	s := must(w.Stats())
	if s.Pauses != 2 || s.Resumes != 2 || s.Swaps != 0 || s.State != StateActive {
		t.Fatalf("after two cycles: %+v", s)
	}
	if s.BytesReleased != 2*phys || s.BytesBacked != 2*phys ||
		s.BytesBacked != r1.BytesBacked+r2.BytesBacked {
		t.Fatalf("released %d, backed %d, physical %d", s.BytesReleased, s.BytesBacked, phys)
	}
	if s.BytesToStore != p1.BytesBackedUp+p2.BytesBackedUp ||
		s.BytesFromStore != r1.BytesRestored+r2.BytesRestored {
		t.Fatalf("store bytes %+v", s)
	}
	noFailures(t, s)
	if s.FailuresOf(ErrAlreadyPaused) != 0 || s.FailuresOf(OK) != 0 {
		t.Fatal("FailuresOf")
	}
	if !holds(a, sa, 3) || !holds(b, sb, 9) {
		t.Fatal("HOST content lost")
	}
}

func TestStatsCountBothSidesOfASwap(t *testing.T) {
	ctx := newCtx(t)
	a := must(ctx.NewRegion("sw-a", &RegionOptions{Policy: PolicyHost}))
	b := must(ctx.NewRegion("sw-b", nil))
	must(a.Alloc(2 * mib))
	must(b.Alloc(mib + 1))
	pa, pb := must(a.Info()).PhysicalBytes, must(b.Info()).PhysicalBytes
	must(b.Pause())
	if _, _, err := ctx.Swap("sw-a", "sw-b"); err != nil {
		t.Fatal(err)
	}
	sa, sb := must(a.Stats()), must(b.Stats())
	if sa.Pauses != 1 || sa.Resumes != 0 || sa.Swaps != 1 || sa.State != StatePaused ||
		sa.BytesReleased != pa || sa.BytesBacked != 0 {
		t.Fatalf("paused side: %+v", sa)
	}
	if sb.Pauses != 1 || sb.Resumes != 1 || sb.Swaps != 1 || sb.State != StateActive ||
		sb.BytesReleased != pb || sb.BytesBacked != pb {
		t.Fatalf("resumed side: %+v", sb)
	}
	noFailures(t, sa)
	noFailures(t, sb)
}

func TestRegionsListsEveryLiveRegionWithItsTag(t *testing.T) {
	ctx := newCtx(t)
	if l := must(ctx.Regions()); len(l) != 0 {
		t.Fatalf("empty context lists %+v", l)
	}
	specs := []struct {
		tag    string
		policy Policy
	}{{"l-kv", PolicyDiscard}, {"l-weights", PolicyHost}, {"l-scratch", PolicyZero}}
	var regions []*Region
	for _, sp := range specs {
		r := must(ctx.NewRegion(sp.tag, &RegionOptions{Policy: sp.policy}))
		must(r.Alloc(mib))
		regions = append(regions, r)
	}
	must(regions[1].Pause())

	list := must(ctx.Regions())
	if len(list) != len(specs) {
		t.Fatalf("%d entries: %+v", len(list), list)
	}
	for i, e := range list {
		if e.Tag != specs[i].tag || e.Policy != specs[i].policy || e.Device != 0 {
			t.Fatalf("entry %d: %+v", i, e)
		}
		// Each entry is the region's own snapshot.
		if s := must(regions[i].Stats()); !reflect.DeepEqual(e, s) {
			t.Fatalf("entry %d:\n%+v\nstats:\n%+v", i, e, s)
		}
		if i > 0 && e.RegionID <= list[i-1].RegionID {
			t.Fatalf("region ids not ascending: %+v", list)
		}
	}
	if list[1].State != StatePaused || list[1].Pauses != 1 || list[0].Pauses != 0 || list[2].Pauses != 0 {
		t.Fatalf("states: %+v", list)
	}

	// A closed region leaves the list; a new one comes last.
	if err := regions[1].Close(); err != nil {
		t.Fatal(err)
	}
	must(ctx.NewRegion("l-new", nil))
	var tags []string
	for _, e := range must(ctx.Regions()) {
		tags = append(tags, e.Tag)
	}
	if want := []string{"l-kv", "l-scratch", "l-new"}; !reflect.DeepEqual(tags, want) {
		t.Fatalf("tags %q, want %q", tags, want)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ctx.Regions(); err != ErrClosed {
		t.Fatalf("Regions after Close: %v", err)
	}
}

func TestAGuardedRegionReadsZerosWhilePaused(t *testing.T) {
	ctx := newCtx(t)
	r := must(ctx.NewRegion("guarded", &RegionOptions{Policy: PolicyHost, Flags: RegionGuard}))
	if must(r.Info()).Flags&RegionGuard == 0 {
		t.Fatal("guard flag not set")
	}
	const size = 3 * mib
	p := must(r.Alloc(size))
	fill(p, size, 5)
	must(r.Pause())
	if must(r.Info()).BackedBytes != 0 {
		t.Fatal("paused region still backed")
	}
	if !allBytes(p, size, 0) {
		t.Fatal("a paused guarded range does not read zeros")
	}
	must(r.Resume())
	if !holds(p, size, 5) {
		t.Fatal("HOST content lost")
	}
	if s := must(r.Stats()); s.Pauses != 1 || s.Resumes != 1 {
		t.Fatalf("stats %+v", s)
	}
	if got := (RegionReleaseHost | RegionGuard).String(); got != "release_host|guard" {
		t.Fatalf("flags print %q", got)
	}
}

func TestFailuresOfReadsTheEntryOfAStatus(t *testing.T) {
	var s RegionStats
	s.FailuresByStatus[0] = 7 // statuses below -(StatsStatusSlots-1)
	s.FailuresByStatus[-ErrOutOfDeviceMemory] = 2
	s.FailuresByStatus[StatsStatusSlots-1] = 5
	for _, c := range []struct {
		st   Status
		want uint64
	}{
		{ErrOutOfDeviceMemory, 2}, {ErrAlreadyPaused, 0}, {-Status(StatsStatusSlots - 1), 5},
		{-Status(StatsStatusSlots), 7}, {-1000, 7}, {OK, 0}, {3, 0},
	} {
		if got := s.FailuresOf(c.st); got != c.want {
			t.Errorf("FailuresOf(%d) = %d, want %d", c.st, got, c.want)
		}
	}
}
