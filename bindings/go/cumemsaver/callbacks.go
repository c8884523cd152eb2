// SPDX-License-Identifier: MIT

package cumemsaver

// The Go side of the progress, import and control callbacks (C trampolines in
// trampolines.go). Each runs on a library thread; a panic is recovered there, never
// unwinding into C.

/*
#include <cumemsaver.h>
#include <stdint.h>
*/
import "C"

import (
	"errors"
	"runtime/cgo"
	"unsafe"
)

//export cmsGoProgress
func cmsGoProgress(user unsafe.Pointer, op *C.char, done, total C.uint64_t) {
	f, ok := cgo.Handle(uintptr(user)).Value().(func(string, uint64, uint64))
	if !ok || f == nil {
		return
	}
	defer func() { _ = recover() }()
	f(C.GoString(op), uint64(done), uint64(total))
}

// importCallbacks is what an import's user pointer refers to.
type importCallbacks struct {
	quiesce func(epoch uint64) bool
	event   func(event ImportEvent, epoch uint64)
}

//export cmsGoQuiesce
func cmsGoQuiesce(user unsafe.Pointer, epoch C.uint64_t) (st C.cms_status) {
	cb, ok := cgo.Handle(uintptr(user)).Value().(*importCallbacks)
	if !ok || cb.quiesce == nil {
		return C.cms_status(OK)
	}
	st = C.cms_status(ErrRefused) // also after a panic
	defer func() { _ = recover() }()
	if cb.quiesce(uint64(epoch)) {
		st = C.cms_status(OK)
	}
	return st
}

//export cmsGoImportEvent
func cmsGoImportEvent(user unsafe.Pointer, event C.uint32_t, epoch C.uint64_t) {
	cb, ok := cgo.Handle(uintptr(user)).Value().(*importCallbacks)
	if !ok || cb.event == nil {
		return
	}
	defer func() { _ = recover() }()
	cb.event(ImportEvent(event), uint64(epoch))
}

//export cmsGoControl
func cmsGoControl(user unsafe.Pointer, req *C.cms_control_request) (st C.cms_status) {
	f, ok := cgo.Handle(uintptr(user)).Value().(func(ControlRequest) error)
	if !ok || f == nil || req == nil {
		return C.cms_status(ErrInvalidArgument)
	}
	r := ControlRequest{
		Op:      ControlOp(req.op),
		Phase:   ControlPhase(req.phase),
		PeerPID: int32(req.peer_pid),
		PeerUID: uint32(req.peer_uid),
		Result:  Status(req.result),
	}
	if req.tag != nil {
		r.Tag = C.GoString(req.tag)
	}
	st = C.cms_status(ErrInternal) // after a panic
	defer func() { _ = recover() }()
	return C.cms_status(statusOf(f(r)))
}

// statusOf is the status an error stands for: OK for nil, the Status of a Status or
// *Error, ErrRefused for any other error.
func statusOf(err error) Status {
	if err == nil {
		return OK
	}
	var st Status
	if errors.As(err, &st) && st < 0 {
		return st
	}
	return ErrRefused
}
