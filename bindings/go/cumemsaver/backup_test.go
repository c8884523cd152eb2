// SPDX-License-Identifier: MIT

package cumemsaver

// ABI 1.2 on the host simulation: Context.Backup / BackupRead, Region.SetFlags and the
// default hook region.

import (
	"errors"
	"testing"
)

func TestBackupFlagsAndHookDefault(t *testing.T) {
	ctx := newCtx(t)
	w := must(ctx.NewRegion("bk-w", &RegionOptions{Policy: PolicyHost}))
	a := must(w.Alloc(mib))
	fill(a, mib, 5)
	if _, err := ctx.Backup(a); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("never paused: %v", err)
	}
	must(w.Pause())
	b := must(ctx.Backup(a + 10))
	if b.Base != a || b.Size != mib || b.Policy != PolicyHost || b.State != BackupCurrent || b.Host == 0 {
		t.Fatalf("paused: %+v", b)
	}
	buf := make([]byte, 64)
	if err := ctx.BackupRead(a, buf); err != nil {
		t.Fatal(err)
	}
	for i, c := range buf {
		if c != byte(i)*31+5 {
			t.Fatalf("byte %d: %d", i, c)
		}
	}
	must(w.Resume())
	if b = must(ctx.Backup(a)); b.State != BackupRetained {
		t.Fatalf("resumed: %+v", b)
	}
	if err := w.SetFlags(RegionReleaseHost, RegionReleaseHost); err != nil {
		t.Fatal(err)
	}
	if i := must(w.Info()); i.HostBytes != 0 {
		t.Fatalf("host bytes kept: %+v", i)
	}
	if err := w.SetFlags(RegionGuard, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("guard: %v", err)
	}

	h := must(ctx.SetHookContext())
	defer h.Close()
	if err := w.SetHookDefault(0); err != nil {
		t.Fatal(err)
	}
	if !w.IsHookDefault(0) {
		t.Fatal("not the default")
	}
	p := must(HookAlloc(mib, 0))
	if err := HookFree(p); err != nil {
		t.Fatal(err)
	}
	if err := ClearHookDefault(0); err != nil {
		t.Fatal(err)
	}
	if _, err := HookAlloc(mib, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no default: %v", err)
	}
}

func TestRangesTemplateAndMargin(t *testing.T) {
	ctx := newCtx(t)
	w := must(ctx.NewRegion("rg-w", &RegionOptions{Policy: PolicyHost}))
	a := must(w.Alloc(4 * mib))
	if err := ctx.RangeDiscard(a+mib, mib); err != nil {
		t.Fatal(err)
	}
	if err := ctx.RangeKeep(a+mib, mib/2); err != nil {
		t.Fatal(err)
	}
	if err := ctx.RangeDiscard(a, 8*mib); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("past the end: %v", err)
	}
	r := must(w.Pause())
	if r.BytesBackedUp != 4*mib-mib/2 {
		t.Fatalf("backed up %d", r.BytesBackedUp)
	}
	must(w.Resume())

	h := must(ctx.SetHookContext())
	defer h.Close()
	if err := SetHookDefaultTemplate("rg-auto", &RegionOptions{Policy: PolicyDiscard}); err != nil {
		t.Fatal(err)
	}
	p := must(HookAlloc(mib, 0))
	if err := HookFree(p); err != nil {
		t.Fatal(err)
	}
	if err := SetHookMemoryMargin(^uint64(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := HookAlloc(mib, 0); !errors.Is(err, ErrOutOfDeviceMemory) {
		t.Fatalf("margin: %v", err)
	}
	if err := SetHookMemoryMargin(0); err != nil {
		t.Fatal(err)
	}
	if err := SetHookDefaultTemplate("", nil); err != nil {
		t.Fatal(err)
	}
	if err := ClearHookDefault(0); err != nil {
		t.Fatal(err)
	}

	// a PolicyDisk template with a directory: its region pauses from its first allocation on
	disk := &RegionOptions{Policy: PolicyDisk, DiskDir: t.TempDir()}
	if err := SetHookDefaultTemplate("rg-disk", disk); err != nil {
		t.Fatal(err)
	}
	p = must(HookAlloc(mib, 0))
	if r := must(ctx.Pause("rg-disk")); r.BytesBackedUp != mib {
		t.Fatalf("disk template: backed up %d", r.BytesBackedUp)
	}
	must(ctx.Resume("rg-disk"))
	if err := HookFree(p); err != nil {
		t.Fatal(err)
	}
	disk.Policy = PolicyHost // a directory needs PolicyDisk
	if err := SetHookDefaultTemplate("rg-disk", disk); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("directory without PolicyDisk: %v", err)
	}
	if err := SetHookDefaultTemplate("", nil); err != nil {
		t.Fatal(err)
	}
	if err := ClearHookDefault(0); err != nil {
		t.Fatal(err)
	}
}
