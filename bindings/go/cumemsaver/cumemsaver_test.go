// SPDX-License-Identifier: MIT

// Tests against the host simulation (libcumemsaver-sim.so). The test command exports
// CMS_DRIVER_LIBRARY (the simulation), LD_LIBRARY_PATH and PKG_CONFIG_PATH; the tests set
// nothing themselves. On the simulation a device pointer is a host address
// (docs/simulation.md), so the tests read and write device memory directly.
package cumemsaver

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

const mib = 1 << 20

func newCtx(t *testing.T) *Context {
	t.Helper()
	if !strings.Contains(os.Getenv("CMS_DRIVER_LIBRARY"), "sim") {
		t.Fatal("run the tests with CMS_DRIVER_LIBRARY=<build>/src/sim/libcumemsaver-sim.so")
	}
	ctx, err := NewContext(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Error(err)
		}
	})
	return ctx
}

// must returns v, or fails the test by panicking on err (f(g()) needs g's results alone).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// hostBytes views simulated device memory (a host address on the simulation).
func hostBytes(ptr, n uint64) []byte {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&ptr)) // the uint64 reinterpreted as an address
	return unsafe.Slice((*byte)(p), int(n))
}

func fill(ptr, n uint64, seed byte) {
	for i, b := 0, hostBytes(ptr, n); i < len(b); i++ {
		b[i] = byte(i)*31 + seed
	}
}

func holds(ptr, n uint64, seed byte) bool {
	for i, b := range hostBytes(ptr, n) {
		if b != byte(i)*31+seed {
			return false
		}
	}
	return true
}

func allBytes(ptr, n uint64, v byte) bool {
	for _, b := range hostBytes(ptr, n) {
		if b != v {
			return false
		}
	}
	return true
}

func wantStatus(t *testing.T, err error, st Status) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want %s, got %v", st.Name(), err)
	}
	if e.Status != st || !errors.Is(err, st) || e.Name != st.Name() {
		t.Fatalf("want %s, got %v", st.Name(), err)
	}
	return e
}

func TestVersionAndStatusNames(t *testing.T) {
	if Version() != uint32(VersionNumber) {
		t.Fatalf("library %#x, header %#x", Version(), VersionNumber)
	}
	v := Version()
	if want := fmt.Sprintf("%d.%d.%d", v>>16, (v>>8)&0xff, v&0xff); VersionString() != want {
		t.Fatalf("version string %q, want %q", VersionString(), want)
	}
	if OK.Name() != "CMS_OK" || ErrNotFound.String() != "CMS_ERR_NOT_FOUND" ||
		Status(-9999).Name() != "CMS_ERR_UNKNOWN_STATUS" || ErrPaused.Description() == "" {
		t.Fatal("status names")
	}
}

func TestHostPolicyKeepsAddressAndContentAndFreesDeviceMemory(t *testing.T) {
	ctx := newCtx(t)
	w := must(ctx.NewRegion("weights", &RegionOptions{Policy: PolicyHost}))
	const size = 3 * mib
	ptr := must(w.Alloc(size))
	fill(ptr, size, 7)
	info := must(w.Info())
	phys := (size + info.Granularity - 1) / info.Granularity * info.Granularity
	if info.Tag != "weights" || info.Policy != PolicyHost || info.State != StateActive ||
		info.Allocations != 1 || info.LogicalBytes != size || info.PhysicalBytes != phys ||
		info.BackedBytes != phys || info.Epoch != 0 || info.HandleTypes != 0 {
		t.Fatalf("info before pause: %+v", info)
	}
	free0, total0, err := ctx.DeviceMemoryInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	p := must(ctx.Pause("weights"))
	if p.Regions != 1 || p.Allocations != 1 || p.BytesReleased != phys || p.BytesBackedUp < size ||
		p.DriverFreeAfter-p.DriverFreeBefore != phys {
		t.Fatalf("pause result: %+v", p)
	}
	free1, total1, _ := ctx.DeviceMemoryInfo(0)
	if free1-free0 != phys || total1 != total0 {
		t.Fatalf("driver free %d -> %d, want +%d", free0, free1, phys)
	}
	info = must(w.Info())
	if info.State != StatePaused || info.BackedBytes != 0 || info.BackupBytes < size ||
		info.HostBytes < size || info.PinnedBytes != info.HostBytes {
		t.Fatalf("info while paused: %+v", info)
	}
	pi := must(ctx.PointerInfo(ptr + 100))
	if pi.Base != ptr || pi.Offset != 100 || pi.Size != size || pi.PhysicalSize != phys ||
		pi.State != StatePaused || !pi.In(w) {
		t.Fatalf("pointer info: %+v", pi)
	}
	r := must(ctx.Resume("weights"))
	if r.Regions != 1 || r.Allocations != 1 || r.BytesBacked != phys || r.BytesRestored < size {
		t.Fatalf("resume result: %+v", r)
	}
	if must(ctx.PointerInfo(ptr)).Base != ptr {
		t.Fatal("address changed")
	}
	if !holds(ptr, size, 7) {
		t.Fatal("HOST content lost")
	}
	info = must(w.Info())
	if info.State != StateActive || info.Epoch != 1 || info.BackedBytes != phys ||
		info.PinnedBytes < size || info.PinnedBytes != info.HostBytes {
		t.Fatalf("info after resume: %+v", info) // the kept buffer stays page-locked
	}
	if free2, _, _ := ctx.DeviceMemoryInfo(0); free2 != free0 {
		t.Fatalf("driver free %d after resume, want %d", free2, free0)
	}
}

