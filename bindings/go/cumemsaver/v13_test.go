// SPDX-License-Identifier: MIT

package cumemsaver

// ABI 1.3 on the host simulation: verified backups (RegionVerify, ErrVerifyFailed).

import (
	"errors"
	"testing"
)

func TestVerifiedBackupCatchesAChangedBackup(t *testing.T) {
	ctx := newCtx(t)
	r := must(ctx.NewRegion("vf", &RegionOptions{Policy: PolicyHost, Flags: RegionVerify}))
	a := must(r.Alloc(mib))
	fill(a, mib, 7)
	must(r.Pause())
	must(r.Resume())
	if s := must(r.Stats()); s.BytesVerified != mib || s.VerifyNs == 0 {
		t.Fatalf("stats %+v", s)
	}
	must(r.Pause())
	b := must(ctx.Backup(a))
	hostBytes(uint64(b.Host), mib)[100] ^= 0xff // "writing changes what a resume restores"
	if _, err := r.Resume(); !errors.Is(err, ErrVerifyFailed) {
		t.Fatalf("changed backup: %v", err)
	}
	if i := must(r.Info()); i.State != StatePaused {
		t.Fatalf("after the failed resume: %+v", i)
	}
	if err := r.SetFlags(RegionVerify, 0); err != nil {
		t.Fatal(err)
	}
	must(r.Resume())
	i := byte(100)
	if got := hostBytes(a, mib)[100]; got != (i*31+7)^0xff {
		t.Fatalf("byte 100: %d", got)
	}
	if got := (RegionReleaseHost | RegionVerify).String(); got != "release_host|verify" {
		t.Fatalf("flags print %q", got)
	}
	if _, err := ctx.NewRegion("vz", &RegionOptions{Policy: PolicyZero, Flags: RegionVerify}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ZERO with RegionVerify: %v", err)
	}
}
