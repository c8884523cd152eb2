// SPDX-License-Identifier: MIT

package cumemsaver

// The log callback's Go side. A file with //export may only declare in its preamble; the
// C trampoline that adapts cms_log_fn's const char * is defined in cumemsaver.go.

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export cmsGoLog
func cmsGoLog(user unsafe.Pointer, level C.int32_t, message *C.char) {
	h := cgo.Handle(uintptr(user))
	f, ok := h.Value().(func(LogLevel, string))
	if !ok || f == nil {
		return
	}
	defer func() { _ = recover() }() // never unwind into C
	f(LogLevel(level), C.GoString(message))
}