func TestZeroAndDiscardPolicies(t *testing.T) {
	ctx := newCtx(t)
	z := must(ctx.NewRegion("zeroed", &RegionOptions{Policy: PolicyZero}))
	d := must(ctx.NewRegion("scratch", nil))
	pz := must(z.Alloc(mib))
	pd := must(d.Alloc(mib))
	fill(pz, mib, 1)
	fill(pd, mib, 2)
	if must(z.Pause()).Regions != 1 {
		t.Fatal("region pause")
	}
	if all := must(ctx.PauseAll()); all.Regions != 1 {
		t.Fatalf("PauseAll paused %d regions, want only the active one", all.Regions)
	}
	if must(ctx.ResumeAll()).Regions != 2 {
		t.Fatal("ResumeAll")
	}
	if !allBytes(pz, mib, 0) {
		t.Fatal("ZERO region does not read zero")
	}
	fill(pd, mib, 3)
	if !holds(pd, mib, 3) || must(d.Info()).Epoch != 1 || must(z.Info()).Epoch != 1 {
		t.Fatal("discard region after resume")
	}
}

func TestErrorsCarryStatusNameAndMessage(t *testing.T) {
	ctx := newCtx(t)
	_, err := ctx.Pause("no-such-tag")
	e := wantStatus(t, err, ErrNotFound)
	if e.Op != "cms_pause" || !strings.Contains(e.Message, "no-such-tag") ||
		!strings.Contains(err.Error(), "CMS_ERR_NOT_FOUND") {
		t.Fatalf("error %#v", e)
	}
	r := must(ctx.NewRegion("kv", nil))
	_, err = ctx.NewRegion("kv", nil)
	wantStatus(t, err, ErrExists)
	_, err = r.Alloc(0)
	wantStatus(t, err, ErrInvalidArgument)
	_, err = ctx.NewRegion(strings.Repeat("t", int(TagMax)+1), nil)
	wantStatus(t, err, ErrInvalidArgument)
	_, err = ctx.NewRegion("a\x00b", nil)
	wantStatus(t, err, ErrInvalidArgument)
	_, err = ctx.NewRegion("p", &RegionOptions{Policy: 77})
	wantStatus(t, err, ErrInvalidArgument)

	p := must(r.Alloc(4 * mib))
	wantStatus(t, ctx.Free(p+4096), ErrNotBase)
	must(r.Pause())
	_, err = r.Pause()
	wantStatus(t, err, ErrAlreadyPaused)
	_, err = ctx.Pause("kv")
	wantStatus(t, err, ErrAlreadyPaused)
	_, err = r.Alloc(mib)
	wantStatus(t, err, ErrPaused)
	must(r.Resume())
	_, err = r.Resume()
	wantStatus(t, err, ErrNotPaused)
	_, err = ctx.PauseWith("kv", &PauseOptions{Flags: 0x8000})
	wantStatus(t, err, ErrInvalidArgument)
	must(r.PauseWith(&PauseOptions{Flags: PauseNoSync}))
	if err := r.Free(p); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, ctx.Free(p), ErrNotFound)
	_, err = ctx.PointerInfo(p)
	wantStatus(t, err, ErrNotFound)
	if must(r.Info()).Allocations != 0 {
		t.Fatal("allocation not freed")
	}
}

