// SPDX-License-Identifier: MIT

// Package cumemsaver releases GPU memory and takes it back later at the same virtual
// addresses, over libcumemsaver (include/cumemsaver.h), found with pkg-config.
//
// A Context owns the library state; a Region is a set of allocations sharing a tag, a
// device and a restore Policy (PolicyDiscard, PolicyZero, PolicyHost, PolicyDisk with
// RegionOptions.DiskDir). Region.Alloc
// returns a device pointer (a CUdeviceptr as uint64) that stays the same until it is
// freed, whatever pauses and resumes happen in between:
//
//	ctx, err := cumemsaver.NewContext(nil)
//	if err != nil { ... }
//	defer ctx.Close()
//	weights, err := ctx.NewRegion("weights", &cumemsaver.RegionOptions{Policy: cumemsaver.PolicyHost})
//	ptr, err := weights.Alloc(256 << 20)
//	res, err := ctx.Pause("weights")  // physical memory goes back to the driver
//	_, err = ctx.Resume("weights")    // same ptr, same content
//
// Errors are *Error values carrying the status, its name and the library's message for
// the failed call, read on the same OS thread as the call (runtime.LockOSThread around
// both). errors.Is(err, cumemsaver.ErrNotFound) matches on the status: every Err* is a
// Status, itself an error (a sentinel per cms_status). Policies, states, log levels,
// flags and the IPC enumerations are typed constants whose String method prints their
// name ("host", "paused", "shareable|coalesce").
//
// Beyond pause and resume: Context.Swap, progress callbacks (Context.SetProgress),
// asynchronous resume (ResumeOptions{Flags: ResumeAsync}), sharing regions with other
// processes (Context.NewExporter, Context.Import), the control socket that cmsctl talks
// to (Context.NewControlSocket) and the allocator hooks (Context.SetHookContext,
// Region.WithHook). Every object has an idempotent Close; Context.Close closes the
// exporters, imports, control sockets and hook context still open on it first.
//
// Thread-safety: every method may be called from any goroutine. Close waits for calls in
// progress on the same Context or Region (the C library forbids destroying a handle
// while another thread uses it) and later calls return ErrClosed. Regions are owned by
// their Context, as in C: an unreferenced Region stays allocated until Region.Close or
// Context.Close. A Context that is garbage collected without Close is closed by a
// finalizer (a safety net; call Close). Device pointers are valid only while their
// Context is open: keep it reachable while you use them.
package cumemsaver

