// SPDX-License-Identifier: MIT
//! Sharing pausable memory between processes and the control socket
//! (`cumemsaver_ipc.h`): [`Exporter`], [`Import`], [`ControlSocket`], each released by
//! `Drop`.

use crate::error::{check, Error, ErrorKind, Result};
use crate::types::{Access, ControlOp, ControlPhase, ImportEvent, ImportState};
use crate::{cstring, no_unwind, path_cstring, status, sys, Context, Region};
use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::time::Duration;

fn millis(d: Option<Duration>) -> u32 {
    d.map_or(0, |d| d.as_millis().clamp(1, u32::MAX as u128) as u32)
}

fn uids(v: &[u32]) -> (*const u32, u32) {
    if v.is_empty() {
        (ptr::null(), 0)
    } else {
        (v.as_ptr(), v.len() as u32)
    }
}

// ---- Exporter

/// Options of [`Context::exporter`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExporterOptions {
    /// uids allowed to import (empty: this process's uid only).
    pub allowed_uids: Vec<u32>,
    /// How long a pause waits for every importer to drop its mappings (None: 10 s).
    pub revoke_timeout: Option<Duration>,
}

/// Publishes shareable regions on a Unix socket and serves importers on its own thread
/// (`cms_exporter`). Dropping it stops publishing (`cms_exporter_destroy`).
pub struct Exporter {
    raw: NonNull<sys::cms_exporter>,
    ctx: Context,
}

// publish and importers are thread-safe; destroy needs ownership.
unsafe impl Send for Exporter {}
unsafe impl Sync for Exporter {}

impl Exporter {
    pub(crate) fn new(ctx: &Context, path: &Path, opts: &ExporterOptions) -> Result<Exporter> {
        let cpath = path_cstring("socket path", path)?;
        let mut o = sys::cms_exporter_options::default();
        check(unsafe { sys::cms_exporter_options_init(&mut o) })?;
        let (u, n) = uids(&opts.allowed_uids);
        o.allowed_uids = u;
        o.nallowed_uids = n;
        o.revoke_timeout_ms = millis(opts.revoke_timeout);
        let mut raw = ptr::null_mut();
        check(unsafe { sys::cms_exporter_create(ctx.inner.raw, cpath.as_ptr(), &o, &mut raw) })?;
        Ok(Exporter {
            raw: NonNull::new(raw).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL"))?,
            ctx: ctx.clone(),
        })
    }

    /// Offers `region` (created with `REGION_SHAREABLE`) to importers with at most
    /// `access` (`cms_exporter_publish`).
    pub fn publish(&self, region: &Region, access: Access) -> Result<()> {
        check(unsafe {
            sys::cms_exporter_publish(self.raw.as_ptr(), region.as_ptr(), access.raw())
        })
    }

    /// The number of importers connected now (`cms_exporter_importers`).
    pub fn importers(&self) -> Result<u64> {
        let mut n = 0u64;
        check(unsafe { sys::cms_exporter_importers(self.raw.as_ptr(), &mut n) })?;
        Ok(n)
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = unsafe { sys::cms_exporter_destroy(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for Exporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exporter").field("raw", &self.raw).finish()
    }
}

// ---- Import

type QuiesceFn = Arc<dyn Fn(u64) -> bool + Send + Sync + 'static>;
type EventFn = Arc<dyn Fn(ImportEvent, u64) + Send + Sync + 'static>;

/// Options of [`Context::import`].
#[derive(Clone, Default)]
pub struct ImportOptions {
    /// Local CUDA device to map on.
    pub device: i32,
    /// The region's device in the exporter (None: any).
    pub exporter_device: Option<i32>,
    /// `IMPORT_*` flags (`IMPORT_READ_ONLY`).
    pub flags: u64,
    /// uids the exporter may run as (empty: this process's uid only).
    pub allowed_uids: Vec<u32>,
    /// Connect + first grant (None: 10 s).
    pub timeout: Option<Duration>,
    /// Shown in the exporter's messages (<= 63 bytes).
    pub name: Option<String>,
    quiesce: Option<QuiesceFn>,
    event: Option<EventFn>,
}

impl ImportOptions {
    pub fn new() -> ImportOptions {
        ImportOptions::default()
    }
    /// Sets the name shown in the exporter's messages.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
    /// Sets the local device to map on.
    pub fn device(mut self, device: i32) -> Self {
        self.device = device;
        self
    }
    /// Called on the import's thread before the exporter pauses, with the epoch mapped:
    /// finish GPU work on the memory and return true to consent, false to refuse (the
    /// exporter's pause then fails with [`ErrorKind::Refused`]). Without it the library
    /// synchronizes the device. A panic refuses.
    pub fn on_quiesce<F: Fn(u64) -> bool + Send + Sync + 'static>(mut self, f: F) -> Self {
        self.quiesce = Some(Arc::new(f));
        self
    }
    /// Called on the import's thread after its state changed, with the epoch now mapped.
    pub fn on_event<F: Fn(ImportEvent, u64) + Send + Sync + 'static>(mut self, f: F) -> Self {
        self.event = Some(Arc::new(f));
        self
    }
}

