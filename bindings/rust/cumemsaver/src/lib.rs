// SPDX-License-Identifier: MIT
//! Safe Rust API of `libcumemsaver`: release GPU memory and take it back later at the
//! same virtual addresses.
//!
//! A [`Context`] owns the library state; a [`Region`] (borrowing its context) is a set of
//! allocations sharing a tag, a device and a restore [`Policy`]. [`Region::alloc`] returns
//! a device pointer (a `CUdeviceptr` as `u64`) that stays the same until it is freed,
//! whatever pauses and resumes happen in between. Every call returns
//! [`Result<T, Error>`](Error), where the error carries the status number, its name and
//! the library's message for the failed call (read on the same thread, right after it).
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
//! Thread-safety (from the header): every function may be called from any thread, so
//! [`Context`] and [`Region`] are `Send` and `Sync`. The one exception in C, destroying a
//! handle while another thread uses it, cannot happen here: destruction is `Drop`, which
//! needs ownership, and a region borrows its context. A log callback runs on whichever
//! thread called into the library, so it must be `Send + Sync`.
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
use std::sync::Arc;

pub use cumemsaver_sys as sys;

/// Status numbers (`cms_status`): 0 is OK, errors are negative and never renumbered.
pub mod status {
    use super::sys;
    pub const OK: i32 = sys::CMS_OK as i32;
    pub const INVALID_ARGUMENT: i32 = sys::CMS_ERR_INVALID_ARGUMENT as i32;
    pub const NO_DRIVER: i32 = sys::CMS_ERR_NO_DRIVER as i32;
    pub const DRIVER: i32 = sys::CMS_ERR_DRIVER as i32;
    pub const OUT_OF_DEVICE_MEMORY: i32 = sys::CMS_ERR_OUT_OF_DEVICE_MEMORY as i32;
    pub const OUT_OF_HOST_MEMORY: i32 = sys::CMS_ERR_OUT_OF_HOST_MEMORY as i32;
    pub const NOT_FOUND: i32 = sys::CMS_ERR_NOT_FOUND as i32;
    pub const EXISTS: i32 = sys::CMS_ERR_EXISTS as i32;
    pub const ALREADY_PAUSED: i32 = sys::CMS_ERR_ALREADY_PAUSED as i32;
    pub const NOT_PAUSED: i32 = sys::CMS_ERR_NOT_PAUSED as i32;
    pub const PAUSED: i32 = sys::CMS_ERR_PAUSED as i32;
    pub const INVALID_DEVICE: i32 = sys::CMS_ERR_INVALID_DEVICE as i32;
    pub const NOT_SUPPORTED: i32 = sys::CMS_ERR_NOT_SUPPORTED as i32;
    pub const STRUCT_SIZE: i32 = sys::CMS_ERR_STRUCT_SIZE as i32;
    pub const NOT_BASE: i32 = sys::CMS_ERR_NOT_BASE as i32;
    pub const ROLLBACK_FAILED: i32 = sys::CMS_ERR_ROLLBACK_FAILED as i32;
    pub const NO_DEVICE: i32 = sys::CMS_ERR_NO_DEVICE as i32;
    pub const INTERNAL: i32 = sys::CMS_ERR_INTERNAL as i32;
    pub const FORKED: i32 = sys::CMS_ERR_FORKED as i32;
    pub const PROTOCOL: i32 = sys::CMS_ERR_PROTOCOL as i32;
    pub const PERMISSION: i32 = sys::CMS_ERR_PERMISSION as i32;
    pub const TIMEOUT: i32 = sys::CMS_ERR_TIMEOUT as i32;
    pub const DISCONNECTED: i32 = sys::CMS_ERR_DISCONNECTED as i32;
    pub const LAYOUT_CHANGED: i32 = sys::CMS_ERR_LAYOUT_CHANGED as i32;
    pub const REFUSED: i32 = sys::CMS_ERR_REFUSED as i32;
    pub const IO: i32 = sys::CMS_ERR_IO as i32;
}

