// SPDX-License-Identifier: MIT
//! Safe Rust API of `libcumemsaver`: release GPU memory and take it back later at the
//! same virtual addresses.
//!
//! A [`Context`] owns the library state; a [`Region`] is a set of allocations sharing a
//! tag, a device and a restore [`Policy`]. [`Region::alloc`] returns a device pointer (a
//! `CUdeviceptr` as `u64`) that stays the same until it is freed, whatever pauses and
//! resumes happen in between. Every call returns [`Result<T>`], whose [`Error`] carries an
//! [`ErrorKind`] (one per `cms_status`) and the library's message for the failed call.
//!
//! ```no_run
//! use cumemsaver::{Context, Policy, RegionOptions};
//! # fn main() -> Result<(), cumemsaver::Error> {
//! let ctx = Context::new()?;
//! let weights = ctx.create_region("weights", &RegionOptions::with_policy(Policy::Host))?;
//! let ptr = weights.alloc(256 << 20)?; // device pointer
//! let paused = ctx.pause("weights")?; // physical memory goes back to the driver
//! println!("released {} bytes", paused.bytes_released);
//! ctx.resume("weights")?; // same ptr, same content
//! # let _ = ptr; Ok(()) }
//! ```
//!
//! Ownership: a `Context` is a shared handle (cloning it is cheap); every [`Region`],
//! [`Exporter`], [`Import`], [`ControlSocket`] and [`HookContext`] holds the context too, so
//! an engine struct can own a context and its regions together and move them into
//! another thread. The library context is destroyed when the last of them is dropped
//! (`cms_context_destroy`); each object is released by `Drop` (RAII).
//!
//! Thread-safety (from the header): every function may be called from any thread, so
//! these types are `Send` and `Sync`. The C exceptions, destroying a handle while another
//! thread uses it, cannot happen here: destruction is `Drop`, which needs ownership, and
//! the context outlives everything that holds it. Callbacks (log, progress, import,
//! control) run on library threads, so they are `Send + Sync + 'static`; a panic in one
//! is caught at the FFI boundary.
//!
//! Without a GPU, [`SIMULATION`] as the driver path (or `CMS_DRIVER_LIBRARY=sim`) runs on
//! the host simulation installed with the library. The `bundled` feature builds the
//! library from this repository with CMake instead of finding it with pkg-config.
//!
//! The structs the library fills in ([`PauseResult`], [`ResumeResult`], [`DeviceResult`],
//! [`RegionInfo`], [`RegionStats`], [`PointerInfo`], [`BackupInfo`], [`MemoryInfo`],
//! [`ImportInfo`], [`ControlRequest`]) and [`ContextOptions`] are `#[non_exhaustive]`: a
//! release may add fields to them, as the C structs grow, without breaking code that reads
//! their fields and matches them with `..`. Outside this crate no struct expression builds
//! one; `ContextOptions::new()` and its setters build the options.
//!
//! The raw declarations are re-exported as [`sys`].

// Values cross to and from the generated declarations with `as` even where the types
// agree today, so that this crate keeps compiling whatever integer type a constant gets.
#![allow(
    clippy::unnecessary_cast,
    clippy::field_reassign_with_default,
    clippy::derivable_impls
)]

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

pub use cumemsaver_sys as sys;

mod error;
mod hooks;
mod ipc;
mod types;

pub use error::{last_error_message, status, status_name, status_string, Error, ErrorKind, Result};
pub use hooks::{hook_alloc, hook_free, torch_alloc, torch_free, HookContext, HookRegionGuard};
pub use ipc::{
    ControlOptions, ControlRequest, ControlSocket, Exporter, ExporterOptions, Import, ImportInfo,
    ImportOptions,
};
pub use types::*;

use error::{c_str_static, check};

/// The driver path of the host simulation installed with the library (`libcumemsaver-sim.so`
/// beside `libcumemsaver.so.1`, in its `cumemsaver/` directory, or in its build tree):
/// `ContextOptions::new().driver_path(SIMULATION)`, or `CMS_DRIVER_LIBRARY=sim` in the
/// environment. Runs without a GPU (docs/simulation.md).
pub const SIMULATION: &str = "sim";

