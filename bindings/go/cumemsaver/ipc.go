// SPDX-License-Identifier: MIT

package cumemsaver

// Sharing pausable memory between processes, and the control socket
// (cumemsaver_ipc.h): Exporter, Import, ControlSocket. Each has an idempotent Close and
// is closed by Context.Close if still open.

/*
#include <cumemsaver.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void cms_go_set_import_callbacks(cms_import_options *o, uintptr_t handle, int quiesce, int event);
void cms_go_set_control(cms_control_options *o, uintptr_t handle);

// A uid list in C memory (cgo forbids Go pointers inside the options structs).
static uint32_t *cms_go_uids(const uint32_t *v, size_t n)
{
	uint32_t *p = malloc(n * sizeof(*p));

	if (p)
		memcpy(p, v, n * sizeof(*p));
	return p;
}
*/
import "C"

import (
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

func millis(d time.Duration) C.uint32_t {
	if d <= 0 {
		return 0
	}
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if ms > 1<<32-1 {
		ms = 1<<32 - 1
	}
	return C.uint32_t(ms)
}

// cUIDs copies uids to C memory; free the result with C.free (nil for none).
func cUIDs(uids []uint32) (*C.uint32_t, C.uint32_t) {
	if len(uids) == 0 {
		return nil, 0
	}
	return C.cms_go_uids((*C.uint32_t)(unsafe.Pointer(&uids[0])), C.size_t(len(uids))), C.uint32_t(len(uids))
}

func cPath(op, path string) (*C.char, error) {
	for i := 0; i < len(path); i++ {
		if path[i] == 0 {
			return nil, localError(op, ErrInvalidArgument, "path contains a NUL byte")
		}
	}
	return C.CString(path), nil
}

// ---- Exporter

// ExporterOptions are the options of NewExporter. The zero value is the default.
type ExporterOptions struct {
	AllowedUIDs   []uint32      // uids allowed to import (empty: this process's uid only)
	RevokeTimeout time.Duration // how long a pause waits for importers (0: 10 s)
}

// Exporter publishes shareable regions on a Unix socket and serves importers on its own
// thread (cms_exporter).
type Exporter struct {
	ctx    *Context
	mu     sync.RWMutex
	raw    *C.cms_exporter
	closed bool
}

// NewExporter listens on the Unix socket path (cms_exporter_create). opts may be nil.
func (c *Context) NewExporter(path string, opts *ExporterOptions) (*Exporter, error) {
	var eo ExporterOptions
	if opts != nil {
		eo = *opts
	}
	cp, err := cPath("cms_exporter_create", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cp))
	uids, n := cUIDs(eo.AllowedUIDs)
	defer C.free(unsafe.Pointer(uids))
	var raw *C.cms_exporter
	var e *Exporter
	err = c.with(func(craw *C.cms_context) error {
		err := call("cms_exporter_create", func() C.cms_status {
			var o C.cms_exporter_options
			if st := c_cms_exporter_options_init(&o); st != 0 {
				return st
			}
			o.allowed_uids = uids
			o.nallowed_uids = n
			o.revoke_timeout_ms = millis(eo.RevokeTimeout)
			return c_cms_exporter_create(craw, cp, &o, &raw)
		})
		if err == nil {
			e = &Exporter{ctx: c, raw: raw}
			c.adopt(e)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Exporter) with(f func(raw *C.cms_exporter) error) error {
	return e.ctx.with(func(*C.cms_context) error {
		e.mu.RLock()
		defer e.mu.RUnlock()
		if e.closed {
			return ErrClosed
		}
		return f(e.raw)
	})
}

// Publish offers region r (created with RegionShareable) to importers with at most
// access (cms_exporter_publish).
func (e *Exporter) Publish(r *Region, access Access) error {
	return e.with(func(raw *C.cms_exporter) error {
		r.mu.RLock()
		defer r.mu.RUnlock()
		if r.closed {
			return ErrClosed
		}
		return call("cms_exporter_publish", func() C.cms_status {
			return c_cms_exporter_publish(raw, r.raw, C.uint32_t(access))
		})
	})
}

// Importers is the number of importers connected now (cms_exporter_importers).
func (e *Exporter) Importers() (uint64, error) {
	var n C.uint64_t
	err := e.with(func(raw *C.cms_exporter) error {
		return call("cms_exporter_importers", func() C.cms_status { return c_cms_exporter_importers(raw, &n) })
	})
	return uint64(n), err
}

func (e *Exporter) closeChild() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	err := call("cms_exporter_destroy", func() C.cms_status { return c_cms_exporter_destroy(e.raw) })
	e.closed, e.raw = true, nil
	return err
}

// Close stops publishing (cms_exporter_destroy): importers are disconnected and the
// socket file removed. Closing twice, or after the Context was closed, is a no-op.
func (e *Exporter) Close() error { return e.ctx.closeChild(e) }

// ---- Import

// ImportOptions are the options of Context.Import. The zero value is the default.
type ImportOptions struct {
	Device         int32       // local CUDA device to map on
	ExporterDevice *int32      // the region's device in the exporter (nil: any)
	Flags          ImportFlags // ImportReadOnly
	AllowedUIDs    []uint32    // uids the exporter may run as (empty: this process's uid)
	Timeout        time.Duration
	Name           string // shown in the exporter's messages (<= 63 bytes)
	// Quiesce, if set, is called on the import's thread before the exporter pauses: stop
	// using the memory and return true to consent, false to refuse (the exporter's pause
	// fails with ErrRefused; so does a panic). Without it the library synchronizes the
	// device. It may call Info and Alloc but not Close.
	Quiesce func(epoch uint64) bool
	// OnEvent, if set, is called on the import's thread after its state changed.
	OnEvent func(event ImportEvent, epoch uint64)
}

// ImportInfo is a snapshot of an import (cms_import_info).
type ImportInfo struct {
	Tag            string
	ExporterDevice int32
	Device         int32
	State          ImportState
	Access         Access
	Epoch          uint64 // the exporter's epoch of the memory mapped (or last mapped)
	Allocations    uint64
	Base           uint64 // start of the reserved range (device pointer)
	Bytes          uint64
	ExporterPID    int32
	ExporterUID    uint32
	Error          Status // what led to LayoutChanged, Disconnected or Failed; else OK
}

// Import is a region of another process mapped at addresses of this one (cms_import).
type Import struct {
	ctx    *Context
	mu     sync.RWMutex
	raw    *C.cms_import
	cb     cgo.Handle
	closed bool
}

// Import connects to the exporter at path and maps the region tagged tag
// (cms_import_open). opts may be nil.
func (c *Context) Import(path, tag string, opts *ImportOptions) (*Import, error) {
	var io ImportOptions
	if opts != nil {
		io = *opts
	}
	cp, err := cPath("cms_import_open", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cp))
	ct, err := cTag("cms_import_open", tag, false)
	if err != nil {
		return nil, err
	}
	defer freeTag(ct)
	var name *C.char
	if io.Name != "" {
		name = C.CString(io.Name)
		defer C.free(unsafe.Pointer(name))
	}
	uids, n := cUIDs(io.AllowedUIDs)
	defer C.free(unsafe.Pointer(uids))
	h := cgo.NewHandle(&importCallbacks{quiesce: io.Quiesce, event: io.OnEvent})
	var raw *C.cms_import
	var imp *Import
	err = c.with(func(craw *C.cms_context) error {
		err := call("cms_import_open", func() C.cms_status {
			var o C.cms_import_options
			if st := c_cms_import_options_init(&o); st != 0 {
				return st
			}
			o.device = C.int32_t(io.Device)
			if io.ExporterDevice != nil {
				o.exporter_device = C.int32_t(*io.ExporterDevice)
			}
			o.flags = C.uint64_t(io.Flags)
			o.allowed_uids = uids
			o.nallowed_uids = n
			o.timeout_ms = millis(io.Timeout)
			o.name = name
			q, e := 0, 0
			if io.Quiesce != nil {
				q = 1
			}
			if io.OnEvent != nil {
				e = 1
			}
			C.cms_go_set_import_callbacks(&o, C.uintptr_t(h), C.int(q), C.int(e))
			return c_cms_import_open(craw, cp, ct, &o, &raw)
		})
		if err == nil {
			imp = &Import{ctx: c, raw: raw, cb: h}
			c.adopt(imp)
		}
		return err
	})
	if err != nil {
		h.Delete()
		return nil, err
	}
	return imp, nil
}

func (i *Import) with(f func(raw *C.cms_import) error) error {
	return i.ctx.with(func(*C.cms_context) error {
		i.mu.RLock()
		defer i.mu.RUnlock()
		if i.closed {
			return ErrClosed
		}
		return f(i.raw)
	})
}

// Info is a snapshot of the import's state (cms_import_info_get).
func (i *Import) Info() (ImportInfo, error) {
	var ci C.cms_import_info
	ci.struct_size = C.size_t(unsafe.Sizeof(ci))
	err := i.with(func(raw *C.cms_import) error {
		return call("cms_import_info_get", func() C.cms_status { return c_cms_import_info_get(raw, &ci) })
	})
	if err != nil {
		return ImportInfo{}, err
	}
	return ImportInfo{
		Tag:            C.GoString(&ci.tag[0]),
		ExporterDevice: int32(ci.exporter_device),
		Device:         int32(ci.device),
		State:          ImportState(ci.state),
		Access:         Access(ci.access),
		Epoch:          uint64(ci.epoch),
		Allocations:    uint64(ci.allocations),
		Base:           uint64(ci.base),
		Bytes:          uint64(ci.bytes),
		ExporterPID:    int32(ci.exporter_pid),
		ExporterUID:    uint32(ci.exporter_uid),
		Error:          Status(ci.error),
	}, nil
}

// Alloc is the local device pointer and size of the index-th allocation of the layout
// (cms_import_alloc_get).
func (i *Import) Alloc(index uint64) (ptr, size uint64, err error) {
	var p, s C.uint64_t
	err = i.with(func(raw *C.cms_import) error {
		return call("cms_import_alloc_get", func() C.cms_status {
			return c_cms_import_alloc_get(raw, C.uint64_t(index), &p, &s)
		})
	})
	return uint64(p), uint64(s), err
}

// Translate is the local address of an exporter's address (cms_import_translate).
func (i *Import) Translate(exporterPtr uint64) (uint64, error) {
	var p C.uint64_t
	err := i.with(func(raw *C.cms_import) error {
		return call("cms_import_translate", func() C.cms_status {
			return c_cms_import_translate(raw, C.uint64_t(exporterPtr), &p)
		})
	})
	return uint64(p), err
}

func (i *Import) closeChild() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil
	}
	// The import is freed also on failure; its thread is stopped before the handle goes.
	err := call("cms_import_close", func() C.cms_status { return c_cms_import_close(i.raw) })
	i.closed, i.raw = true, nil
	i.cb.Delete()
	return err
}