/// Region flag: give the host backup buffers back after each resume.
pub const REGION_RELEASE_HOST: u64 = sys::CMS_REGION_RELEASE_HOST as u64;
/// Region flag (1.1): physical allocations shareable with other processes (POSIX fd handles).
pub const REGION_SHAREABLE: u64 = sys::CMS_REGION_SHAREABLE as u64;
/// Region flag (1.1): also request fabric handles (multi-node NVLink).
pub const REGION_SHAREABLE_FABRIC: u64 = sys::CMS_REGION_SHAREABLE_FABRIC as u64;
/// `RegionInfo::handle_types` bit: POSIX file descriptor handles.
pub const HANDLE_TYPE_POSIX_FD: u32 = sys::CMS_HANDLE_TYPE_POSIX_FD as u32;
/// `RegionInfo::handle_types` bit: fabric handles.
pub const HANDLE_TYPE_FABRIC: u32 = sys::CMS_HANDLE_TYPE_FABRIC as u32;
/// Pause flag: the caller guarantees no GPU work uses the memory; skip the wait.
pub const PAUSE_NO_SYNC: u64 = sys::CMS_PAUSE_NO_SYNC as u64;
/// Resume flag: return once mapped; the restore is ordered before `ResumeOptions::stream`.
pub const RESUME_ASYNC: u64 = sys::CMS_RESUME_ASYNC as u64;
/// Longest tag in bytes.
pub const TAG_MAX: usize = sys::CMS_TAG_MAX as usize;

fn c_str_static(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // The library returns static strings for names, descriptions and the version.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// Version of the library loaded at run time, `(major << 16) | (minor << 8) | patch`.
pub fn version() -> u32 {
    unsafe { sys::cms_version() as u32 }
}

/// The loaded library's version as text ("1.1.0").
pub fn version_string() -> &'static str {
    c_str_static(unsafe { sys::cms_version_string() })
}

/// `cms_status_name`: "CMS_OK", "CMS_ERR_NOT_FOUND", ..., "CMS_ERR_UNKNOWN_STATUS".
pub fn status_name(status: i32) -> &'static str {
    c_str_static(unsafe { sys::cms_status_name(status as _) })
}

/// `cms_status_string`: a one-line English description of a status.
pub fn status_string(status: i32) -> &'static str {
    c_str_static(unsafe { sys::cms_status_string(status as _) })
}

/// A failed call: the status, its name and the library's message for that call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: i32,
    name: &'static str,
    message: String,
}

impl Error {
    /// Builds the error of a call that just returned `status`, reading the calling
    /// thread's last-error message (`cms_last_error_message`). Call it on the thread of
    /// the failed call, before any other library call.
    pub fn from_status(status: i32) -> Error {
        Error {
            status,
            name: status_name(status),
            message: last_error_message(),
        }
    }

    fn local(status: i32, message: &str) -> Error {
        Error {
            status,
            name: status_name(status),
            message: message.to_string(),
        }
    }

