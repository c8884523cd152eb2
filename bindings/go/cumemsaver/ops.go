// SPDX-License-Identifier: MIT

package cumemsaver

// Swap, progress, region lookup, DISK directories and peer devices (1.1).

/*
#include <cumemsaver.h>
#include <stdint.h>
#include <stdlib.h>

cms_status cms_go_progress_set(cms_context *ctx, uintptr_t handle);

static uintptr_t cms_go_region_id2(const cms_region *r)
{
	return (uintptr_t)r;
}
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// Swap pauses every active region tagged pauseTag and resumes every paused region tagged
// resumeTag in one transactional call, the two directions' copies overlapping (cms_swap).
func (c *Context) Swap(pauseTag, resumeTag string) (PauseResult, ResumeResult, error) {
	return c.SwapWith(pauseTag, resumeTag, nil, nil)
}

// SwapWith swaps with options (nil: defaults; ResumeAsync is refused).
func (c *Context) SwapWith(pauseTag, resumeTag string, popts *PauseOptions, ropts *ResumeOptions) (PauseResult, ResumeResult, error) {
	pt, err := cTag("cms_swap", pauseTag, false)
	if err != nil {
		return PauseResult{}, ResumeResult{}, err
	}
	defer freeTag(pt)
	rt, err := cTag("cms_swap", resumeTag, false)
	if err != nil {
		return PauseResult{}, ResumeResult{}, err
	}
	defer freeTag(rt)
	po, ro := pauseOpts(popts), resumeOpts(ropts)
	var pr C.cms_pause_result
	var rr C.cms_resume_result
	pr.struct_size = C.size_t(unsafe.Sizeof(pr))
	rr.struct_size = C.size_t(unsafe.Sizeof(rr))
	err = c.with(func(raw *C.cms_context) error {
		return call("cms_swap", func() C.cms_status {
			return c_cms_swap(raw, pt, rt, &po, &ro, &pr, &rr)
		})
	})
	if err != nil {
		return PauseResult{}, ResumeResult{}, err
	}
	return pauseResult(&pr), resumeResult(&rr), nil
}

// SetProgress sets the progress callback of every later pause, resume and swap of the
// context (cms_context_progress_set); nil clears it. f receives the operation ("pause",
// "resume", "swap") and the bytes of HOST content copied so far and in all; it runs on
// the operation's threads with region locks held, so it must not pause, resume,
// allocate, free or read region info (PointerInfo, FindRegion and DeviceMemoryInfo are
// fine). An operation already running keeps the callback it started with: every
// callback set stays referenced until Close.
func (c *Context) SetProgress(f func(op string, done, total uint64)) error {
	return c.with(func(raw *C.cms_context) error {
		c.kidsMu.Lock()
		defer c.kidsMu.Unlock()
		var h cgo.Handle
		if f != nil {
			h = cgo.NewHandle(f)
		}
		err := call("cms_context_progress_set", func() C.cms_status {
			return C.cms_go_progress_set(raw, C.uintptr_t(h))
		})
		if err != nil {
			if h != 0 {
				h.Delete()
			}
			return err
		}
		if h != 0 {
			c.progress = append(c.progress, h)
		}
		return nil
	})
}

// FindRegion identifies the region tagged tag on device (cms_region_find); ErrNotFound
// when there is none.
func (c *Context) FindRegion(tag string, device int32) (RegionID, error) {
	ct, err := cTag("cms_region_find", tag, false)
	if err != nil {
		return 0, err
	}
	defer freeTag(ct)
	var r *C.cms_region
	err = c.with(func(raw *C.cms_context) error {
		return call("cms_region_find", func() C.cms_status {
			return c_cms_region_find(raw, ct, C.int32_t(device), &r)
		})
	})
	if err != nil {
		return 0, err
	}
	return RegionID(C.cms_go_region_id2(r)), nil
}

// SetDiskDir chooses the directory where a PolicyDisk region keeps its content while
// paused (cms_region_disk_dir_set); "" closes the region's file without choosing another.
func (r *Region) SetDiskDir(dir string) error {
	var d *C.char
	if dir != "" {
		d = C.CString(dir)
		defer C.free(unsafe.Pointer(d))
	}
	return r.with(func(raw *C.cms_region) error {
		return call("cms_region_disk_dir_set", func() C.cms_status {
			return c_cms_region_disk_dir_set(raw, d)
		})
	})
}

// Freeze makes the region's memory read-only for its device and peers (cms_region_freeze,
// since 1.3): writes fail, allocations into it fail with ErrFrozen, and a pause whose retained
// backup still holds the content copies nothing (the first pause after freezing an active
// region copies). A paused region becomes read-only at its resume. Freezing a frozen region
// does nothing.
func (r *Region) Freeze() error {
	return r.with(func(raw *C.cms_region) error {
		return call("cms_region_freeze", func() C.cms_status { return c_cms_region_freeze(raw) })
	})
}

// Thaw ends Freeze: read-write again, the next pause copies everything (cms_region_thaw,
// since 1.3). Thawing a region not frozen does nothing.
func (r *Region) Thaw() error {
	return r.with(func(raw *C.cms_region) error {
		return call("cms_region_thaw", func() C.cms_status { return c_cms_region_thaw(raw) })
	})
}

// SetPeerDevices gives the devices of mask (bit d: device d) read-write access to the
// region's memory (cms_region_peer_devices_set); 0: only the region's own device. While
// frozen, read-only access.
func (r *Region) SetPeerDevices(mask uint64) error {
	return r.with(func(raw *C.cms_region) error {
		return call("cms_region_peer_devices_set", func() C.cms_status {
			return c_cms_region_peer_devices_set(raw, C.uint64_t(mask))
		})
	})
}