// Many goroutines fail at once, each with its own tag: every error carries its own
// call's message (read on the OS thread of the call).
func TestMessagesArePerCall(t *testing.T) {
	ctx := newCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for round := 0; round < 200; round++ {
				tag := fmt.Sprintf("missing-%d-%d", g, round)
				_, err := ctx.Resume(tag)
				var e *Error
				if !errors.As(err, &e) || e.Status != ErrNotFound || !strings.Contains(e.Message, tag) {
					errs <- fmt.Errorf("%s: got %v", tag, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestGoroutinesShareAContext(t *testing.T) {
	ctx := newCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		r := must(ctx.NewRegion(fmt.Sprintf("t%d", g), &RegionOptions{Policy: PolicyHost}))
		wg.Add(1)
		go func(g int, r *Region) {
			defer wg.Done()
			p, err := r.Alloc(2 * mib)
			if err != nil {
				errs <- err
				return
			}
			for cycle := 0; cycle < 5; cycle++ {
				seed := byte(cycle + g)
				fill(p, 2*mib, seed)
				if _, err := ctx.Pause(r.Tag()); err != nil {
					errs <- err
					return
				}
				if _, err := ctx.Resume(r.Tag()); err != nil {
					errs <- err
					return
				}
				if !holds(p, 2*mib, seed) {
					errs <- fmt.Errorf("%s: content lost in cycle %d", r.Tag(), cycle)
					return
				}
			}
			if info, err := r.Info(); err != nil || info.Epoch != 5 {
				errs <- fmt.Errorf("%s: epoch %d, %v", r.Tag(), info.Epoch, err)
			}
		}(g, r)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCloseFreesMemoryAndLaterCallsFail(t *testing.T) {
	observer := newCtx(t)
	base, _, _ := observer.DeviceMemoryInfo(0)
	ctx, err := NewContext(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := must(ctx.NewRegion("drop-me", nil))
	a := must(r.Alloc(4 * mib))
	must(r.Alloc(6 * mib))
	if f, _, _ := observer.DeviceMemoryInfo(0); base-f != 10*mib {
		t.Fatalf("10 MiB allocated, driver free dropped by %d", base-f)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := r.Alloc(mib); err != ErrClosed {
		t.Fatalf("alloc in a closed region: %v", err)
	}
	_, err = ctx.PointerInfo(a)
	wantStatus(t, err, ErrNotFound)
	if f, _, _ := observer.DeviceMemoryInfo(0); f != base {
		t.Fatal("region close did not free the memory")
	}
	// A region left open is freed with its context.
	r2 := must(ctx.NewRegion("kept", nil))
	must(r2.Alloc(2 * mib))
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if f, _, _ := observer.DeviceMemoryInfo(0); f != base {
		t.Fatal("context close did not free the memory")
	}
	if _, err := r2.Info(); err != ErrClosed {
		t.Fatalf("region of a closed context: %v", err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ctx.Pause("kept"); err != ErrClosed {
		t.Fatalf("closed context: %v", err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestLogCallbackReceivesLines(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	var levels []LogLevel
	ctx, err := NewContext(&ContextOptions{LogLevel: LogInfo, Log: func(level LogLevel, msg string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, msg)
		levels = append(levels, level)
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := must(ctx.NewRegion("logged", nil))
	must(r.Alloc(mib))
	must(ctx.Pause("logged"))
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for i, l := range lines {
		if levels[i] > LogInfo {
			t.Errorf("level %s line at LogInfo: %q", levels[i], l)
		}
		found = found || (levels[i] == LogInfo && strings.Contains(l, "paused"))
	}
	if !found {
		t.Fatalf("no INFO line about the pause in %q", lines)
	}
}

func TestMissingDriverIsAnError(t *testing.T) {
	ctx, err := NewContext(&ContextOptions{DriverPath: "/nonexistent/libcuda.so.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	_, err = ctx.NewRegion("x", nil)
	if e := wantStatus(t, err, ErrNoDriver); !strings.Contains(e.Message, "CMS_DRIVER_LIBRARY=sim") {
		t.Fatalf("message %q does not name the switch to the simulation", e.Message)
	}
	_, _, err = ctx.DeviceMemoryInfo(0)
	wantStatus(t, err, ErrNoDriver)
}

func TestShareableRegionReportsHandleTypes(t *testing.T) {
	ctx := newCtx(t)
	r := must(ctx.NewRegion("shared", &RegionOptions{Policy: PolicyHost, Flags: RegionShareable}))
	must(r.Alloc(mib))
	info := must(r.Info())
	if info.Flags != RegionShareable || info.HandleTypes != HandleTypePosixFd {
		t.Fatalf("info: %+v", info)
	}
	_, err := ctx.NewRegion("bad-flags", &RegionOptions{Flags: 1 << 40})
	wantStatus(t, err, ErrInvalidArgument)
}