    /// The `cms_status` number (negative).
    pub fn status(&self) -> i32 {
        self.status
    }
    /// `cms_status_name(status)`, e.g. "CMS_ERR_NOT_FOUND".
    pub fn name(&self) -> &str {
        self.name
    }
    /// The library's message for the failed call (may be empty).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{} ({})", self.name, status_string(self.status))
        } else {
            write!(f, "{}: {}", self.name, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// The calling thread's last error message (`cms_last_error_message`, copy-out form).
pub fn last_error_message() -> String {
    unsafe {
        let n = sys::cms_last_error_message(ptr::null_mut(), 0) as usize;
        let mut buf = vec![0u8; n + 1];
        let m =
            sys::cms_last_error_message(buf.as_mut_ptr() as *mut c_char, buf.len() as _) as usize;
        buf.truncate(m.min(n));
        String::from_utf8_lossy(&buf).into_owned()
    }
}

fn check(st: sys::cms_status) -> Result<()> {
    let st = st as i32;
    if st == status::OK {
        Ok(())
    } else {
        Err(Error::from_status(st))
    }
}

fn tag_cstring(tag: &str) -> Result<CString> {
    CString::new(tag).map_err(|_| Error::local(status::INVALID_ARGUMENT, "tag contains a NUL byte"))
}

/// Restore policy of a region: what content survives a pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Content undefined after resume (KV cache, scratch).
    Discard,
    /// Every byte reads 0 after resume.
    Zero,
    /// Copied to host memory on pause and back on resume.
    Host,
    /// A policy number this crate does not know (from a newer library).
    Other(u32),
}

impl Policy {
    pub fn raw(self) -> u32 {
        match self {
            Policy::Discard => sys::CMS_POLICY_DISCARD as u32,
            Policy::Zero => sys::CMS_POLICY_ZERO as u32,
            Policy::Host => sys::CMS_POLICY_HOST as u32,
            Policy::Other(v) => v,
        }
    }
    pub fn from_raw(v: u32) -> Policy {
        if v == sys::CMS_POLICY_DISCARD as u32 {
            Policy::Discard
        } else if v == sys::CMS_POLICY_ZERO as u32 {
            Policy::Zero
        } else if v == sys::CMS_POLICY_HOST as u32 {
            Policy::Host
        } else {
            Policy::Other(v)
        }
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::Discard
    }
}

/// State of a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Physical memory mapped; pointers usable.
    Active,
    /// Physical memory released; addresses reserved, not accessible.
    Paused,
    /// A state number this crate does not know.
    Other(u32),
}

impl State {
    pub fn from_raw(v: u32) -> State {
        if v == sys::CMS_STATE_ACTIVE as u32 {
            State::Active
        } else if v == sys::CMS_STATE_PAUSED as u32 {
            State::Paused
        } else {
            State::Other(v)
        }
    }
}

/// Log levels (`CMS_LOG_*`), most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl LogLevel {
    pub fn raw(self) -> i32 {
        (match self {
            LogLevel::Error => sys::CMS_LOG_ERROR,
            LogLevel::Warn => sys::CMS_LOG_WARN,
            LogLevel::Info => sys::CMS_LOG_INFO,
            LogLevel::Debug => sys::CMS_LOG_DEBUG,
        }) as i32
    }
    pub fn from_raw(v: i32) -> LogLevel {
        if v <= sys::CMS_LOG_ERROR as i32 {
            LogLevel::Error
        } else if v == sys::CMS_LOG_WARN as i32 {
            LogLevel::Warn
        } else if v == sys::CMS_LOG_INFO as i32 {
            LogLevel::Info
        } else {
            LogLevel::Debug
        }
    }
}

/// A log callback: called from whichever thread is inside the library, with library
/// locks held. It must not call back into cumemsaver; a panic in it is caught.
pub type LogFn = Arc<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

/// Options of [`Context::with_options`].
#[derive(Clone, Default)]
pub struct ContextOptions {
    /// Driver library to load instead of `$CMS_DRIVER_LIBRARY` / `libcuda.so.1`
    /// (for example the host simulation `libcumemsaver-sim.so`).
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
    // Never unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        f(LogLevel::from_raw(level), &msg)
    }));
}

/// The library state of one user: regions, the pointer index, the loaded driver.
/// Dropping it destroys every region and frees every allocation (`cms_context_destroy`).
pub struct Context {
    raw: *mut sys::cms_context,
    // Boxed so that its address, given to the library as log_user, stays put.
    log: Option<Box<LogFn>>,
}

