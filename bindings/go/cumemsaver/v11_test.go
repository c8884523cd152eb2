// SPDX-License-Identifier: MIT

// The 1.1 API on the host simulation: typed constants, errors.Is, swap, DISK, progress,
// async resume, IPC export/import, the control socket (driven by the cmsctl binary:
// $CMS_CMSCTL, else cmsctl on PATH, as the test command sets) and the hooks.
package cumemsaver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serial runs tests that compare the simulated device's memory one at a time.
var serialMu sync.Mutex

func sockPath(t *testing.T, name string) string {
	p := filepath.Join(os.TempDir(), fmt.Sprintf("cms-go-%d-%s.sock", os.Getpid(), name))
	_ = os.Remove(p)
	return p
}

func TestTypedConstantsPrintTheirNames(t *testing.T) {
	for _, c := range []struct {
		got  fmt.Stringer
		want string
	}{
		{PolicyHost, "host"},
		{PolicyDisk, "disk"},
		{Policy(9), "Policy(9)"},
		{StatePaused, "paused"},
		{LogWarn, "warn"},
		{RegionShareable | RegionCoalesce, "shareable|coalesce"},
		{RegionFlags(0), "0"},
		{RegionReleaseHost | 1<<40, "release_host|0x10000000000"},
		{AccessReadwrite, "readwrite"},
		{ImportLayoutChanged, "layout_changed"},
		{ImportEventRemapped, "remapped"},
		{ControlPause, "pause"},
		{ControlAfter, "after"},
		{HandleTypePosixFd, "posix_fd"},
		{ErrNotFound, "CMS_ERR_NOT_FOUND"},
	} {
		if s := c.got.String(); s != c.want {
			t.Errorf("%#v prints %q, want %q", c.got, s, c.want)
		}
	}
}

func TestErrorsIsMatchesEveryStatus(t *testing.T) {
	ctx := newCtx(t)
	_, err := ctx.Pause("no-such-tag")
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrPaused) {
		t.Fatalf("errors.Is on %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != "cms_pause" || !strings.Contains(e.Message, "no-such-tag") {
		t.Fatalf("error %#v", err)
	}
	if !strings.Contains(err.Error(), e.Message) {
		t.Fatalf("message missing from %q", err.Error())
	}
	for s := StatusMin; s < 0; s++ {
		w := fmt.Errorf("wrapped: %w", &Error{Op: "x", Status: s, Name: s.Name()})
		if !errors.Is(w, s) || (s+1 < 0 && errors.Is(w, s+1)) {
			t.Fatalf("errors.Is for %s", s)
		}
		if strings.HasPrefix(s.Name(), "CMS_ERR_UNKNOWN") {
			t.Fatalf("status %d has no name", s)
		}
	}
	if _, err := ctx.FindRegion("nope", 0); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	r := must(ctx.NewRegion("found", nil))
	if id := must(ctx.FindRegion("found", 0)); id != r.ID() {
		t.Fatalf("FindRegion %x, region %x", id, r.ID())
	}
}