// Close unmaps the memory and closes the connection (cms_import_close); finish GPU work
// on it first. Must not be called from the import's callbacks. Closing twice, or after
// the Context was closed, is a no-op.
func (i *Import) Close() error { return i.ctx.closeChild(i) }

// ---- Control socket

// ControlRequest is a pause or resume request from another process (cms_control_request).
type ControlRequest struct {
	Op      ControlOp
	Phase   ControlPhase // ControlBefore: decide; ControlAfter: informed of Result
	Tag     string
	PeerPID int32
	PeerUID uint32
	Result  Status // ControlAfter: what the pause or resume returned
}

// ControlOptions are the options of NewControlSocket. The zero value serves status only.
type ControlOptions struct {
	// Handler decides pause and resume requests on the socket's thread. In the
	// ControlBefore phase return nil to let the library act, or an error to refuse: a
	// Status (ErrRefused, ...) or an *Error is passed on as its status, any other error
	// as ErrRefused; in ControlAfter the return is ignored. It may call the library, but
	// must not close the control socket; if it uses the Context, close the socket before
	// the Context. A panic refuses with ErrInternal.
	Handler     func(req ControlRequest) error
	AllowAll    bool     // without a Handler: act on every pause/resume request
	AllowedUIDs []uint32 // uids allowed to connect (empty: this process's uid only)
}