// The header: every function may be called from any thread; destroy needs ownership here.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

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
            Some(p) => {
                use std::os::unix::ffi::OsStrExt;
                Some(CString::new(p.as_os_str().as_bytes()).map_err(|_| {
                    Error::local(status::INVALID_ARGUMENT, "driver path contains a NUL byte")
                })?)
            }
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
            raw,
            log: log.map(|l| l.1),
        })
    }

    /// The raw handle, for calls of [`sys`] functions. Owned by this `Context`.
    pub fn as_ptr(&self) -> *mut sys::cms_context {
        self.raw
    }

    /// Destroys the context now and reports the status (`Drop` ignores it). On failure
    /// (a driver error while freeing) the context is handed back, still valid: retry or
    /// drop it.
    pub fn close(mut self) -> std::result::Result<(), (Context, Error)> {
        let st = unsafe { sys::cms_context_destroy(self.raw) };
        match check(st) {
            Ok(()) => {
                self.raw = ptr::null_mut();
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }

    /// Creates an empty region named `tag` (1..=63 bytes) on `opts.device` with
    /// `opts.policy`. Loads the driver on first use.
    pub fn create_region(&self, tag: &str, opts: &RegionOptions) -> Result<Region<'_>> {
        let ctag = tag_cstring(tag)?;
        let mut o = sys::cms_region_options::default();
        check(unsafe { sys::cms_region_options_init(&mut o) })?;
        o.device = opts.device as _;
        o.policy = opts.policy.raw() as _;
        o.flags = opts.flags as _;
        let mut raw: *mut sys::cms_region = ptr::null_mut();
        check(unsafe { sys::cms_region_create(self.raw, ctag.as_ptr(), &o, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::local(status::INTERNAL, "NULL region"))?;
        Ok(Region {
            raw,
            ctx: self,
            tag: tag.to_string(),
            device: opts.device,
            policy: opts.policy,
        })
    }

    fn pause_raw(&self, tag: Option<&str>, opts: &PauseOptions) -> Result<PauseResult> {
        let ctag = tag.map(tag_cstring).transpose()?;
        let o = opts.to_sys();
        let mut r = sys::cms_pause_result::default();
        let tp = ctag.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        check(unsafe { sys::cms_pause(self.raw, tp, &o, &mut r) })?;
        Ok(PauseResult::from_sys(&r))
    }

    fn resume_raw(&self, tag: Option<&str>, opts: &ResumeOptions) -> Result<ResumeResult> {
        let ctag = tag.map(tag_cstring).transpose()?;
        let o = opts.to_sys();
        let mut r = sys::cms_resume_result::default();
        let tp = ctag.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        check(unsafe { sys::cms_resume(self.raw, tp, &o, &mut r) })?;
        Ok(ResumeResult::from_sys(&r))
    }

    /// Pauses every active region tagged `tag`, on every device (`cms_pause`):
    /// waits for GPU work, saves HOST content, releases the physical memory.
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
    /// Resumes `tag` (or every tag when `None`) with options.
    pub fn resume_with(&self, tag: Option<&str>, opts: &ResumeOptions) -> Result<ResumeResult> {
        self.resume_raw(tag, opts)
    }

    /// Frees the allocation whose base is `ptr`, in any state (`cms_free`). GPU work
    /// using it must be finished. The pointer must not be used afterwards.
    pub fn free(&self, ptr: u64) -> Result<()> {
        check(unsafe { sys::cms_free(self.raw, ptr) })
    }

    /// "Is this pointer ours?": the allocation containing `ptr`.
    pub fn pointer_info(&self, ptr: u64) -> Result<PointerInfo> {
        let mut i = sys::cms_pointer_info::default();
        check(unsafe { sys::cms_pointer_info_get(self.raw, ptr, &mut i) })?;
        Ok(PointerInfo {
            base: i.base as u64,
            size: i.size as u64,
            offset: i.offset as u64,
            physical_size: i.physical_size as u64,
            device: i.device as i32,
            state: State::from_raw(i.state as u32),
            region: i.region as usize,
        })
    }

    /// The driver's free and total memory of `device` (`cuMemGetInfo`).
    pub fn device_memory_info(&self, device: i32) -> Result<MemoryInfo> {
        let mut free = 0u64;
        let mut total = 0u64;
        check(unsafe {
            sys::cms_device_memory_info(self.raw, device as _, &mut free, &mut total)
        })?;
        Ok(MemoryInfo { free, total })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let st = unsafe { sys::cms_context_destroy(self.raw) };
        if st as i32 != status::OK {
            // The context is still alive inside the library and may log: keep the
            // callback alive too (a leak, by design, after a failed destroy).
            if let Some(l) = self.log.take() {
                std::mem::forget(l);
            }
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("raw", &self.raw).finish()
    }
}

/// Options of [`Context::create_region`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionOptions {
    /// CUDA device ordinal.
    pub device: i32,
    pub policy: Policy,
    /// `REGION_*` flags.
    pub flags: u64,
}

impl RegionOptions {
    /// Device 0, this policy, no flags.
    pub fn with_policy(policy: Policy) -> RegionOptions {
        RegionOptions {
            policy,
            ..RegionOptions::default()
        }
    }
}

/// Options of a pause: what it waits for before unmapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseOptions {
    /// A `CUstream` to wait for instead of synchronizing the device (0: none).
    pub stream: u64,
    /// A `CUevent` to wait for instead (0: none).
    pub event: u64,
    /// `PAUSE_*` flags.
    pub flags: u64,
}

impl PauseOptions {
    fn to_sys(self) -> sys::cms_pause_options {
        let mut o = sys::cms_pause_options::default();
        o.stream = self.stream as _;
        o.event = self.event as _;
        o.flags = self.flags as _;
        o
    }
}

/// Options of a resume.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeOptions {
    /// `RESUME_*` flags.
    pub flags: u64,
    /// With `RESUME_ASYNC`: the `CUstream` ordered after the restore (0: NULL stream).
    pub stream: u64,
}