func TestSwapAndProgress(t *testing.T) {
	serialMu.Lock()
	defer serialMu.Unlock()
	ctx := newCtx(t)
	a := must(ctx.NewRegion("swap-a", &RegionOptions{Policy: PolicyHost}))
	b := must(ctx.NewRegion("swap-b", &RegionOptions{Policy: PolicyHost}))
	pa, pb := must(a.Alloc(4*mib)), must(b.Alloc(2*mib))
	fill(pa, 4*mib, 1)
	fill(pb, 2*mib, 2)
	must(b.Pause())
	type call struct {
		op          string
		done, total uint64
	}
	var mu sync.Mutex
	var calls []call
	if err := ctx.SetProgress(func(op string, done, total uint64) {
		mu.Lock()
		calls = append(calls, call{op, done, total})
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	p, r, err := ctx.Swap("swap-a", "swap-b")
	if err != nil {
		t.Fatal(err)
	}
	if p.Regions != 1 || r.Regions != 1 || p.BytesBackedUp != 4*mib || r.BytesRestored != 2*mib ||
		len(p.Devices) != 1 || p.Devices[0].Status != OK {
		t.Fatalf("swap results %+v %+v", p, r)
	}
	if must(a.Info()).State != StatePaused || !holds(pb, 2*mib, 2) {
		t.Fatal("swap did not exchange the tags")
	}
	mu.Lock()
	if len(calls) == 0 || calls[len(calls)-1] != (call{"swap", 6 * mib, 6 * mib}) {
		t.Fatalf("progress calls %v", calls)
	}
	for i, c := range calls {
		if c.op != "swap" || c.total != 6*mib || (i > 0 && c.done < calls[i-1].done) {
			t.Fatalf("progress calls %v", calls)
		}
	}
	calls = nil
	mu.Unlock()
	if _, _, err := ctx.Swap("swap-b", "swap-a"); err != nil {
		t.Fatal(err)
	}
	if !holds(pa, 4*mib, 1) {
		t.Fatal("content lost in the swap back")
	}
	if _, _, err := ctx.Swap("swap-a", "swap-a"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, _, err := ctx.SwapWith("swap-a", "swap-b", nil, &ResumeOptions{Flags: ResumeAsync}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	// Cleared: not called any more; a panicking callback is recovered.
	if err := ctx.SetProgress(nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	calls = nil
	mu.Unlock()
	must(ctx.Pause("swap-a"))
	mu.Lock()
	if len(calls) != 0 {
		t.Fatalf("cleared callback called: %v", calls)
	}
	mu.Unlock()
	if err := ctx.SetProgress(func(string, uint64, uint64) { panic("progress panics") }); err != nil {
		t.Fatal(err)
	}
	must(ctx.Resume("swap-a"))
	if !holds(pa, 4*mib, 1) {
		t.Fatal("content lost")
	}
}

func TestDiskRegionKeepsContentInADirectory(t *testing.T) {
	serialMu.Lock()
	defer serialMu.Unlock()
	ctx := newCtx(t)
	dir := t.TempDir()
	nodir := must(ctx.NewRegion("disk-nodir", &RegionOptions{Policy: PolicyDisk}))
	must(nodir.Alloc(mib))
	if _, err := nodir.Pause(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a DISK region without a directory paused: %v", err)
	}
	if err := nodir.SetDiskDir(dir); err != nil {
		t.Fatal(err)
	}
	must(nodir.Pause())
	must(nodir.Resume())
	r := must(ctx.NewRegion("disk", &RegionOptions{Policy: PolicyDisk, DiskDir: dir, Flags: RegionCoalesce}))
	p := must(r.Alloc(3 * mib))
	fill(p, 3*mib, 9)
	if res := must(r.Pause()); res.BytesBackedUp != 3*mib {
		t.Fatalf("pause %+v", res)
	}
	info := must(r.Info())
	if info.State != StatePaused || info.Policy != PolicyDisk || info.HostBytes != 0 ||
		info.Flags&RegionCoalesce == 0 {
		t.Fatalf("info %+v", info)
	}
	if err := r.SetDiskDir(dir); !errors.Is(err, ErrPaused) {
		t.Fatal(err)
	}
	must(r.Resume())
	if !holds(p, 3*mib, 9) {
		t.Fatal("DISK content lost")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the file left a name: %v", ents)
	}
	_, err := ctx.NewRegion("disk-bad", &RegionOptions{Policy: PolicyDisk, DiskDir: filepath.Join(dir, "missing")})
	if !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := ctx.FindRegion("disk-bad", 0); !errors.Is(err, ErrNotFound) {
		t.Fatal("a region whose directory failed stays")
	}
	host := must(ctx.NewRegion("not-disk", &RegionOptions{Policy: PolicyHost}))
	if err := host.SetDiskDir(dir); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestAsyncResumeKeepsContent(t *testing.T) {
	serialMu.Lock()
	defer serialMu.Unlock()
	ctx := newCtx(t)
	r := must(ctx.NewRegion("async", &RegionOptions{Policy: PolicyHost}))
	p := must(r.Alloc(2 * mib))
	fill(p, 2*mib, 3)
	must(r.Pause())
	if res := must(r.ResumeWith(&ResumeOptions{Flags: ResumeAsync})); res.BytesBacked != 2*mib {
		t.Fatalf("resume %+v", res)
	}
	must(r.Pause()) // waits for the restore
	must(ctx.ResumeWith("async", nil))
	if !holds(p, 2*mib, 3) {
		t.Fatal("content lost")
	}
}

func TestExportAndImportAcrossPauses(t *testing.T) {
	serialMu.Lock()
	defer serialMu.Unlock()
	ctx := newCtx(t)
	shared := must(ctx.NewRegion("ipc-w", &RegionOptions{Policy: PolicyHost, Flags: RegionShareable}))
	p := must(shared.Alloc(2 * mib))
	fill(p, 2*mib, 7)
	path := sockPath(t, "exp")
	exp := must(ctx.NewExporter(path, nil))
	if _, err := ctx.NewExporter(path, nil); !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}
	if err := exp.Publish(shared, AccessReadwrite); err != nil {
		t.Fatal(err)
	}
	ictx := newCtx(t)
	var quiesced atomic.Int64
	var mu sync.Mutex
	var events []ImportEvent
	imp := must(ictx.Import(path, "ipc-w", &ImportOptions{
		Name:    "go-test",
		Quiesce: func(uint64) bool { quiesced.Add(1); return true },
		OnEvent: func(e ImportEvent, _ uint64) { mu.Lock(); events = append(events, e); mu.Unlock() },
	}))
	if n := must(exp.Importers()); n != 1 {
		t.Fatalf("%d importers", n)
	}
	info := must(imp.Info())
	if info.Tag != "ipc-w" || info.State != ImportMapped || info.Access != AccessReadwrite ||
		info.Allocations != 1 || info.ExporterPID != int32(os.Getpid()) {
		t.Fatalf("import info %+v", info)
	}
	local, size, err := imp.Alloc(0)
	if err != nil || size != 2*mib {
		t.Fatal(size, err)
	}
	if q := must(imp.Translate(p + 100)); q != local+100 {
		t.Fatalf("translate %x, want %x", q, local+100)
	}
	if _, err := imp.Translate(p + 4*mib); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if !holds(local, 2*mib, 7) {
		t.Fatal("imported content differs")
	}
	must(shared.Pause())
	if quiesced.Load() != 1 || must(imp.Info()).State != ImportRevoked {
		t.Fatalf("quiesce %d, state %s", quiesced.Load(), must(imp.Info()).State)
	}
	must(shared.Resume())
	deadline := time.Now().Add(20 * time.Second)
	for must(imp.Info()).State != ImportMapped {
		if time.Now().After(deadline) {
			t.Fatal("not remapped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if l2, _, _ := imp.Alloc(0); l2 != local || !holds(local, 2*mib, 7) {
		t.Fatal("remapped elsewhere or content lost")
	}
	fill(local, mib, 8)
	if !holds(p, mib, 8) {
		t.Fatal("the exporter does not see the importer's write")
	}
	mu.Lock()
	if len(events) == 0 || events[0] != ImportEventRevoked {
		t.Fatalf("events %v", events)
	}
	mu.Unlock()
	if err := imp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := imp.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := imp.Info(); err != ErrClosed {
		t.Fatal(err)
	}
	// A refusing importer (a panic refuses too) makes the exporter's pause fail.
	refusing := must(ictx.Import(path, "ipc-w", &ImportOptions{Quiesce: func(uint64) bool { panic("no") }}))
	if _, err := shared.Pause(); !errors.Is(err, ErrRefused) {
		t.Fatal(err)
	}
	if must(shared.Info()).State != StateActive {
		t.Fatal("refused pause changed the region")
	}
	_ = refusing // closed by ictx.Close (the test cleanup), which closes its children first
	if _, err := ictx.Import(path, "nope", nil); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("socket file left")
	}
}

func TestControlSocketServesCmsctl(t *testing.T) {
	serialMu.Lock()
	defer serialMu.Unlock()
	ctx := newCtx(t)
	r := must(ctx.NewRegion("ctl-w", &RegionOptions{Policy: PolicyHost}))
	p := must(r.Alloc(2 * mib))
	fill(p, 2*mib, 4)
	path := sockPath(t, "ctl")
	var mu sync.Mutex
	var seen []ControlRequest
	var refuse atomic.Bool
	ctl := must(ctx.NewControlSocket(path, &ControlOptions{Handler: func(req ControlRequest) error {
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		if req.Phase == ControlBefore && refuse.Load() {
			return ErrRefused
		}
		return nil
	}}))
	cmsctl := os.Getenv("CMS_CMSCTL")
	if cmsctl == "" {
		cmsctl = "cmsctl"
	}
	run := func(args ...string) (bool, string) {
		out, err := exec.Command(cmsctl, append([]string{"--socket", path}, args...)...).Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("cannot run %s (set CMS_CMSCTL): %v", cmsctl, err)
		}
		return err == nil, string(out)
	}
	if ok, out := run("status"); !ok || !strings.Contains(out, "ctl-w") || !strings.Contains(out, "active") {
		t.Fatal(out)
	}
	if ok, out := run("--json", "pause", "ctl-w"); !ok || !strings.Contains(out, `"status": "CMS_OK"`) {
		t.Fatal(out)
	}
	if must(r.Info()).State != StatePaused {
		t.Fatal("not paused")
	}
	mu.Lock()
	if len(seen) != 2 || seen[0].Op != ControlPause || seen[0].Phase != ControlBefore ||
		seen[0].Tag != "ctl-w" || seen[1].Phase != ControlAfter || seen[1].Result != OK ||
		seen[0].PeerPID <= 0 {
		t.Fatalf("requests %+v", seen)
	}
	mu.Unlock()
	if ok, _ := run("resume", "ctl-w"); !ok || !holds(p, 2*mib, 4) {
		t.Fatal("resume through cmsctl")
	}
	refuse.Store(true)
	if ok, out := run("--json", "pause", "ctl-w"); ok || !strings.Contains(out, "CMS_ERR_REFUSED") {
		t.Fatal(out)
	}
	if must(r.Info()).State != StateActive {
		t.Fatal("refused pause happened")
	}
	if err := ctl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("socket file left")
	}
	// Without a handler: status only, unless AllowAll.
	ctl = must(ctx.NewControlSocket(path, nil))
	if ok, _ := run("pause", "ctl-w"); ok {
		t.Fatal("status-only socket paused")
	}
	must(0, ctl.Close())
	ctl = must(ctx.NewControlSocket(path, &ControlOptions{AllowAll: true}))
	if ok, _ := run("pause", "ctl-w"); !ok || must(r.Info()).State != StatePaused {
		t.Fatal("AllowAll socket did not pause")
	}
	// Left open: the context's Close closes it first (the test cleanup).
}

func TestHooksRouteAllocationsToTheRegion(t *testing.T) {
	serialMu.Lock()
	defer serialMu.Unlock()
	ctx := newCtx(t)
	r := must(ctx.NewRegion("hooked", nil))
	if err := r.WithHook(func() error { return nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal("push without a hook context:", err)
	}
	h := must(ctx.SetHookContext())
	err := r.WithHook(func() error {
		if !r.IsHookRegion() {
			return fmt.Errorf("not the hook region")
		}
		p, err := HookAlloc(mib, -1)
		if err != nil {
			return err
		}
		if pi := must(ctx.PointerInfo(p)); !pi.In(r) {
			return fmt.Errorf("allocated outside the region")
		}
		if err := HookFree(p); err != nil {
			return err
		}
		tp := TorchAlloc(mib, 0)
		if tp == 0 || must(r.Info()).Allocations != 1 {
			return fmt.Errorf("torch alloc: %s", LastErrorMessage())
		}
		TorchFree(tp, mib, 0)
		if must(r.Info()).Allocations != 0 {
			return fmt.Errorf("torch free")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := HookAlloc(mib, -1); !errors.Is(err, ErrNotFound) {
		t.Fatal("hook alloc outside WithHook:", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := HookFree(0x1000); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal("hook free without a hook context:", err)
	}
}