/*
#include <cumemsaver.h>
#include <stdint.h>
#include <stdlib.h>

// Defined in trampolines.go.
void cms_go_set_log(cms_context_options *o, uintptr_t handle);
cms_status cms_go_progress_set(cms_context *ctx, uintptr_t handle);

static uintptr_t cms_go_region_id(const cms_region *r)
{
	return (uintptr_t)r;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// Version is the version of the library loaded at run time: (major << 16) | (minor << 8)
// | patch. Compare with VersionNumber, the header's.
func Version() uint32 { return uint32(c_cms_version()) }

// VersionString is the loaded library's version as text ("1.3.0").
func VersionString() string { return C.GoString(c_cms_version_string()) }

// Name is cms_status_name: "CMS_OK", "CMS_ERR_NOT_FOUND", ..., "CMS_ERR_UNKNOWN_STATUS".
func (s Status) Name() string { return C.GoString(c_cms_status_name(C.cms_status(s))) }

// String is the status name.
func (s Status) String() string { return s.Name() }

// Description is cms_status_string: a one-line English description.
func (s Status) Description() string { return C.GoString(c_cms_status_string(C.cms_status(s))) }

// Error makes a Status usable as an error target: errors.Is(err, ErrNotFound).
func (s Status) Error() string { return "cumemsaver: " + s.Name() }

// Error is a failed call: the function, the status, its name and the library's message.
type Error struct {
	Op      string // the C function, e.g. "cms_pause"
	Status  Status
	Name    string // cms_status_name(Status)
	Message string // the library's message for the failed call (may be empty)
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("cumemsaver: %s: %s (%s)", e.Op, e.Name, e.Status.Description())
	}
	return fmt.Sprintf("cumemsaver: %s: %s: %s", e.Op, e.Name, e.Message)
}

// Unwrap returns the Status, so that errors.Is(err, ErrPaused) works.
func (e *Error) Unwrap() error { return e.Status }

// ErrClosed is returned by calls on a closed Context or Region (or on a Region whose
// Context is closed).
var ErrClosed = errors.New("cumemsaver: use of a closed context or region")

// LastErrorMessage is the calling OS thread's last error message (cms_last_error_message).
// Meaningful only with runtime.LockOSThread held since the failing call; this package's
// errors already carry it.
func LastErrorMessage() string {
	n := c_cms_last_error_message(nil, 0)
	buf := make([]byte, int(n)+1)
	m := c_cms_last_error_message((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if m > n {
		m = n
	}
	return string(buf[:m])
}

// call runs one library call and, on failure, reads its message on the same OS thread.
func call(op string, f func() C.cms_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := Status(f())
	if st == OK {
		return nil
	}
	return &Error{Op: op, Status: st, Name: st.Name(), Message: LastErrorMessage()}
}

func localError(op string, st Status, msg string) error {
	return &Error{Op: op, Status: st, Name: st.Name(), Message: msg}
}

// cTag converts a tag; "" means every tag (NULL) where allowed.
func cTag(op, tag string, allowAll bool) (*C.char, error) {
	if tag == "" && allowAll {
		return nil, nil
	}
	for i := 0; i < len(tag); i++ {
		if tag[i] == 0 {
			return nil, localError(op, ErrInvalidArgument, "tag contains a NUL byte")
		}
	}
	return C.CString(tag), nil
}

func freeTag(p *C.char) {
	if p != nil {
		C.free(unsafe.Pointer(p))
	}
}

// Simulation is the DriverPath of the host simulation installed with the library
// (libcumemsaver-sim.so beside libcumemsaver.so.1, in its cumemsaver/ directory, or in its
// build tree): &ContextOptions{DriverPath: cumemsaver.Simulation}, or CMS_DRIVER_LIBRARY=sim
// in the environment. Runs without a GPU (docs/simulation.md).
const Simulation = "sim"

// ContextOptions are the options of NewContext. The zero value is the default.
type ContextOptions struct {
	// DriverPath is the driver library to load ("" : $CMS_DRIVER_LIBRARY, else
	// libcuda.so.1). Simulation (or a path to libcumemsaver-sim.so) runs on the host
	// simulation.
	DriverPath string
	// Log, if set, receives log lines up to LogLevel (LogError..LogDebug). It is called
	// on whichever goroutine is inside the library, with library locks held: it must
	// not call back into cumemsaver. A panic in it is recovered.
	Log      func(level LogLevel, message string)
	LogLevel LogLevel
}

// Context is the library state of one user (cms_context): regions, the pointer index,
// the loaded driver.
type Context struct {
	mu       sync.RWMutex
	raw      *C.cms_context
	logFn    cgo.Handle // 0 if none
	closed   bool
	kidsMu   sync.Mutex         // guards progress and children
	progress []cgo.Handle       // every progress callback set: kept until Close
	children map[child]struct{} // open exporters, imports, control sockets, hook context
}

// child is an object that must be closed before its context: an exporter, an import, a
// control socket, the hook context. closeChild runs with the context's lock held (read or
// write) and is idempotent.
type child interface{ closeChild() error }

func (c *Context) adopt(o child) {
	c.kidsMu.Lock()
	defer c.kidsMu.Unlock()
	if c.children == nil {
		c.children = map[child]struct{}{}
	}
	c.children[o] = struct{}{}
}

// closeChild closes o (a child of c) unless c is closed already (which closed o).
func (c *Context) closeChild(o child) error {
	err := c.with(func(*C.cms_context) error {
		if err := o.closeChild(); err != nil {
			return err
		}
		c.kidsMu.Lock()
		delete(c.children, o)
		c.kidsMu.Unlock()
		return nil
	})
	if err == ErrClosed {
		return nil
	}
	return err
}

// NewContext creates a context (cms_context_create). opts may be nil. The driver is
// loaded by the first call that needs it.
func NewContext(opts *ContextOptions) (*Context, error) {
	var o C.cms_context_options
	if err := call("cms_context_options_init", func() C.cms_status {
		return c_cms_context_options_init(&o)
	}); err != nil {
		return nil, err
	}
	c := &Context{}
	if opts != nil {
		if opts.DriverPath != "" {
			p := C.CString(opts.DriverPath)
			defer C.free(unsafe.Pointer(p))
			o.driver_path = p
		}
		if opts.Log != nil {
			c.logFn = cgo.NewHandle(opts.Log)
			C.cms_go_set_log(&o, C.uintptr_t(c.logFn))
			o.log_level = C.int32_t(opts.LogLevel)
		}
	}
	var raw *C.cms_context
	err := call("cms_context_create", func() C.cms_status {
		return c_cms_context_create(&o, &raw)
	})
	if err != nil {
		if c.logFn != 0 {
			c.logFn.Delete()
		}
		return nil, err
	}
	c.raw = raw
	runtime.SetFinalizer(c, func(c *Context) { _ = c.Close() })
	return c, nil
}

// Close destroys the context: every region and allocation (cms_context_destroy). It
// waits for calls in progress on this context. On a driver error the context stays
// open (holding what could not be freed) and Close may be retried. Closing twice is a
// no-op.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.kidsMu.Lock()
	defer c.kidsMu.Unlock()
	for o := range c.children {
		if err := o.closeChild(); err != nil {
			return err
		}
		delete(c.children, o)
	}
	if err := call("cms_context_destroy", func() C.cms_status {
		return c_cms_context_destroy(c.raw)
	}); err != nil {
		return err
	}
	c.closed = true
	c.raw = nil
	if c.logFn != 0 {
		c.logFn.Delete()
		c.logFn = 0
	}
	for _, h := range c.progress {
		h.Delete()
	}
	c.progress = nil
	runtime.SetFinalizer(c, nil)
	return nil
}

// with runs f with the context open (read lock held), or returns ErrClosed.
func (c *Context) with(f func(raw *C.cms_context) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return f(c.raw)
}

// RegionOptions are the options of NewRegion. The zero value is device 0, PolicyDiscard.
type RegionOptions struct {
	Device int32       // CUDA device ordinal
	Policy Policy      // PolicyDiscard, PolicyZero, PolicyHost or PolicyDisk
	Flags  RegionFlags // RegionReleaseHost, RegionShareable, RegionCoalesce, ...
	// DiskDir is the directory of a PolicyDisk region's file, set right after the region
	// is created (cms_region_disk_dir_set); "": none yet (Region.SetDiskDir).
	DiskDir string
}

// NewRegion creates an empty region named tag (1..TagMax bytes) (cms_region_create).
// opts may be nil. The region belongs to the context: it lives until Region.Close or
// Context.Close.
func (c *Context) NewRegion(tag string, opts *RegionOptions) (*Region, error) {
	var ro RegionOptions
	if opts != nil {
		ro = *opts
	}
	ct, err := cTag("cms_region_create", tag, false)
	if err != nil {
		return nil, err
	}
	defer freeTag(ct)
	// Out parameters are locals: cgo rejects a pointer into a struct holding Go pointers.
	var region *C.cms_region
	err = c.with(func(raw *C.cms_context) error {
		var o C.cms_region_options
		return call("cms_region_create", func() C.cms_status {
			if st := c_cms_region_options_init(&o); st != 0 {
				return st
			}
			o.device = C.int32_t(ro.Device)
			o.policy = C.uint32_t(ro.Policy)
			o.flags = C.uint64_t(ro.Flags)
			return c_cms_region_create(raw, ct, &o, &region)
		})
	})
	if err != nil {
		return nil, err
	}
	r := &Region{ctx: c, raw: region, tag: tag, device: ro.Device, policy: ro.Policy,
		id: RegionID(C.cms_go_region_id(region))}
	if ro.DiskDir != "" {
		if err := r.SetDiskDir(ro.DiskDir); err != nil {
			_ = r.Close()
			return nil, err
		}
	}
	return r, nil
}

// PauseOptions are the options of a pause: what it waits for before unmapping.
type PauseOptions struct {
	Stream uint64     // a CUstream to wait for instead of synchronizing the device (0: none)
	Event  uint64     // a CUevent to wait for instead (0: none)
	Flags  PauseFlags // PauseNoSync
}

// PauseResult says what a pause did (cms_pause_result).
type PauseResult struct {
	Regions          uint64
	Allocations      uint64
	BytesReleased    uint64 // physical bytes released to the driver
	BytesBackedUp    uint64 // bytes copied to host backups
	DriverFreeBefore uint64 // the driver's free memory before, summed over devices touched
	DriverFreeAfter  uint64 // ... and after
	Elapsed          time.Duration
	Devices          []DeviceResult // one per device the call worked on (since 1.1)
}

// DeviceResult is one device's part of a pause, resume or swap (cms_device_result).
type DeviceResult struct {
	Device      int32
	Status      Status // OK or what this device's step returned
	Regions     uint64
	Allocations uint64
	Bytes       uint64 // pause: physical bytes released; resume: created and mapped
	BytesCopied uint64 // pause: bytes copied to backups; resume: restored
	Elapsed     time.Duration
}

func deviceResults(n C.uint32_t, r []C.cms_device_result) []DeviceResult {
	var out []DeviceResult
	for i := 0; i < int(n) && i < len(r); i++ {
		d := &r[i]
		out = append(out, DeviceResult{
			Device:      int32(d.device),
			Status:      Status(d.status),
			Regions:     uint64(d.regions),
			Allocations: uint64(d.allocations),
			Bytes:       uint64(d.bytes),
			BytesCopied: uint64(d.bytes_copied),
			Elapsed:     time.Duration(d.elapsed_ns),
		})
	}
	return out
}

// ResumeOptions are the options of a resume.
type ResumeOptions struct {
	Flags  ResumeFlags // ResumeAsync
	Stream uint64      // with ResumeAsync: the CUstream ordered after the restore
}

// ResumeResult says what a resume did (cms_resume_result).
type ResumeResult struct {
	Regions       uint64
	Allocations   uint64
	BytesBacked   uint64 // physical bytes created and mapped
	BytesRestored uint64 // bytes copied back from host backups
	Elapsed       time.Duration
	Devices       []DeviceResult // one per device the call worked on (since 1.1)
}

func pauseOpts(p *PauseOptions) C.cms_pause_options {
	var o C.cms_pause_options
	c_cms_pause_options_init(&o)
	if p != nil {
		o.stream = C.uint64_t(p.Stream)
		o.event = C.uint64_t(p.Event)
		o.flags = C.uint64_t(p.Flags)
	}
	return o
}

func resumeOpts(p *ResumeOptions) C.cms_resume_options {
	var o C.cms_resume_options
	c_cms_resume_options_init(&o)
	if p != nil {
		o.flags = C.uint64_t(p.Flags)
		o.stream = C.uint64_t(p.Stream)
	}
	return o
}

func pauseResult(r *C.cms_pause_result) PauseResult {
	return PauseResult{
		Regions:          uint64(r.regions),
		Allocations:      uint64(r.allocations),
		BytesReleased:    uint64(r.bytes_released),
		BytesBackedUp:    uint64(r.bytes_backed_up),
		DriverFreeBefore: uint64(r.driver_free_before),
		DriverFreeAfter:  uint64(r.driver_free_after),
		Elapsed:          time.Duration(r.elapsed_ns),
		Devices:          deviceResults(r.devices, r.device_results[:]),
	}
}

func resumeResult(r *C.cms_resume_result) ResumeResult {
	return ResumeResult{
		Regions:       uint64(r.regions),
		Allocations:   uint64(r.allocations),
		BytesBacked:   uint64(r.bytes_backed),
		BytesRestored: uint64(r.bytes_restored),
		Elapsed:       time.Duration(r.elapsed_ns),
		Devices:       deviceResults(r.devices, r.device_results[:]),
	}
}

// Pause pauses every active region tagged tag, on every device (cms_pause): waits for
// GPU work, saves HOST content, releases the physical memory. All or nothing.
func (c *Context) Pause(tag string) (PauseResult, error) {
	if tag == "" {
		return PauseResult{}, localError("cms_pause", ErrInvalidArgument, "empty tag (use PauseAll)")
	}
	return c.PauseWith(tag, nil)
}

// PauseAll pauses every active region of every tag.
func (c *Context) PauseAll() (PauseResult, error) { return c.PauseWith("", nil) }

// PauseWith pauses tag ("" : every tag) with options (nil: defaults).
func (c *Context) PauseWith(tag string, opts *PauseOptions) (PauseResult, error) {
	ct, err := cTag("cms_pause", tag, true)
	if err != nil {
		return PauseResult{}, err
	}
	defer freeTag(ct)
	o := pauseOpts(opts)
	var r C.cms_pause_result
	r.struct_size = C.size_t(unsafe.Sizeof(r))
	err = c.with(func(raw *C.cms_context) error {
		return call("cms_pause", func() C.cms_status { return c_cms_pause(raw, ct, &o, &r) })
	})
	if err != nil {
		return PauseResult{}, err
	}
	return pauseResult(&r), nil
}

// Resume resumes every paused region tagged tag at the same addresses (cms_resume).
func (c *Context) Resume(tag string) (ResumeResult, error) {
	if tag == "" {
		return ResumeResult{}, localError("cms_resume", ErrInvalidArgument, "empty tag (use ResumeAll)")
	}
	return c.ResumeWith(tag, nil)
}

// ResumeAll resumes every paused region of every tag.
func (c *Context) ResumeAll() (ResumeResult, error) { return c.ResumeWith("", nil) }

// ResumeWith resumes tag ("" : every tag) with options (nil: defaults).
func (c *Context) ResumeWith(tag string, opts *ResumeOptions) (ResumeResult, error) {
	ct, err := cTag("cms_resume", tag, true)
	if err != nil {
		return ResumeResult{}, err
	}
	defer freeTag(ct)
	o := resumeOpts(opts)
	var r C.cms_resume_result
	r.struct_size = C.size_t(unsafe.Sizeof(r))
	err = c.with(func(raw *C.cms_context) error {
		return call("cms_resume", func() C.cms_status { return c_cms_resume(raw, ct, &o, &r) })
	})
	if err != nil {
		return ResumeResult{}, err
	}
	return resumeResult(&r), nil
}

// Free frees the allocation whose base is ptr, in any state (cms_free). GPU work using
// it must be finished.
func (c *Context) Free(ptr uint64) error {
	return c.with(func(raw *C.cms_context) error {
		return call("cms_free", func() C.cms_status { return c_cms_free(raw, C.uint64_t(ptr)) })
	})
}

// PointerInfo describes the allocation containing a pointer (cms_pointer_info).
type PointerInfo struct {
	Base         uint64 // the allocation's device pointer
	Size         uint64 // size asked for
	Offset       uint64 // ptr - Base
	PhysicalSize uint64 // size rounded to the granularity
	Device       int32
	State        State    // StateActive or StatePaused (of the region)
	Region       RegionID // the owning region (compare with Region.ID)
}

// RegionID identifies a region within its context (Region.ID, Context.FindRegion,
// PointerInfo.Region) without touching it.
type RegionID uintptr

// In reports whether the allocation belongs to region r.
func (p PointerInfo) In(r *Region) bool {
	return r != nil && p.Region != 0 && p.Region == r.ID()
}

// PointerInfo answers "is this pointer ours?" (cms_pointer_info_get).
func (c *Context) PointerInfo(ptr uint64) (PointerInfo, error) {
	var i C.cms_pointer_info
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	err := c.with(func(raw *C.cms_context) error {
		return call("cms_pointer_info_get", func() C.cms_status {
			return c_cms_pointer_info_get(raw, C.uint64_t(ptr), &i)
		})
	})
	if err != nil {
		return PointerInfo{}, err
	}
	return PointerInfo{
		Base:         uint64(i.base),
		Size:         uint64(i.size),
		Offset:       uint64(i.offset),
		PhysicalSize: uint64(i.physical_size),
		Device:       int32(i.device),
		State:        State(i.state),
		Region:       RegionID(C.cms_go_region_id(i.region)),
	}, nil
}

// DeviceMemoryInfo is the driver's free and total memory of a device (cuMemGetInfo).
func (c *Context) DeviceMemoryInfo(device int32) (free, total uint64, err error) {
	var f, t C.uint64_t
	err = c.with(func(raw *C.cms_context) error {
		return call("cms_device_memory_info", func() C.cms_status {
			return c_cms_device_memory_info(raw, C.int32_t(device), &f, &t)
		})
	})
	return uint64(f), uint64(t), err
}

// Region is a set of allocations sharing a tag, a device and a restore policy
// (cms_region), owned by its Context.
type Region struct {
	mu     sync.RWMutex
	ctx    *Context
	raw    *C.cms_region
	tag    string
	device int32
	policy Policy
	id     RegionID
	closed bool
}

// Tag, Device, Policy and Context are what the region was created with.
func (r *Region) Tag() string       { return r.tag }
func (r *Region) Device() int32     { return r.device }
func (r *Region) Policy() Policy    { return r.policy }
func (r *Region) Context() *Context { return r.ctx }

// ID identifies the region (also after Close).
func (r *Region) ID() RegionID { return r.id }

// with runs f with the context and the region open, or returns ErrClosed.
func (r *Region) with(f func(raw *C.cms_region) error) error {
	return r.ctx.with(func(*C.cms_context) error {
		r.mu.RLock()
		defer r.mu.RUnlock()
		if r.closed {
			return ErrClosed
		}
		return f(r.raw)
	})
}

// Close destroys the region and frees every allocation in it (cms_region_destroy). It
// waits for calls in progress on this region. On a driver error the region stays open
// and Close may be retried. Closing twice, or after the Context was closed, is a no-op.
func (r *Region) Close() error {
	err := r.ctx.with(func(*C.cms_context) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return nil
		}
		if err := call("cms_region_destroy", func() C.cms_status {
			return c_cms_region_destroy(r.raw)
		}); err != nil {
			return err
		}
		r.closed = true
		r.raw = nil
		return nil
	})
	if err == ErrClosed { // the context destroyed it
		return nil
	}
	return err
}

// Alloc allocates size bytes (rounded up to the granularity) in this active region and
// returns the device pointer (cms_alloc), valid until freed, across pauses and resumes.
func (r *Region) Alloc(size uint64) (uint64, error) {
	var p C.uint64_t
	err := r.with(func(raw *C.cms_region) error {
		return call("cms_alloc", func() C.cms_status { return c_cms_alloc(raw, C.uint64_t(size), &p) })
	})
	return uint64(p), err
}

// Free frees an allocation (as Context.Free).
func (r *Region) Free(ptr uint64) error { return r.ctx.Free(ptr) }

// RegionInfo is a snapshot of a region (cms_region_info).
type RegionInfo struct {
	Tag            string
	Device         int32
	Policy         Policy
	State          State
	Flags          RegionFlags
	Allocations    uint64 // live allocations
	LogicalBytes   uint64 // sum of the sizes asked for
	PhysicalBytes  uint64 // sum of the sizes rounded to the granularity
	BackedBytes    uint64 // physical bytes currently backed by device memory
	BackupBytes    uint64 // bytes of content saved in host backups (while paused)
	Epoch          uint64 // bumped by every successful resume
	Granularity    uint64
	HostBytes      uint64      // host memory held by backup buffers
	RestorePending bool        // an async resume's restore copies may still run
	HandleTypes    HandleTypes // HandleTypePosixFd | HandleTypeFabric (since 1.1; 0: not shareable)
	PeerDeviceMask uint64      // bit d: device d has access (since 1.1)
	PinnedBytes    uint64      // of HostBytes, page-locked with cuMemHostRegister (since 1.1)
	RetainedBytes  uint64      // freed allocations' bytes kept in shared handles (since 1.1)
	Frozen         bool        // read-only (Region.Freeze; since 1.3)
}

// Info is a consistent snapshot of the region (cms_region_info_get).
func (r *Region) Info() (RegionInfo, error) {
	var i C.cms_region_info
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	err := r.with(func(raw *C.cms_region) error {
		return call("cms_region_info_get", func() C.cms_status { return c_cms_region_info_get(raw, &i) })
	})
	if err != nil {
		return RegionInfo{}, err
	}
	return RegionInfo{
		Tag:            C.GoString(&i.tag[0]),
		Device:         int32(i.device),
		Policy:         Policy(i.policy),
		State:          State(i.state),
		Flags:          RegionFlags(i.flags),
		Allocations:    uint64(i.allocations),
		LogicalBytes:   uint64(i.logical_bytes),
		PhysicalBytes:  uint64(i.physical_bytes),
		BackedBytes:    uint64(i.backed_bytes),
		BackupBytes:    uint64(i.backup_bytes),
		Epoch:          uint64(i.epoch),
		Granularity:    uint64(i.granularity),
		HostBytes:      uint64(i.host_bytes),
		RestorePending: i.restore_pending != 0,
		HandleTypes:    HandleTypes(i.handle_types),
		PeerDeviceMask: uint64(i.peer_device_mask),
		PinnedBytes:    uint64(i.pinned_bytes),
		RetainedBytes:  uint64(i.retained_bytes),
		Frozen:         i.frozen != 0,
	}, nil
}

// Pause pauses this region (cms_region_pause).
func (r *Region) Pause() (PauseResult, error) { return r.PauseWith(nil) }

// PauseWith pauses this region with options.
func (r *Region) PauseWith(opts *PauseOptions) (PauseResult, error) {
	o := pauseOpts(opts)
	var res C.cms_pause_result
	res.struct_size = C.size_t(unsafe.Sizeof(res))
	err := r.with(func(raw *C.cms_region) error {
		return call("cms_region_pause", func() C.cms_status { return c_cms_region_pause(raw, &o, &res) })
	})
	if err != nil {
		return PauseResult{}, err
	}
	return pauseResult(&res), nil
}

// Resume resumes this region (cms_region_resume).
func (r *Region) Resume() (ResumeResult, error) { return r.ResumeWith(nil) }

// ResumeWith resumes this region with options.
func (r *Region) ResumeWith(opts *ResumeOptions) (ResumeResult, error) {
	o := resumeOpts(opts)
	var res C.cms_resume_result
	res.struct_size = C.size_t(unsafe.Sizeof(res))
	err := r.with(func(raw *C.cms_region) error {
		return call("cms_region_resume", func() C.cms_status { return c_cms_region_resume(raw, &o, &res) })
	})
	if err != nil {
		return ResumeResult{}, err
	}
	return resumeResult(&res), nil
}