// ControlSocket serves status, pause and resume requests (cmsctl --socket PATH) on its
// own thread (cms_control).
type ControlSocket struct {
	ctx     *Context
	mu      sync.Mutex
	raw     *C.cms_control
	handler cgo.Handle
	closed  bool
}

// NewControlSocket listens on the Unix socket path (cms_control_create). opts may be nil.
func (c *Context) NewControlSocket(path string, opts *ControlOptions) (*ControlSocket, error) {
	var co ControlOptions
	if opts != nil {
		co = *opts
	}
	cp, err := cPath("cms_control_create", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cp))
	uids, n := cUIDs(co.AllowedUIDs)
	defer C.free(unsafe.Pointer(uids))
	var h cgo.Handle
	if co.Handler != nil {
		h = cgo.NewHandle(co.Handler)
	}
	var raw *C.cms_control
	var s *ControlSocket
	err = c.with(func(craw *C.cms_context) error {
		err := call("cms_control_create", func() C.cms_status {
			var o C.cms_control_options
			if st := c_cms_control_options_init(&o); st != 0 {
				return st
			}
			if co.AllowAll {
				o.flags = C.uint64_t(ControlAllowAll)
			}
			o.allowed_uids = uids
			o.nallowed_uids = n
			if h != 0 {
				C.cms_go_set_control(&o, C.uintptr_t(h))
			}
			return c_cms_control_create(craw, cp, &o, &raw)
		})
		if err == nil {
			s = &ControlSocket{ctx: c, raw: raw, handler: h}
			c.adopt(s)
		}
		return err
	})
	if err != nil {
		if h != 0 {
			h.Delete()
		}
		return nil, err
	}
	return s, nil
}

func (s *ControlSocket) closeChild() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	err := call("cms_control_destroy", func() C.cms_status { return c_cms_control_destroy(s.raw) })
	s.closed, s.raw = true, nil
	if s.handler != 0 {
		s.handler.Delete()
	}
	return err
}

// Close stops the socket's thread (after the request in progress) and removes the
// socket file (cms_control_destroy). Must not be called from the handler. Closing twice,
// or after the Context was closed, is a no-op.
func (s *ControlSocket) Close() error { return s.ctx.closeChild(s) }
