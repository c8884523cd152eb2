// SPDX-License-Identifier: MIT
//! Allocator hooks (`cumemsaver_hooks.h`): a process-wide hook context and a per-thread
//! stack of regions where hooked allocations go, as RAII guards.

use crate::error::{check, Result};
use crate::{cstring, path_cstring, sys, Context, Region, RegionOptions};
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr;

/// The process-wide hook context (`cms_hook_context_set`), made by
/// [`Context::hook_context`]. Dropping it clears the hook context (waiting until no
/// hooked call that may use it is in flight). Holds its context.
#[derive(Debug)]
pub struct HookContext {
    ctx: Context,
}

impl HookContext {
    pub(crate) fn set(ctx: &Context) -> Result<HookContext> {
        check(unsafe { sys::cms_hook_context_set(ctx.inner.raw) })?;
        Ok(HookContext { ctx: ctx.clone() })
    }
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Makes `region` (of this context, on `device`) the default region of `device` for
    /// threads with no hook region; `None` clears it (`cms_hook_region_default_set`, since
    /// 1.2). Cleared by the region's destroy and when a hook context is set.
    pub fn set_default_region(&self, device: i32, region: Option<&Region>) -> Result<()> {
        let r = region.map_or(ptr::null_mut(), |r| r.as_ptr());
        check(unsafe { sys::cms_hook_region_default_set(device, r) })
    }

    /// Whether `region` is the default region of `device` (`cms_hook_region_default`).
    pub fn is_default_region(&self, device: i32, region: &Region) -> bool {
        unsafe { sys::cms_hook_region_default(device) == region.as_ptr() }
    }

    /// Whether `device` has a default region.
    pub fn has_default_region(&self, device: i32) -> bool {
        unsafe { !sys::cms_hook_region_default(device).is_null() }
    }

    /// Default regions made on demand (`cms_hook_region_default_template_set`, since 1.2):
    /// a hooked allocation of a thread with no hook region, on a device with no default
    /// region, first makes the region tagged `tag` on that device (found, or created with
    /// `opts`' policy and flags and, for a DISK template, given `opts.disk_dir`, resolved to
    /// an absolute path now; `opts.device` is not used) its default. `None` clears the
    /// template; setting a hook context clears it too.
    pub fn set_default_template(&self, template: Option<(&str, &RegionOptions)>) -> Result<()> {
        match template {
            None => check(unsafe {
                sys::cms_hook_region_default_template_set(ptr::null(), ptr::null(), ptr::null())
            }),
            Some((tag, opts)) => {
                let ctag = cstring("tag", tag)?;
                let dir = match &opts.disk_dir {
                    Some(d) => Some(path_cstring("directory", d)?),
                    None => None,
                };
                let dp = dir.as_ref().map_or(ptr::null(), |d| d.as_ptr());
                let mut o = sys::cms_region_options::default();
                check(unsafe { sys::cms_region_options_init(&mut o) })?;
                o.policy = opts.policy.raw() as _;
                o.flags = opts.flags as _;
                check(unsafe { sys::cms_hook_region_default_template_set(ctag.as_ptr(), &o, dp) })
            }
        }
    }

    /// Device bytes every hooked allocation must leave free (`cms_hook_memory_margin_set`,
    /// since 1.2; process-wide); 0 turns the check off.
    pub fn set_memory_margin(&self, bytes: u64) -> Result<()> {
        check(unsafe { sys::cms_hook_memory_margin_set(bytes) })
    }
}

impl Drop for HookContext {
    fn drop(&mut self) {
        let _ = unsafe { sys::cms_hook_context_set(ptr::null_mut()) };
    }
}

/// The calling thread's hook region (`cms_hook_region_push`), made by
/// [`Region::push_hook`]; dropping it pops it (`cms_hook_region_pop`). Not `Send`: the
/// stack belongs to the thread. Guards must be dropped in reverse order of creation.
#[derive(Debug)]
pub struct HookRegionGuard<'r> {
    _region: PhantomData<&'r Region>,
    _thread: PhantomData<*const ()>,
}

impl<'r> HookRegionGuard<'r> {
    pub(crate) fn push(region: &'r Region) -> Result<HookRegionGuard<'r>> {
        check(unsafe { sys::cms_hook_region_push(region.as_ptr()) })?;
        Ok(HookRegionGuard {
            _region: PhantomData,
            _thread: PhantomData,
        })
    }

    /// Whether `region` is the calling thread's top hook region
    /// (`cms_hook_region_current`).
    pub fn is_current(region: &Region) -> bool {
        unsafe { sys::cms_hook_region_current() == region.as_ptr() }
    }
}

impl Drop for HookRegionGuard<'_> {
    fn drop(&mut self) {
        let _ = unsafe { sys::cms_hook_region_pop() };
    }
}

/// Allocates `size` bytes in the calling thread's hook region (`cms_hook_alloc`); `device`
/// negative: any.
pub fn hook_alloc(size: u64, device: i32) -> Result<u64> {
    let mut p = 0u64;
    check(unsafe { sys::cms_hook_alloc(size, device as _, &mut p) })?;
    Ok(p)
}

/// Frees a pointer of the hook context (`cms_hook_free`): [`ErrorKind::NotFound`] when it
/// is not ours.
///
/// [`ErrorKind::NotFound`]: crate::ErrorKind::NotFound
pub fn hook_free(ptr: u64) -> Result<()> {
    check(unsafe { sys::cms_hook_free(ptr as usize as *mut c_void) })
}

/// PyTorch's pluggable-allocator entry point (`cms_torch_alloc`, stream NULL): a device
/// pointer in the calling thread's hook region, or 0 (the reason in
/// [`last_error_message`](crate::last_error_message)).
pub fn torch_alloc(size: isize, device: i32) -> u64 {
    unsafe { sys::cms_torch_alloc(size as _, device as _, ptr::null_mut()) as usize as u64 }
}

/// PyTorch's pluggable-allocator free entry point (`cms_torch_free`); never fails
/// visibly (the reason of a failure in [`last_error_message`](crate::last_error_message)).
pub fn torch_free(ptr: u64, size: isize, device: i32) {
    unsafe {
        sys::cms_torch_free(
            ptr as usize as *mut c_void,
            size as _,
            device as _,
            ptr::null_mut(),
        )
    }
}