impl fmt::Debug for ImportOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportOptions")
            .field("device", &self.device)
            .field("exporter_device", &self.exporter_device)
            .field("flags", &self.flags)
            .field("allowed_uids", &self.allowed_uids)
            .field("timeout", &self.timeout)
            .field("name", &self.name)
            .field("quiesce", &self.quiesce.is_some())
            .field("event", &self.event.is_some())
            .finish()
    }
}

struct ImportCallbacks {
    quiesce: Option<QuiesceFn>,
    event: Option<EventFn>,
}

unsafe extern "C" fn quiesce_trampoline(
    user: *mut c_void,
    _imp: *mut sys::cms_import,
    epoch: u64,
) -> sys::cms_status {
    let cb = &*(user as *const ImportCallbacks);
    let ok = match &cb.quiesce {
        Some(f) => no_unwind(false, || f(epoch)),
        None => true,
    };
    (if ok { status::OK } else { status::REFUSED }) as _
}

unsafe extern "C" fn event_trampoline(
    user: *mut c_void,
    _imp: *mut sys::cms_import,
    event: u32,
    epoch: u64,
) {
    let cb = &*(user as *const ImportCallbacks);
    if let Some(f) = &cb.event {
        no_unwind((), || f(ImportEvent::from_raw(event), epoch));
    }
}

/// A snapshot of an import (`cms_import_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportInfo {
    pub tag: String,
    pub exporter_device: i32,
    pub device: i32,
    pub state: ImportState,
    pub access: Access,
    /// The exporter's epoch of the memory mapped (or last mapped).
    pub epoch: u64,
    pub allocations: u64,
    /// Start of the reserved range (device pointer).
    pub base: u64,
    pub bytes: u64,
    pub exporter_pid: i32,
    pub exporter_uid: u32,
    /// What led to LayoutChanged, Disconnected or Failed.
    pub error: Option<ErrorKind>,
}

/// One region of another process mapped at addresses of this one (`cms_import`); a
/// library thread serves revocations and grants. Dropping it closes the import
/// (`cms_import_close`); finish GPU work on its memory first.
pub struct Import {
    raw: *mut sys::cms_import,
    ctx: Context,
    // Borrowed by the library while the import lives.
    _callbacks: Box<ImportCallbacks>,
}

unsafe impl Send for Import {}
unsafe impl Sync for Import {}