impl ResumeOptions {
    fn to_sys(self) -> sys::cms_resume_options {
        let mut o = sys::cms_resume_options::default();
        o.flags = self.flags as _;
        o.stream = self.stream as _;
        o
    }
}

/// What a pause did (`cms_pause_result`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseResult {
    pub regions: u64,
    pub allocations: u64,
    /// Physical bytes released to the driver.
    pub bytes_released: u64,
    /// Bytes copied to host backups.
    pub bytes_backed_up: u64,
    /// The driver's free memory before and after (summed over the devices touched).
    pub driver_free_before: u64,
    pub driver_free_after: u64,
    pub elapsed_ns: u64,
}

impl PauseResult {
    fn from_sys(r: &sys::cms_pause_result) -> PauseResult {
        PauseResult {
            regions: r.regions as u64,
            allocations: r.allocations as u64,
            bytes_released: r.bytes_released as u64,
            bytes_backed_up: r.bytes_backed_up as u64,
            driver_free_before: r.driver_free_before as u64,
            driver_free_after: r.driver_free_after as u64,
            elapsed_ns: r.elapsed_ns as u64,
        }
    }
}

/// What a resume did (`cms_resume_result`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeResult {
    pub regions: u64,
    pub allocations: u64,
    /// Physical bytes created and mapped.
    pub bytes_backed: u64,
    /// Bytes copied back from host backups.
    pub bytes_restored: u64,
    pub elapsed_ns: u64,
}

impl ResumeResult {
    fn from_sys(r: &sys::cms_resume_result) -> ResumeResult {
        ResumeResult {
            regions: r.regions as u64,
            allocations: r.allocations as u64,
            bytes_backed: r.bytes_backed as u64,
            bytes_restored: r.bytes_restored as u64,
            elapsed_ns: r.elapsed_ns as u64,
        }
    }
}

/// The driver's view of a device's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryInfo {
    pub free: u64,
    pub total: u64,
}

