// SPDX-License-Identifier: MIT

package cumemsaver

// ABI 1.2: host backups readable, retention flags changeable between cycles, default hook
// regions.

/*
#include <stdlib.h>
#include <cumemsaver.h>
*/
import "C"

import "unsafe"

// BackupInfo says where an allocation's backup is (cms_backup_info, since 1.2).
type BackupInfo struct {
	Base uint64
	Size uint64
	// Host is the address of the backup's byte 0 in host memory (Host + (ptr - Base) is the
	// byte of ptr); 0 for a DISK region (use Context.BackupRead). Valid until the region's
	// next pause, its next resume that does not retain, a free of the allocation,
	// Region.SetFlags or the region's destroy.
	Host   uintptr
	Policy Policy
	State  BackupState // BackupCurrent while paused, else BackupRetained
}

// Backup says where the backup of the allocation containing ptr is (cms_backup_get).
func (c *Context) Backup(ptr uint64) (BackupInfo, error) {
	var b C.cms_backup_info
	b.struct_size = C.size_t(unsafe.Sizeof(b))
	err := c.with(func(raw *C.cms_context) error {
		return call("cms_backup_get", func() C.cms_status { return c_cms_backup_get(raw, C.uint64_t(ptr), &b) })
	})
	if err != nil {
		return BackupInfo{}, err
	}
	return BackupInfo{
		Base:   uint64(b.base),
		Size:   uint64(b.size),
		Host:   uintptr(b.host),
		Policy: Policy(b.policy),
		State:  BackupState(b.state),
	}, nil
}

// BackupRead fills buf with the backup of the allocation containing ptr, from the byte
// that backs ptr (cms_backup_read; HOST or DISK).
func (c *Context) BackupRead(ptr uint64, buf []byte) error {
	if len(buf) == 0 {
		var one [1]byte
		buf = one[:0:1]
	}
	return c.with(func(raw *C.cms_context) error {
		return call("cms_backup_read", func() C.cms_status {
			return c_cms_backup_read(raw, C.uint64_t(ptr), unsafe.Pointer(&buf[:1][0]), C.uint64_t(len(buf)))
		})
	})
}

// SetFlags sets the retention flags selected by mask (RegionReleaseHost,
// RegionHostPageable) to their values in flags (cms_region_flags_set); on an active region,
// keeping less gives the kept backups back now.
func (r *Region) SetFlags(mask, flags RegionFlags) error {
	return r.with(func(raw *C.cms_region) error {
		return call("cms_region_flags_set", func() C.cms_status {
			return c_cms_region_flags_set(raw, C.uint64_t(mask), C.uint64_t(flags))
		})
	})
}

// SetHookDefault makes r the default region of device for hooked allocations of threads
// with no hook region (cms_hook_region_default_set); cleared by r's destroy and by every
// change of the hook context.
func (r *Region) SetHookDefault(device int32) error {
	return r.with(func(raw *C.cms_region) error {
		return call("cms_hook_region_default_set", func() C.cms_status {
			return c_cms_hook_region_default_set(C.int32_t(device), raw)
		})
	})
}

// ClearHookDefault clears the default region of device (cms_hook_region_default_set NULL).
func ClearHookDefault(device int32) error {
	return call("cms_hook_region_default_set", func() C.cms_status {
		return c_cms_hook_region_default_set(C.int32_t(device), nil)
	})
}

// IsHookDefault reports whether r is the default region of device (cms_hook_region_default).
func (r *Region) IsHookDefault(device int32) bool {
	cur := c_cms_hook_region_default(C.int32_t(device))
	r.mu.RLock()
	defer r.mu.RUnlock()
	return !r.closed && cur == r.raw
}

// RangeDiscard declares [ptr, ptr+size) of one live allocation content-free
// (cms_range_discard, since 1.2): the next pause of its region does not copy those bytes and
// the resume after it does not restore them. It ends at that resume, at RangeKeep or at the
// allocation's free.
func (c *Context) RangeDiscard(ptr, size uint64) error {
	return c.with(func(raw *C.cms_context) error {
		return call("cms_range_discard", func() C.cms_status {
			return c_cms_range_discard(raw, C.uint64_t(ptr), C.uint64_t(size))
		})
	})
}

// RangeKeep ends the declarations of RangeDiscard over [ptr, ptr+size) (cms_range_keep).
func (c *Context) RangeKeep(ptr, size uint64) error {
	return c.with(func(raw *C.cms_context) error {
		return call("cms_range_keep", func() C.cms_status {
			return c_cms_range_keep(raw, C.uint64_t(ptr), C.uint64_t(size))
		})
	})
}

// SetHookDefaultTemplate makes default regions on demand
// (cms_hook_region_default_template_set, since 1.2): a hooked allocation of a thread with no
// hook region, on a device with no default region, first makes the region tagged tag on that
// device (found, or created with opts' policy and flags and, for a PolicyDisk template,
// given opts.DiskDir, resolved to an absolute path now) its default. An empty tag clears
// the template; a change of the hook context clears it too.
func SetHookDefaultTemplate(tag string, opts *RegionOptions) error {
	if tag == "" {
		return call("cms_hook_region_default_template_set", func() C.cms_status {
			return c_cms_hook_region_default_template_set(nil, nil, nil)
		})
	}
	var ro RegionOptions
	if opts != nil {
		ro = *opts
	}
	ct, err := cTag("cms_hook_region_default_template_set", tag, false)
	if err != nil {
		return err
	}
	defer freeTag(ct)
	var d *C.char
	if ro.DiskDir != "" {
		if d, err = cPath("cms_hook_region_default_template_set", ro.DiskDir); err != nil {
			return err
		}
		defer C.free(unsafe.Pointer(d))
	}
	var o C.cms_region_options
	return call("cms_hook_region_default_template_set", func() C.cms_status {
		if st := c_cms_region_options_init(&o); st != 0 {
			return st
		}
		o.policy = C.uint32_t(ro.Policy)
		o.flags = C.uint64_t(ro.Flags)
		return c_cms_hook_region_default_template_set(ct, &o, d)
	})
}

// SetHookMemoryMargin sets the device bytes every hooked allocation must leave free
// (cms_hook_memory_margin_set, since 1.2; process-wide); 0 turns the check off.
func SetHookMemoryMargin(bytes uint64) error {
	return call("cms_hook_memory_margin_set", func() C.cms_status {
		return c_cms_hook_memory_margin_set(C.uint64_t(bytes))
	})
}