impl Import {
    pub(crate) fn open(
        ctx: &Context,
        path: &Path,
        tag: &str,
        opts: ImportOptions,
    ) -> Result<Import> {
        let cpath = path_cstring("socket path", path)?;
        let ctag = cstring("tag", tag)?;
        let name = opts
            .name
            .as_deref()
            .map(|n| cstring("name", n))
            .transpose()?;
        let callbacks = Box::new(ImportCallbacks {
            quiesce: opts.quiesce.clone(),
            event: opts.event.clone(),
        });
        let mut o = sys::cms_import_options::default();
        check(unsafe { sys::cms_import_options_init(&mut o) })?;
        o.device = opts.device as _;
        o.exporter_device = opts.exporter_device.unwrap_or(-1) as _;
        o.flags = opts.flags as _;
        let (u, n) = uids(&opts.allowed_uids);
        o.allowed_uids = u;
        o.nallowed_uids = n;
        o.timeout_ms = millis(opts.timeout);
        if callbacks.quiesce.is_some() {
            o.quiesce_fn = Some(quiesce_trampoline);
        }
        if callbacks.event.is_some() {
            o.event_fn = Some(event_trampoline);
        }
        o.user = &*callbacks as *const ImportCallbacks as *mut c_void;
        o.name = name.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let mut raw = ptr::null_mut();
        check(unsafe {
            sys::cms_import_open(ctx.inner.raw, cpath.as_ptr(), ctag.as_ptr(), &o, &mut raw)
        })?;
        Ok(Import {
            raw,
            ctx: ctx.clone(),
            _callbacks: callbacks,
        })
    }

    /// A snapshot of the import's state (`cms_import_info_get`).
    pub fn info(&self) -> Result<ImportInfo> {
        let mut i = sys::cms_import_info::default();
        check(unsafe { sys::cms_import_info_get(self.raw, &mut i) })?;
        let tag = unsafe { CStr::from_ptr(i.tag.as_ptr() as *const c_char) };
        Ok(ImportInfo {
            tag: tag.to_string_lossy().into_owned(),
            exporter_device: i.exporter_device as i32,
            device: i.device as i32,
            state: ImportState::from_raw(i.state as u32),
            access: Access::from_raw(i.access as u32),
            epoch: i.epoch as u64,
            allocations: i.allocations as u64,
            base: i.base as u64,
            bytes: i.bytes as u64,
            exporter_pid: i.exporter_pid as i32,
            exporter_uid: i.exporter_uid as u32,
            error: if i.error == 0 {
                None
            } else {
                Some(ErrorKind::from_status(i.error as i32))
            },
        })
    }

    /// The local device pointer and size of the `index`-th allocation of the layout
    /// (`cms_import_alloc_get`).
    pub fn alloc(&self, index: u64) -> Result<(u64, u64)> {
        let (mut p, mut s) = (0u64, 0u64);
        check(unsafe { sys::cms_import_alloc_get(self.raw, index, &mut p, &mut s) })?;
        Ok((p, s))
    }

    /// Every allocation of the layout as `(local pointer, size)`.
    pub fn allocs(&self) -> Result<Vec<(u64, u64)>> {
        let n = self.info()?.allocations;
        (0..n).map(|i| self.alloc(i)).collect()
    }

    /// The local address of an exporter's address (`cms_import_translate`).
    pub fn translate(&self, exporter_ptr: u64) -> Result<u64> {
        let mut p = 0u64;
        check(unsafe { sys::cms_import_translate(self.raw, exporter_ptr, &mut p) })?;
        Ok(p)
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Closes the import now and reports the status (the import is freed either way).
    pub fn close(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        check(unsafe { sys::cms_import_close(raw) })
    }
}

impl Drop for Import {
    fn drop(&mut self) {
        // Stops the import's thread before `callbacks` is freed (NULL after close: no-op).
        let _ = unsafe { sys::cms_import_close(self.raw) };
    }
}

impl fmt::Debug for Import {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Import").field("raw", &self.raw).finish()
    }
}

// ---- Control socket

/// A pause or resume request from another process (`cms_control_request`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControlRequest {
    pub op: ControlOp,
    /// `Before`: decide; `After`: informed of `result`.
    pub phase: ControlPhase,
    pub tag: String,
    pub peer_pid: i32,
    pub peer_uid: u32,
    /// After: what the pause or resume returned.
    pub result: std::result::Result<(), ErrorKind>,
}

type ControlFn =
    Arc<dyn Fn(&ControlRequest) -> std::result::Result<(), ErrorKind> + Send + Sync + 'static>;

/// Options of [`Context::control_socket`].
#[derive(Clone, Default)]
pub struct ControlOptions {
    /// Without a handler: act on every pause/resume request (default: status only).
    pub allow_all: bool,
    /// uids allowed to connect (empty: this process's uid only).
    pub allowed_uids: Vec<u32>,
    handler: Option<ControlFn>,
}