/// The allocation containing a pointer (`cms_pointer_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// The allocation's device pointer.
    pub base: u64,
    /// Size asked for.
    pub size: u64,
    /// `ptr - base`.
    pub offset: u64,
    /// Size rounded to the granularity.
    pub physical_size: u64,
    pub device: i32,
    /// State of the owning region.
    pub state: State,
    region: usize,
}

impl PointerInfo {
    /// Whether the allocation belongs to `region`.
    pub fn belongs_to(&self, region: &Region<'_>) -> bool {
        self.region == region.raw.as_ptr() as usize
    }
}

/// A snapshot of a region (`cms_region_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    pub tag: String,
    pub device: i32,
    pub policy: Policy,
    pub state: State,
    pub flags: u64,
    /// Live allocations.
    pub allocations: u64,
    /// Sum of the sizes asked for.
    pub logical_bytes: u64,
    /// Sum of the sizes rounded to the granularity (reserved address space).
    pub physical_bytes: u64,
    /// Physical bytes currently backed by device memory.
    pub backed_bytes: u64,
    /// Bytes of content saved in host backups (while paused).
    pub backup_bytes: u64,
    /// Bumped by every successful resume.
    pub epoch: u64,
    pub granularity: u64,
    /// Host memory held by backup buffers.
    pub host_bytes: u64,
    /// An async resume's restore copies may still run.
    pub restore_pending: bool,
    /// `HANDLE_TYPE_*` bits the physical allocations are created with (0: not shareable;
    /// since 1.1, 0 from a 1.0 library).
    pub handle_types: u32,
    /// Bytes of `host_bytes` page-locked with `cuMemHostRegister` (a buffer whose
    /// registration failed stays pageable and is not counted; since 1.1, 0 from a 1.0
    /// library).
    pub pinned_bytes: u64,
    /// Device bytes of freed allocations still held in handles shared with live neighbours
    /// (since 1.1).
    pub retained_bytes: u64,
}

/// A set of allocations sharing a tag, a device and a restore policy. Borrows its
/// [`Context`]; dropping it frees every allocation of the region (`cms_region_destroy`).
pub struct Region<'ctx> {
    raw: NonNull<sys::cms_region>,
    ctx: &'ctx Context,
    tag: String,
    device: i32,
    policy: Policy,
}

// The header: every function may be called from any thread; region destroy needs
// ownership here, so it never runs concurrently with a call naming this handle.
unsafe impl Send for Region<'_> {}
unsafe impl Sync for Region<'_> {}

impl<'ctx> Region<'ctx> {
    /// The raw handle (owned by the context), for calls of [`sys`] functions.
    pub fn as_ptr(&self) -> *mut sys::cms_region {
        self.raw.as_ptr()
    }
    pub fn context(&self) -> &'ctx Context {
        self.ctx
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
        let tag = unsafe { CStr::from_ptr(i.tag.as_ptr() as *const c_char) };
        Ok(RegionInfo {
            tag: tag.to_string_lossy().into_owned(),
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
            pinned_bytes: i.pinned_bytes as u64,
            retained_bytes: i.retained_bytes as u64,
        })
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

    /// Destroys the region now, freeing its allocations, and reports the status. On
    /// failure the region is handed back, still valid (the allocations freed so far
    /// stay freed): retry, or drop it.
    pub fn destroy(self) -> std::result::Result<(), (Region<'ctx>, Error)> {
        let st = unsafe { sys::cms_region_destroy(self.raw.as_ptr()) };
        match check(st) {
            Ok(()) => {
                // Destroyed: skip Drop, but release the tag string.
                let mut me = std::mem::ManuallyDrop::new(self);
                unsafe { ptr::drop_in_place(&mut me.tag) };
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Region<'_> {
    fn drop(&mut self) {
        // On failure the region stays in the context, which frees it when destroyed.
        let _ = unsafe { sys::cms_region_destroy(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Region<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("tag", &self.tag)
            .field("device", &self.device)
            .field("policy", &self.policy)
            .finish()
    }
}