/// Version of the library loaded at run time, `(major << 16) | (minor << 8) | patch`.
pub fn version() -> u32 {
    unsafe { sys::cms_version() as u32 }
}

/// The loaded library's version as text ("1.3.0").
pub fn version_string() -> &'static str {
    c_str_static(unsafe { sys::cms_version_string() })
}

pub(crate) fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            &format!("{} contains a NUL byte", what),
        )
    })
}

pub(crate) fn path_cstring(what: &str, p: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            &format!("{} contains a NUL byte", what),
        )
    })
}

/// The text of a NUL-terminated tag array of a C struct (lossy UTF-8; the whole array
/// when no NUL).
pub(crate) fn c_tag(tag: &[c_char]) -> String {
    let bytes: Vec<u8> = tag
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `f`, catching a panic (never unwinds into C).
pub(crate) fn no_unwind<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// A log callback: called from whichever thread is inside the library, with library
/// locks held. It must not call back into cumemsaver; a panic in it is caught.
pub type LogFn = Arc<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

/// A progress callback: `(op, done, total)` with op "pause", "resume" or "swap" and
/// bytes of HOST content copied (see `cms_progress_fn`). Called from the operation's
/// threads with region locks held: it may read pointer info, find regions and read
/// memory info, but must not pause, resume, allocate, free or read region info.
pub type ProgressFn = Arc<dyn Fn(&str, u64, u64) + Send + Sync + 'static>;

/// Options of [`Context::with_options`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ContextOptions {
    /// Driver library to load instead of `$CMS_DRIVER_LIBRARY` / `libcuda.so.1`
    /// ([`SIMULATION`] for the host simulation installed with the library).
    pub driver_path: Option<PathBuf>,
    /// Log callback and the highest level passed to it.
    pub log: Option<(LogLevel, LogFn)>,
}

impl ContextOptions {
    pub fn new() -> ContextOptions {
        ContextOptions::default()
    }
    /// Sets the driver library path.
    pub fn driver_path<P: AsRef<Path>>(mut self, path: P) -> ContextOptions {
        self.driver_path = Some(path.as_ref().to_path_buf());
        self
    }
    /// Sets a log callback receiving lines up to `level`.
    pub fn log<F>(mut self, level: LogLevel, f: F) -> ContextOptions
    where
        F: Fn(LogLevel, &str) + Send + Sync + 'static,
    {
        self.log = Some((level, Arc::new(f)));
        self
    }
}

impl fmt::Debug for ContextOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextOptions")
            .field("driver_path", &self.driver_path)
            .field("log", &self.log.as_ref().map(|l| l.0))
            .finish()
    }
}

unsafe extern "C" fn log_trampoline(user: *mut c_void, level: i32, message: *const c_char) {
    if user.is_null() {
        return;
    }
    let f = &*(user as *const LogFn);
    let msg = if message.is_null() {
        std::borrow::Cow::Borrowed("")
    } else {
        CStr::from_ptr(message).to_string_lossy()
    };
    no_unwind((), || f(LogLevel::from_raw(level), &msg));
}

unsafe extern "C" fn progress_trampoline(
    user: *mut c_void,
    op: *const c_char,
    done: u64,
    total: u64,
) {
    if user.is_null() {
        return;
    }
    let f = &*(user as *const ProgressFn);
    let op = if op.is_null() {
        ""
    } else {
        CStr::from_ptr(op).to_str().unwrap_or("")
    };
    no_unwind((), || f(op, done, total));
}

/// The library context itself, shared by [`Context`] clones and every object made from
/// it; destroyed with the last of them.
pub(crate) struct Inner {
    pub(crate) raw: *mut sys::cms_context,
    // Boxed so that its address, given to the library as log_user, stays put.
    log: Option<Box<LogFn>>,
    // Every progress callback ever set: an operation already running keeps the one it
    // started with, so none is freed before the context. Boxed: the library holds the
    // address of each.
    #[allow(clippy::vec_box)]
    progress: Mutex<Vec<Box<ProgressFn>>>,
}