impl ControlOptions {
    pub fn new() -> ControlOptions {
        ControlOptions::default()
    }
    /// Acts on every pause/resume request when there is no handler (`CONTROL_ALLOW_ALL`).
    pub fn allow_all(mut self) -> ControlOptions {
        self.allow_all = true;
        self
    }
    /// Decides pause/resume requests on the control socket's thread: in the `Before`
    /// phase return `Ok(())` to let the library act or `Err(kind)` to refuse (the
    /// requester gets that status); in `After` the return is ignored. It may call the
    /// library (hold a [`Context`] clone) but must not drop the control socket. A panic
    /// refuses with [`ErrorKind::Internal`].
    pub fn handler<F>(mut self, f: F) -> ControlOptions
    where
        F: Fn(&ControlRequest) -> std::result::Result<(), ErrorKind> + Send + Sync + 'static,
    {
        self.handler = Some(Arc::new(f));
        self
    }
}

impl fmt::Debug for ControlOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlOptions")
            .field("allow_all", &self.allow_all)
            .field("allowed_uids", &self.allowed_uids)
            .field("handler", &self.handler.is_some())
            .finish()
    }
}

unsafe extern "C" fn control_trampoline(
    user: *mut c_void,
    req: *const sys::cms_control_request,
) -> sys::cms_status {
    if user.is_null() || req.is_null() {
        return status::INVALID_ARGUMENT as _;
    }
    let f = &*(user as *const ControlFn);
    let r = &*req;
    let tag = if r.tag.is_null() {
        String::new()
    } else {
        CStr::from_ptr(r.tag).to_string_lossy().into_owned()
    };
    let request = ControlRequest {
        op: ControlOp::from_raw(r.op as u32),
        phase: ControlPhase::from_raw(r.phase as u32),
        tag,
        peer_pid: r.peer_pid as i32,
        peer_uid: r.peer_uid as u32,
        result: if r.result as i32 == status::OK {
            Ok(())
        } else {
            Err(ErrorKind::from_status(r.result as i32))
        },
    };
    let st = match no_unwind(Err(ErrorKind::Internal), || f(&request)) {
        Ok(()) => status::OK,
        Err(k) => k.status(),
    };
    st as _
}

/// A control socket: status, pause and resume requests from another process
/// (`cmsctl --socket PATH ...`), served on its own thread. Dropping it stops the thread
/// and removes the socket (`cms_control_destroy`).
pub struct ControlSocket {
    raw: NonNull<sys::cms_control>,
    ctx: Context,
    // Borrowed by the library while the socket lives.
    _handler: Option<Box<ControlFn>>,
}

unsafe impl Send for ControlSocket {}
unsafe impl Sync for ControlSocket {}

impl ControlSocket {
    pub(crate) fn new(ctx: &Context, path: &Path, opts: ControlOptions) -> Result<ControlSocket> {
        let cpath = path_cstring("socket path", path)?;
        let handler = opts.handler.map(Box::new);
        let mut o = sys::cms_control_options::default();
        check(unsafe { sys::cms_control_options_init(&mut o) })?;
        if opts.allow_all {
            o.flags = sys::CMS_CONTROL_ALLOW_ALL as _;
        }
        let (u, n) = uids(&opts.allowed_uids);
        o.allowed_uids = u;
        o.nallowed_uids = n;
        if let Some(h) = &handler {
            o.r#fn = Some(control_trampoline);
            o.user = &**h as *const ControlFn as *mut c_void;
        }
        let mut raw = ptr::null_mut();
        check(unsafe { sys::cms_control_create(ctx.inner.raw, cpath.as_ptr(), &o, &mut raw) })?;
        Ok(ControlSocket {
            raw: NonNull::new(raw).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL"))?,
            ctx: ctx.clone(),
            _handler: handler,
        })
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = unsafe { sys::cms_control_destroy(self.raw.as_ptr()) };
    }
}

impl fmt::Debug for ControlSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlSocket")
            .field("raw", &self.raw)
            .finish()
    }
}