// The header: every function may be called from any thread; the destroy runs in Drop,
// when nothing else holds the context.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        let st = unsafe { sys::cms_context_destroy(self.raw) };
        if st as i32 != status::OK {
            // The context is still alive inside the library and may call back: keep
            // the callbacks alive too (a leak, by design, after a failed destroy).
            if let Some(l) = self.log.take() {
                std::mem::forget(l);
            }
            let p = std::mem::take(&mut *self.progress.lock().unwrap_or_else(|e| e.into_inner()));
            std::mem::forget(p);
        }
    }
}

/// The library state of one user: regions, the pointer index, the loaded driver. A
/// shared handle: clones refer to the same library context, which is destroyed (every
/// region and allocation freed) when the last clone and the last object made from it
/// are dropped.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Inner>,
}

impl Context {
    /// A context with default options (the driver named by `CMS_DRIVER_LIBRARY`, else
    /// `libcuda.so.1`, loaded by the first call that needs it).
    pub fn new() -> Result<Context> {
        Context::with_options(ContextOptions::default())
    }

    /// A context with options.
    pub fn with_options(opts: ContextOptions) -> Result<Context> {
        let mut o = sys::cms_context_options::default();
        check(unsafe { sys::cms_context_options_init(&mut o) })?;
        let path = match &opts.driver_path {
            Some(p) => Some(path_cstring("driver path", p)?),
            None => None,
        };
        if let Some(p) = &path {
            o.driver_path = p.as_ptr();
        }
        let log = opts.log.map(|(level, f)| (level, Box::new(f)));
        if let Some((level, f)) = &log {
            o.log_fn = Some(log_trampoline);
            o.log_user = &**f as *const LogFn as *mut c_void;
            o.log_level = level.raw() as _;
        }
        let mut raw: *mut sys::cms_context = ptr::null_mut();
        check(unsafe { sys::cms_context_create(&o, &mut raw) })?;
        Ok(Context {
            inner: Arc::new(Inner {
                raw,
                log: log.map(|l| l.1),
                progress: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The raw handle, for calls of [`sys`] functions. Owned by this `Context`.
    pub fn as_ptr(&self) -> *mut sys::cms_context {
        self.inner.raw
    }

    /// Destroys the context now and reports the status (`Drop` ignores it). Fails with
    /// [`ErrorKind::InvalidArgument`] while other clones or objects (regions, exporters,
    /// imports, control sockets, hook contexts) still hold it; on a driver error while
    /// freeing, the context is handed back, still valid: retry or drop it.
    pub fn close(self) -> std::result::Result<(), (Context, Error)> {
        let inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            Err(inner) => {
                let n = Arc::strong_count(&inner) - 1;
                return Err((
                    Context { inner },
                    Error::new(
                        ErrorKind::InvalidArgument,
                        &format!("{} other handles still hold the context", n),
                    ),
                ));
            }
        };
        let st = unsafe { sys::cms_context_destroy(inner.raw) };
        match check(st) {
            Ok(()) => {
                // Destroyed: free the callbacks without running Inner's Drop.
                let mut inner = std::mem::ManuallyDrop::new(inner);
                unsafe {
                    ptr::drop_in_place(&mut inner.log);
                    ptr::drop_in_place(&mut inner.progress);
                }
                Ok(())
            }
            Err(e) => Err((
                Context {
                    inner: Arc::new(inner),
                },
                e,
            )),
        }
    }

    /// Creates an empty region named `tag` (1..=63 bytes) on `opts.device` with
    /// `opts.policy` (`cms_region_create`), and sets its DISK directory when
    /// `opts.disk_dir` is given. Loads the driver on first use.
    pub fn create_region(&self, tag: &str, opts: &RegionOptions) -> Result<Region> {
        let ctag = cstring("tag", tag)?;
        let dir = match &opts.disk_dir {
            Some(d) => Some(path_cstring("directory", d)?),
            None => None,
        };
        let mut o = sys::cms_region_options::default();
        check(unsafe { sys::cms_region_options_init(&mut o) })?;
        o.device = opts.device as _;
        o.policy = opts.policy.raw() as _;
        o.flags = opts.flags as _;
        let mut raw: *mut sys::cms_region = ptr::null_mut();
        check(unsafe { sys::cms_region_create(self.inner.raw, ctag.as_ptr(), &o, &mut raw) })?;
        let raw =
            NonNull::new(raw).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL region"))?;
        let region = Region {
            raw,
            ctx: self.clone(),
            tag: tag.to_string(),
            device: opts.device,
            policy: opts.policy,
        };
        if let Some(d) = dir {
            // On failure the region is dropped (destroyed) again.
            check(unsafe { sys::cms_region_disk_dir_set(raw.as_ptr(), d.as_ptr()) })?;
        }
        Ok(region)
    }

    /// The identity of the region tagged `tag` on `device` (`cms_region_find`);
    /// [`ErrorKind::NotFound`] when there is none.
    pub fn find_region(&self, tag: &str, device: i32) -> Result<RegionId> {
        let ctag = cstring("tag", tag)?;
        let mut raw: *mut sys::cms_region = ptr::null_mut();
        check(unsafe {
            sys::cms_region_find(self.inner.raw, ctag.as_ptr(), device as _, &mut raw)
        })?;
        Ok(RegionId(raw as usize))
    }

    /// Every live region of the context, in creation order: a copy of each one's
    /// identity and counters, as [`Region::stats`] (`cms_region_list`, since 1.2). Safe
    /// while other threads create or destroy regions (one destroyed meanwhile is left
    /// out); use `(tag, device)` with [`find_region`](Context::find_region) to name one.
    /// Must not be called from a progress or control callback.
    pub fn regions(&self) -> Result<Vec<RegionStats>> {
        loop {
            let mut total = 0usize;
            check(unsafe {
                sys::cms_region_list(
                    self.inner.raw,
                    ptr::null_mut(),
                    0,
                    ptr::null_mut(),
                    &mut total,
                )
            })?;
            let cap = total + 4; // room for regions created meanwhile
            let mut v = vec![sys::cms_region_stats::default(); cap];
            let mut written = 0usize;
            check(unsafe {
                sys::cms_region_list(
                    self.inner.raw,
                    v.as_mut_ptr(),
                    cap,
                    &mut written,
                    &mut total,
                )
            })?;
            if total <= cap {
                return Ok(v.iter().take(written).map(RegionStats::from_sys).collect());
            }
        }
    }

    fn pause_raw(&self, tag: Option<&str>, opts: &PauseOptions) -> Result<PauseResult> {
        let ctag = tag.map(|t| cstring("tag", t)).transpose()?;
        let o = opts.to_sys();
        let mut r = sys::cms_pause_result::default();
        let tp = ctag.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        check(unsafe { sys::cms_pause(self.inner.raw, tp, &o, &mut r) })?;
        Ok(PauseResult::from_sys(&r))
    }

    fn resume_raw(&self, tag: Option<&str>, opts: &ResumeOptions) -> Result<ResumeResult> {
        let ctag = tag.map(|t| cstring("tag", t)).transpose()?;
        let o = opts.to_sys();
        let mut r = sys::cms_resume_result::default();
        let tp = ctag.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        check(unsafe { sys::cms_resume(self.inner.raw, tp, &o, &mut r) })?;
        Ok(ResumeResult::from_sys(&r))
    }

    /// Pauses every active region tagged `tag`, on every device (`cms_pause`):
    /// waits for GPU work, saves HOST / DISK content, releases the physical memory.
    pub fn pause(&self, tag: &str) -> Result<PauseResult> {
        self.pause_raw(Some(tag), &PauseOptions::default())
    }
    /// Pauses every active region of every tag.
    pub fn pause_all(&self) -> Result<PauseResult> {
        self.pause_raw(None, &PauseOptions::default())
    }
    /// Pauses `tag` (or every tag when `None`) with options.
    pub fn pause_with(&self, tag: Option<&str>, opts: &PauseOptions) -> Result<PauseResult> {
        self.pause_raw(tag, opts)
    }
    /// Resumes every paused region tagged `tag` at the same addresses (`cms_resume`).
    pub fn resume(&self, tag: &str) -> Result<ResumeResult> {
        self.resume_raw(Some(tag), &ResumeOptions::default())
    }
    /// Resumes every paused region of every tag.
    pub fn resume_all(&self) -> Result<ResumeResult> {
        self.resume_raw(None, &ResumeOptions::default())
    }
    /// Resumes `tag` (or every tag when `None`) with options (e.g.
    /// [`ResumeOptions::asynchronous`]).
    pub fn resume_with(&self, tag: Option<&str>, opts: &ResumeOptions) -> Result<ResumeResult> {
        self.resume_raw(tag, opts)
    }

    /// Pauses every active region tagged `pause_tag` and resumes every paused region
    /// tagged `resume_tag` in one transactional call, the two directions' copies
    /// overlapping (`cms_swap`).
    pub fn swap(&self, pause_tag: &str, resume_tag: &str) -> Result<(PauseResult, ResumeResult)> {
        self.swap_with(
            pause_tag,
            resume_tag,
            &PauseOptions::default(),
            &ResumeOptions::default(),
        )
    }

    /// [`swap`](Context::swap) with options (`RESUME_ASYNC` is refused).
    pub fn swap_with(
        &self,
        pause_tag: &str,
        resume_tag: &str,
        popts: &PauseOptions,
        ropts: &ResumeOptions,
    ) -> Result<(PauseResult, ResumeResult)> {
        let pt = cstring("tag", pause_tag)?;
        let rt = cstring("tag", resume_tag)?;
        let po = popts.to_sys();
        let ro = ropts.to_sys();
        let mut pr = sys::cms_pause_result::default();
        let mut rr = sys::cms_resume_result::default();
        check(unsafe {
            sys::cms_swap(
                self.inner.raw,
                pt.as_ptr(),
                rt.as_ptr(),
                &po,
                &ro,
                &mut pr,
                &mut rr,
            )
        })?;
        Ok((PauseResult::from_sys(&pr), ResumeResult::from_sys(&rr)))
    }

    /// Sets the progress callback of every later pause, resume and swap of this context
    /// (`cms_context_progress_set`); `None` clears it. An operation already running
    /// keeps the callback it started with: every callback set stays alive until the
    /// context is destroyed.
    pub fn set_progress<F>(&self, f: Option<F>) -> Result<()>
    where
        F: Fn(&str, u64, u64) + Send + Sync + 'static,
    {
        let mut kept = self
            .inner
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match f {
            None => check(unsafe {
                sys::cms_context_progress_set(self.inner.raw, None, ptr::null_mut())
            }),
            Some(f) => {
                let b: Box<ProgressFn> = Box::new(Arc::new(f));
                let user = &*b as *const ProgressFn as *mut c_void;
                check(unsafe {
                    sys::cms_context_progress_set(self.inner.raw, Some(progress_trampoline), user)
                })?;
                kept.push(b);
                Ok(())
            }
        }
    }

    /// Clears the progress callback (`set_progress(None)` without naming a closure type).
    pub fn clear_progress(&self) -> Result<()> {
        self.set_progress(None::<fn(&str, u64, u64)>)
    }

    /// Frees the allocation whose base is `ptr`, in any state (`cms_free`). GPU work
    /// using it must be finished. The pointer must not be used afterwards.
    pub fn free(&self, ptr: u64) -> Result<()> {
        check(unsafe { sys::cms_free(self.inner.raw, ptr) })
    }

    /// "Is this pointer ours?": the allocation containing `ptr`.
    pub fn pointer_info(&self, ptr: u64) -> Result<PointerInfo> {
        let mut i = sys::cms_pointer_info::default();
        check(unsafe { sys::cms_pointer_info_get(self.inner.raw, ptr, &mut i) })?;
        Ok(PointerInfo {
            base: i.base as u64,
            size: i.size as u64,
            offset: i.offset as u64,
            physical_size: i.physical_size as u64,
            device: i.device as i32,
            state: State::from_raw(i.state as u32),
            region: RegionId(i.region as usize),
        })
    }

    /// Where the backup of the allocation containing `ptr` is (`cms_backup_get`, since 1.2).
    pub fn backup(&self, ptr: u64) -> Result<BackupInfo> {
        let mut b = sys::cms_backup_info::default();
        check(unsafe { sys::cms_backup_get(self.inner.raw, ptr, &mut b) })?;
        Ok(BackupInfo {
            base: b.base,
            size: b.size,
            host: b.host as usize,
            policy: Policy::from_raw(b.policy),
            current: b.state == sys::CMS_BACKUP_CURRENT,
        })
    }

    /// Fills `buf` with the backup of the allocation containing `ptr`, from the byte that
    /// backs `ptr` (`cms_backup_read`, since 1.2; HOST or DISK).
    pub fn backup_read(&self, ptr: u64, buf: &mut [u8]) -> Result<()> {
        check(unsafe {
            sys::cms_backup_read(
                self.inner.raw,
                ptr,
                buf.as_mut_ptr() as *mut c_void,
                buf.len() as u64,
            )
        })
    }

    /// Declares `[ptr, ptr + size)` of one live allocation content-free (`cms_range_discard`,
    /// since 1.2): the next pause of its region does not copy those bytes and the resume
    /// after it does not restore them. Ends at that resume, at [`Context::range_keep`] or
    /// at the allocation's free.
    pub fn range_discard(&self, ptr: u64, size: u64) -> Result<()> {
        check(unsafe { sys::cms_range_discard(self.inner.raw, ptr, size) })
    }

    /// Ends the declarations of [`Context::range_discard`] over `[ptr, ptr + size)`
    /// (`cms_range_keep`, since 1.2).
    pub fn range_keep(&self, ptr: u64, size: u64) -> Result<()> {
        check(unsafe { sys::cms_range_keep(self.inner.raw, ptr, size) })
    }

    /// The driver's free and total memory of `device` (`cuMemGetInfo`).
    pub fn device_memory_info(&self, device: i32) -> Result<MemoryInfo> {
        let mut free = 0u64;
        let mut total = 0u64;
        check(unsafe {
            sys::cms_device_memory_info(self.inner.raw, device as _, &mut free, &mut total)
        })?;
        Ok(MemoryInfo { free, total })
    }

    /// Publishes regions of this context to other processes on the Unix socket `path`
    /// (`cms_exporter_create`).
    pub fn exporter<P: AsRef<Path>>(&self, path: P, opts: &ExporterOptions) -> Result<Exporter> {
        Exporter::new(self, path.as_ref(), opts)
    }

    /// Maps the region tagged `tag` that the exporter at `path` publishes
    /// (`cms_import_open`).
    pub fn import<P: AsRef<Path>>(
        &self,
        path: P,
        tag: &str,
        opts: ImportOptions,
    ) -> Result<Import> {
        Import::open(self, path.as_ref(), tag, opts)
    }

    /// Serves status, pause and resume requests (`cmsctl --socket`) on the Unix socket
    /// `path` (`cms_control_create`).
    pub fn control_socket<P: AsRef<Path>>(
        &self,
        path: P,
        opts: ControlOptions,
    ) -> Result<ControlSocket> {
        ControlSocket::new(self, path.as_ref(), opts)
    }

    /// Makes this context the process-wide hook context (`cms_hook_context_set`) until
    /// the returned guard is dropped.
    pub fn hook_context(&self) -> Result<HookContext> {
        HookContext::set(self)
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("raw", &self.inner.raw)
            .finish()
    }
}

/// A set of allocations sharing a tag, a device and a restore policy. Holds its
/// [`Context`]; dropping it frees every allocation of the region (`cms_region_destroy`).
pub struct Region {
    raw: NonNull<sys::cms_region>,
    ctx: Context,
    tag: String,
    device: i32,
    policy: Policy,
}

// The header: every function may be called from any thread; region destroy needs
// ownership here, so it never runs concurrently with a call naming this handle.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// The raw handle (owned by the context), for calls of [`sys`] functions.
    pub fn as_ptr(&self) -> *mut sys::cms_region {
        self.raw.as_ptr()
    }
    /// The region's identity (compare with [`PointerInfo::region`]).
    pub fn id(&self) -> RegionId {
        RegionId(self.raw.as_ptr() as usize)
    }
    pub fn context(&self) -> &Context {
        &self.ctx
    }
    pub fn tag(&self) -> &str {
        &self.tag
    }
    pub fn device(&self) -> i32 {
        self.device
    }
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Allocates `size` bytes (rounded up to the granularity) in this active region and
    /// returns the device pointer, valid until freed, across pauses and resumes.
    pub fn alloc(&self, size: u64) -> Result<u64> {
        let mut p = 0u64;
        check(unsafe { sys::cms_alloc(self.raw.as_ptr(), size, &mut p) })?;
        Ok(p)
    }

    /// Frees an allocation (as [`Context::free`]).
    pub fn free(&self, ptr: u64) -> Result<()> {
        self.ctx.free(ptr)
    }

    /// A consistent snapshot of the region.
    pub fn info(&self) -> Result<RegionInfo> {
        let mut i = sys::cms_region_info::default();
        check(unsafe { sys::cms_region_info_get(self.raw.as_ptr(), &mut i) })?;
        Ok(RegionInfo {
            tag: c_tag(&i.tag),
            device: i.device as i32,
            policy: Policy::from_raw(i.policy as u32),
            state: State::from_raw(i.state as u32),
            flags: i.flags as u64,
            allocations: i.allocations as u64,
            logical_bytes: i.logical_bytes as u64,
            physical_bytes: i.physical_bytes as u64,
            backed_bytes: i.backed_bytes as u64,
            backup_bytes: i.backup_bytes as u64,
            epoch: i.epoch as u64,
            granularity: i.granularity as u64,
            host_bytes: i.host_bytes as u64,
            restore_pending: i.restore_pending != 0,
            handle_types: i.handle_types as u32,
            peer_device_mask: i.peer_device_mask as u64,
            pinned_bytes: i.pinned_bytes as u64,
            retained_bytes: i.retained_bytes as u64,
            frozen: i.frozen != 0,
        })
    }

    /// The region's identity and cumulative counters since its creation: pauses,
    /// resumes, swaps, failures by status, bytes released / backed / copied, time
    /// (`cms_region_stats_get`, since 1.2); a consistent snapshot taken under the
    /// region's lock (waits for a pause or resume of it in progress).
    pub fn stats(&self) -> Result<RegionStats> {
        let mut s = sys::cms_region_stats::default();
        check(unsafe { sys::cms_region_stats_get(self.raw.as_ptr(), &mut s) })?;
        Ok(RegionStats::from_sys(&s))
    }

    /// Chooses the directory of a DISK region's file (`cms_region_disk_dir_set`);
    /// `None` closes the file without choosing another.
    pub fn set_disk_dir(&self, dir: Option<&Path>) -> Result<()> {
        let d = dir.map(|d| path_cstring("directory", d)).transpose()?;
        let dp = d.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        check(unsafe { sys::cms_region_disk_dir_set(self.raw.as_ptr(), dp) })
    }

    /// Sets the retention flags selected by `mask` (`REGION_RELEASE_HOST`,
    /// `REGION_HOST_PAGEABLE`) to their values in `flags` (`cms_region_flags_set`, since
    /// 1.2); on an active region, keeping less gives the kept backups back now.
    pub fn set_flags(&self, mask: u64, flags: u64) -> Result<()> {
        check(unsafe { sys::cms_region_flags_set(self.raw.as_ptr(), mask, flags) })
    }

    /// Makes the region's memory read-only for its device and peers
    /// (`cms_region_freeze`, since 1.3): writes fail, allocations into it fail with
    /// [`ErrorKind::Frozen`], and a pause whose retained backup still holds the content
    /// copies nothing (the first pause after freezing an active region copies). A paused
    /// region becomes read-only at its resume. Freezing a frozen region does nothing.
    pub fn freeze(&self) -> Result<()> {
        check(unsafe { sys::cms_region_freeze(self.raw.as_ptr()) })
    }

    /// Ends [`Region::freeze`]: read-write again, the next pause copies everything
    /// (`cms_region_thaw`, since 1.3). Thawing a region not frozen does nothing.
    pub fn thaw(&self) -> Result<()> {
        check(unsafe { sys::cms_region_thaw(self.raw.as_ptr()) })
    }

    /// Gives the devices of `device_mask` (bit d: device d) read-write access to the
    /// region's memory (`cms_region_peer_devices_set`); 0: only the region's device.
    /// While frozen, read-only access.
    pub fn set_peer_devices(&self, device_mask: u64) -> Result<()> {
        check(unsafe { sys::cms_region_peer_devices_set(self.raw.as_ptr(), device_mask) })
    }

    /// Pauses this region (`cms_region_pause`).
    pub fn pause(&self) -> Result<PauseResult> {
        self.pause_with(&PauseOptions::default())
    }
    pub fn pause_with(&self, opts: &PauseOptions) -> Result<PauseResult> {
        let o = opts.to_sys();
        let mut r = sys::cms_pause_result::default();
        check(unsafe { sys::cms_region_pause(self.raw.as_ptr(), &o, &mut r) })?;
        Ok(PauseResult::from_sys(&r))
    }
    /// Resumes this region (`cms_region_resume`).
    pub fn resume(&self) -> Result<ResumeResult> {
        self.resume_with(&ResumeOptions::default())
    }
    pub fn resume_with(&self, opts: &ResumeOptions) -> Result<ResumeResult> {
        let o = opts.to_sys();
        let mut r = sys::cms_resume_result::default();
        check(unsafe { sys::cms_region_resume(self.raw.as_ptr(), &o, &mut r) })?;
        Ok(ResumeResult::from_sys(&r))
    }

    /// Makes this region the calling thread's hook region (`cms_hook_region_push`)
    /// until the returned guard is dropped (`cms_hook_region_pop`).
    pub fn push_hook(&self) -> Result<HookRegionGuard<'_>> {
        HookRegionGuard::push(self)
    }

    /// Destroys the region now, freeing its allocations, and reports the status. On
    /// failure the region is handed back, still valid (the allocations freed so far
    /// stay freed): retry, or drop it.
    pub fn destroy(self) -> std::result::Result<(), (Region, Error)> {
        let st = unsafe { sys::cms_region_destroy(self.raw.as_ptr()) };
        match check(st) {
            Ok(()) => {
                // Destroyed: skip Drop, but release the tag and the context.
                let mut me = std::mem::ManuallyDrop::new(self);
                unsafe {
                    ptr::drop_in_place(&mut me.tag);
                    ptr::drop_in_place(&mut me.ctx);
                }
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // On failure the region stays in the context, which frees it when destroyed.
        let _ = unsafe { sys::cms_region_destroy(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("tag", &self.tag)
            .field("device", &self.device)
            .field("policy", &self.policy)
            .finish()
    }
}

/// The `#[non_exhaustive]` structs as code outside this crate sees them: it reads their
/// fields, matches them with `..` and sets the fields of a `Default` one,
///
/// ```
/// use cumemsaver::{ContextOptions, PauseResult, SIMULATION};
/// fn released(r: &PauseResult) -> u64 {
///     let PauseResult { bytes_released, .. } = r;
///     *bytes_released
/// }
/// let mut r = PauseResult::default();
/// r.bytes_released = 4096;
/// assert_eq!(released(&r), 4096);
/// let o = ContextOptions::new().driver_path(SIMULATION);
/// assert_eq!(o.driver_path.as_deref(), Some(std::path::Path::new(SIMULATION)));
/// ```
///
/// but builds none with a struct expression, not even from a value of the type
/// (`T { ..t }`, whatever fields `T` has): each item below holds one such block, which
/// compiles once the attribute is gone.
#[cfg(doctest)]
mod non_exhaustive {
    macro_rules! no_struct_expression {
        ($($t:ident)*) => {$(
            #[doc = concat!("```compile_fail\nfn rebuild(v: cumemsaver::", stringify!($t),
                ") -> cumemsaver::", stringify!($t), " {\n    cumemsaver::", stringify!($t),
                " { ..v }\n}\n```")]
            pub struct $t;
        )*};
    }
    no_struct_expression!(
        DeviceResult PauseResult ResumeResult MemoryInfo PointerInfo BackupInfo RegionInfo
        RegionStats ImportInfo ControlRequest ContextOptions
    );
}
