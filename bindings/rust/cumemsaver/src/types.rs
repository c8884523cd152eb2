// SPDX-License-Identifier: MIT
//! Enumerations and flags of the C ABI, and the option and result structs of pause,
//! resume and swap.

use crate::sys;

macro_rules! c_enum {
    ($(#[$m:meta])* $name:ident: $raw:ty { $($(#[$d:meta])* $v:ident = $c:ident,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$d])* $v,)*
            /// A value this crate does not know (from a newer library).
            Other($raw),
        }

        impl $name {
            /// The C value.
            pub fn raw(self) -> $raw {
                match self {
                    $($name::$v => sys::$c as $raw,)*
                    $name::Other(v) => v,
                }
            }
            /// The variant of a C value.
            pub fn from_raw(v: $raw) -> $name {
                $(if v == sys::$c as $raw {
                    return $name::$v;
                })*
                $name::Other(v)
            }
        }
    };
}

c_enum! {
    /// Restore policy of a region: what content survives a pause.
    Policy: u32 {
        /// Content undefined after resume (KV cache, scratch).
        Discard = CMS_POLICY_DISCARD,
        /// Every byte reads 0 after resume.
        Zero = CMS_POLICY_ZERO,
        /// Copied to host memory on pause and back on resume.
        Host = CMS_POLICY_HOST,
        /// Written to a file on pause and read back on resume (since 1.1); needs a
        /// directory ([`RegionOptions::disk_dir`] or [`Region::set_disk_dir`](crate::Region::set_disk_dir)).
        Disk = CMS_POLICY_DISK,
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::Discard
    }
}

c_enum! {
    /// State of a region.
    State: u32 {
        /// Physical memory mapped; pointers usable.
        Active = CMS_STATE_ACTIVE,
        /// Physical memory released; addresses reserved, not accessible.
        Paused = CMS_STATE_PAUSED,
    }
}

c_enum! {
    /// Access granted to importers of a published region.
    Access: u32 {
        Read = CMS_ACCESS_READ,
        ReadWrite = CMS_ACCESS_READWRITE,
    }
}

c_enum! {
    /// State of an import (`cms_import_info.state`).
    ImportState: u32 {
        /// Mapped at the import's addresses.
        Mapped = CMS_IMPORT_MAPPED,
        /// The exporter paused: addresses reserved, not accessible.
        Revoked = CMS_IMPORT_REVOKED,
        /// The exporter's layout changed: nothing mapped.
        LayoutChanged = CMS_IMPORT_LAYOUT_CHANGED,
        /// The exporter closed or exited.
        Disconnected = CMS_IMPORT_DISCONNECTED,
        /// Mapping a grant failed (`ImportInfo::error`).
        Failed = CMS_IMPORT_FAILED,
    }
}

c_enum! {
    /// Event passed to an import's event callback.
    ImportEvent: u32 {
        Revoked = CMS_IMPORT_EVENT_REVOKED,
        /// Mapped again at the same addresses, new epoch.
        Remapped = CMS_IMPORT_EVENT_REMAPPED,
        LayoutChanged = CMS_IMPORT_EVENT_LAYOUT_CHANGED,
        Disconnected = CMS_IMPORT_EVENT_DISCONNECTED,
        Failed = CMS_IMPORT_EVENT_FAILED,
    }
}

c_enum! {
    /// Operation of a control request.
    ControlOp: u32 {
        Status = CMS_CONTROL_STATUS,
        Pause = CMS_CONTROL_PAUSE,
        Resume = CMS_CONTROL_RESUME,
    }
}

c_enum! {
    /// Phase of a control request: `Before` decides, `After` informs.
    ControlPhase: u32 {
        Before = CMS_CONTROL_BEFORE,
        After = CMS_CONTROL_AFTER,
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

/// Region flag: give the host backup buffers (or the DISK file's space) back after each resume.
pub const REGION_RELEASE_HOST: u64 = sys::CMS_REGION_RELEASE_HOST as u64;
/// Region flag (1.1): physical allocations shareable with other processes (POSIX fd handles).
pub const REGION_SHAREABLE: u64 = sys::CMS_REGION_SHAREABLE as u64;
/// Region flag (1.1): also request fabric handles (multi-node NVLink).
pub const REGION_SHAREABLE_FABRIC: u64 = sys::CMS_REGION_SHAREABLE_FABRIC as u64;
/// Region flag (1.1): a resume may back adjacent allocations with one physical handle.
pub const REGION_COALESCE: u64 = sys::CMS_REGION_COALESCE as u64;
/// Region flag (1.2): while paused, the region's address ranges stay mapped read-only to
/// zeros (a stray read gets zeros instead of faulting); costs zero-filled handles per device.
pub const REGION_GUARD: u64 = sys::CMS_REGION_GUARD as u64;
/// Region flag (1.2, `Policy::Host` only): host backups in pageable memory, never page-locked;
/// copies go through page-locked staging. Not combinable with `RESUME_ASYNC`; changeable with
/// [`Region::set_flags`](crate::Region::set_flags).
pub const REGION_HOST_PAGEABLE: u64 = sys::CMS_REGION_HOST_PAGEABLE as u64;
/// Region flag (1.2, with [`REGION_COALESCE`]): allocations carved from shared 64 MiB chunks
/// from the first one, so a first pause releases one handle per chunk; unused tails are held
/// ahead of need (`retained_bytes`).
pub const REGION_CHUNKS: u64 = sys::CMS_REGION_CHUNKS as u64;
/// Region flag (1.3, `Policy::Host` only, not with [`REGION_RELEASE_HOST`]): a background
/// thread of the library makes each allocation's host backup (page-locked) soon after the
/// allocation, so that the first pause only copies (`RegionStats::bytes_prepared`).
pub const REGION_PREPARE: u64 = sys::CMS_REGION_PREPARE as u64;
/// Region flag (1.3, `Policy::Host` or `Policy::Disk`): verified backups. A pause checksums the
/// content on the device, the resume checks the restored content and fails with
/// [`ErrorKind::VerifyFailed`](crate::ErrorKind::VerifyFailed), rolled back, on a mismatch. Changeable with
/// [`Region::set_flags`](crate::Region::set_flags); not combinable with `RESUME_ASYNC`.
pub const REGION_VERIFY: u64 = sys::CMS_REGION_VERIFY as u64;
/// `RegionInfo::handle_types` bit: POSIX file descriptor handles.
pub const HANDLE_TYPE_POSIX_FD: u32 = sys::CMS_HANDLE_TYPE_POSIX_FD as u32;
/// `RegionInfo::handle_types` bit: fabric handles.
pub const HANDLE_TYPE_FABRIC: u32 = sys::CMS_HANDLE_TYPE_FABRIC as u32;
/// Pause flag: the caller guarantees no GPU work uses the memory; skip the wait.
pub const PAUSE_NO_SYNC: u64 = sys::CMS_PAUSE_NO_SYNC as u64;
/// Resume flag: return once mapped; the restore is ordered before `ResumeOptions::stream`.
pub const RESUME_ASYNC: u64 = sys::CMS_RESUME_ASYNC as u64;
/// Import flag: ask for read-only access.
pub const IMPORT_READ_ONLY: u64 = sys::CMS_IMPORT_READ_ONLY as u64;
/// Control flag: without a handler, act on every pause/resume request.
pub const CONTROL_ALLOW_ALL: u64 = sys::CMS_CONTROL_ALLOW_ALL as u64;
/// Entries of [`RegionStats::failures_by_status`] (1.2).
pub const STATS_STATUS_SLOTS: usize = sys::CMS_STATS_STATUS_SLOTS as usize;
/// Longest tag in bytes.
pub const TAG_MAX: usize = sys::CMS_TAG_MAX as usize;
/// Deepest per-thread stack of hook regions.
pub const HOOK_DEPTH_MAX: usize = sys::CMS_HOOK_DEPTH_MAX as usize;

/// Options of a region (`cms_region_options`), plus the DISK directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionOptions {
    /// CUDA device ordinal.
    pub device: i32,
    pub policy: Policy,
    /// `REGION_*` flags.
    pub flags: u64,
    /// For [`Policy::Disk`]: the directory of the region's file, set right after the
    /// region is created (`cms_region_disk_dir_set`).
    pub disk_dir: Option<std::path::PathBuf>,
}

impl RegionOptions {
    /// Device 0, this policy, no flags.
    pub fn with_policy(policy: Policy) -> RegionOptions {
        RegionOptions {
            policy,
            ..RegionOptions::default()
        }
    }
    /// A DISK region on device 0 keeping its content in `dir` while paused.
    pub fn disk<P: AsRef<std::path::Path>>(dir: P) -> RegionOptions {
        RegionOptions {
            policy: Policy::Disk,
            disk_dir: Some(dir.as_ref().to_path_buf()),
            ..RegionOptions::default()
        }
    }
    /// Sets the device.
    pub fn device(mut self, device: i32) -> RegionOptions {
        self.device = device;
        self
    }
    /// Adds `REGION_*` flags.
    pub fn flags(mut self, flags: u64) -> RegionOptions {
        self.flags |= flags;
        self
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
    pub(crate) fn to_sys(self) -> sys::cms_pause_options {
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
    /// An asynchronous resume ordered before `stream` (`RESUME_ASYNC`).
    pub fn asynchronous(stream: u64) -> ResumeOptions {
        ResumeOptions {
            flags: RESUME_ASYNC,
            stream,
        }
    }
    pub(crate) fn to_sys(self) -> sys::cms_resume_options {
        let mut o = sys::cms_resume_options::default();
        o.flags = self.flags as _;
        o.stream = self.stream as _;
        o
    }
}

/// One device's part of a pause, resume or swap (`cms_device_result`, since 1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceResult {
    pub device: i32,
    /// `cms_status` of this device's step (0: OK).
    pub status: i32,
    pub regions: u64,
    pub allocations: u64,
    /// Pause: physical bytes released; resume: bytes created and mapped.
    pub bytes: u64,
    /// Pause: bytes copied to backups; resume: bytes restored.
    pub bytes_copied: u64,
    pub elapsed_ns: u64,
}

fn device_results(n: u32, r: &[sys::cms_device_result]) -> Vec<DeviceResult> {
    r.iter()
        .take(n as usize)
        .map(|d| DeviceResult {
            device: d.device as i32,
            status: d.status as i32,
            regions: d.regions as u64,
            allocations: d.allocations as u64,
            bytes: d.bytes as u64,
            bytes_copied: d.bytes_copied as u64,
            elapsed_ns: d.elapsed_ns as u64,
        })
        .collect()
}

/// What a pause did (`cms_pause_result`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PauseResult {
    pub regions: u64,
    pub allocations: u64,
    /// Physical bytes released to the driver.
    pub bytes_released: u64,
    /// Bytes copied to host backups (DISK: written to files).
    pub bytes_backed_up: u64,
    /// The driver's free memory before and after (summed over the devices touched).
    pub driver_free_before: u64,
    pub driver_free_after: u64,
    pub elapsed_ns: u64,
    /// One entry per device the call worked on (since 1.1).
    pub devices: Vec<DeviceResult>,
}

impl PauseResult {
    pub(crate) fn from_sys(r: &sys::cms_pause_result) -> PauseResult {
        PauseResult {
            regions: r.regions as u64,
            allocations: r.allocations as u64,
            bytes_released: r.bytes_released as u64,
            bytes_backed_up: r.bytes_backed_up as u64,
            driver_free_before: r.driver_free_before as u64,
            driver_free_after: r.driver_free_after as u64,
            elapsed_ns: r.elapsed_ns as u64,
            devices: device_results(r.devices as u32, &r.device_results),
        }
    }
}

/// What a resume did (`cms_resume_result`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResumeResult {
    pub regions: u64,
    pub allocations: u64,
    /// Physical bytes created and mapped.
    pub bytes_backed: u64,
    /// Bytes copied back from host backups.
    pub bytes_restored: u64,
    pub elapsed_ns: u64,
    /// One entry per device the call worked on (since 1.1).
    pub devices: Vec<DeviceResult>,
}

impl ResumeResult {
    pub(crate) fn from_sys(r: &sys::cms_resume_result) -> ResumeResult {
        ResumeResult {
            regions: r.regions as u64,
            allocations: r.allocations as u64,
            bytes_backed: r.bytes_backed as u64,
            bytes_restored: r.bytes_restored as u64,
            elapsed_ns: r.elapsed_ns as u64,
            devices: device_results(r.devices as u32, &r.device_results),
        }
    }
}

/// The driver's view of a device's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryInfo {
    pub free: u64,
    pub total: u64,
}

/// Identity of a region inside its context: compares a [`Region`](crate::Region) with
/// what [`Context::find_region`](crate::Context::find_region) and
/// [`PointerInfo::region`] report, without touching the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionId(pub(crate) usize);

/// The allocation containing a pointer (`cms_pointer_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The owning region.
    pub region: RegionId,
}

/// Where an allocation's backup is (`cms_backup_info`, since 1.2; [`Context::backup`](crate::Context::backup)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// The allocation's base.
    pub base: u64,
    /// The allocation's size = the backup's size.
    pub size: u64,
    /// Host address of the backup's byte 0 (`host + (ptr - base)` is the byte of `ptr`); 0
    /// when not in host memory (DISK: [`Context::backup_read`](crate::Context::backup_read)). Valid until the region's
    /// next pause, its next resume that does not retain, a free of the allocation,
    /// [`Region::set_flags`](crate::Region::set_flags) or the region's destroy.
    pub host: usize,
    pub policy: Policy,
    /// `true`: the region is paused and the backup is the content (`CMS_BACKUP_CURRENT`);
    /// `false`: a copy kept by retention, as of the last pause (`CMS_BACKUP_RETAINED`).
    pub current: bool,
}

/// A snapshot of a region (`cms_region_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Bytes of content saved in host backups or the DISK file (while paused).
    pub backup_bytes: u64,
    /// Bumped by every successful resume.
    pub epoch: u64,
    pub granularity: u64,
    /// Host memory held by backup buffers.
    pub host_bytes: u64,
    /// An async resume's restore copies may still run.
    pub restore_pending: bool,
    /// `HANDLE_TYPE_*` bits of the physical allocations (0: not shareable; since 1.1).
    pub handle_types: u32,
    /// Peer devices with access (bit d: device d; since 1.1).
    pub peer_device_mask: u64,
    /// Bytes of `host_bytes` page-locked with `cuMemHostRegister` (since 1.1).
    pub pinned_bytes: u64,
    /// Device bytes of freed allocations still held in handles shared with live
    /// neighbours (since 1.1).
    pub retained_bytes: u64,
    /// Frozen: its memory is read-only ([`Region::freeze`](crate::Region::freeze); since 1.3).
    pub frozen: bool,
}

/// Identity and cumulative counters of a region since its creation (`cms_region_stats`,
/// since 1.2): [`Region::stats`](crate::Region::stats), [`Context::regions`](crate::Context::regions).
/// A pause (resume) is a committed transition of the region to paused (active); a call
/// that skips the region, already in the target state, counts nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionStats {
    pub tag: String,
    pub device: i32,
    pub policy: Policy,
    /// State when read.
    pub state: State,
    /// Creation number, unique in its context, ascending (not a [`RegionId`]).
    pub region_id: u64,
    /// Committed pauses (`cms_pause`, `cms_region_pause`, the pause side of `cms_swap`).
    pub pauses: u64,
    /// Committed resumes.
    pub resumes: u64,
    /// Of `pauses + resumes`, those made by `cms_swap`.
    pub swaps: u64,
    /// Failed pause, resume and swap calls that were to change this region.
    pub failures: u64,
    /// Failures by status: entry k counts status -k; entry 0 the statuses below
    /// `-(STATS_STATUS_SLOTS - 1)`. See [`RegionStats::failures_of`].
    pub failures_by_status: [u64; STATS_STATUS_SLOTS],
    /// Physical bytes released by its pauses (`cuMemRelease`).
    pub bytes_released: u64,
    /// Physical bytes created and mapped by its resumes.
    pub bytes_backed: u64,
    /// Content bytes its pauses copied to its store (HOST, DISK).
    pub bytes_to_store: u64,
    /// Content bytes its resumes copied back from its store.
    pub bytes_from_store: u64,
    /// Nanoseconds of its device's work in the calls that paused it (not divided among
    /// the regions of a call).
    pub pause_ns: u64,
    /// Nanoseconds of its device's work in the calls that resumed it.
    pub resume_ns: u64,
    /// Since 1.3 (`REGION_PREPARE`): bytes of host backups made ahead by the background
    /// preparation that became backups of its allocations.
    pub bytes_prepared: u64,
    /// Since 1.3: nanoseconds the background thread spent making host backups for it.
    pub prepare_ns: u64,
    /// (1.3, [`REGION_VERIFY`]) Content bytes its resumes checked against the checksum of
    /// the pause before.
    pub bytes_verified: u64,
    /// (1.3) Nanoseconds its device spent checksumming in the calls that paused or resumed it.
    pub verify_ns: u64,
    /// Content bytes its pauses did not copy because the region was frozen and its
    /// backup still held them (since 1.3; not in `bytes_to_store`).
    pub bytes_unchanged: u64,
}

impl RegionStats {
    /// Failed calls that ended with `status` (a negative `cms_status`: a
    /// [`status`](crate::status) constant or [`ErrorKind::status`](crate::ErrorKind::status));
    /// the statuses below `-(STATS_STATUS_SLOTS - 1)` share one count; 0 for a status >= 0.
    pub fn failures_of(&self, status: i32) -> u64 {
        if status >= 0 {
            0
        } else if status <= -(STATS_STATUS_SLOTS as i32) {
            self.failures_by_status[0]
        } else {
            self.failures_by_status[(-status) as usize]
        }
    }

    pub(crate) fn from_sys(s: &sys::cms_region_stats) -> RegionStats {
        let mut by_status = [0u64; STATS_STATUS_SLOTS];
        for (d, v) in by_status.iter_mut().zip(s.failures_by_status.iter()) {
            *d = *v as u64;
        }
        RegionStats {
            tag: crate::c_tag(&s.tag),
            device: s.device as i32,
            policy: Policy::from_raw(s.policy as u32),
            state: State::from_raw(s.state as u32),
            region_id: s.region_id as u64,
            pauses: s.pauses as u64,
            resumes: s.resumes as u64,
            swaps: s.swaps as u64,
            failures: s.failures as u64,
            failures_by_status: by_status,
            bytes_released: s.bytes_released as u64,
            bytes_backed: s.bytes_backed as u64,
            bytes_to_store: s.bytes_to_store as u64,
            bytes_from_store: s.bytes_from_store as u64,
            pause_ns: s.pause_ns as u64,
            resume_ns: s.resume_ns as u64,
            bytes_prepared: s.bytes_prepared as u64,
            prepare_ns: s.prepare_ns as u64,
            bytes_verified: s.bytes_verified as u64,
            verify_ns: s.verify_ns as u64,
            bytes_unchanged: s.bytes_unchanged as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{status, ErrorKind};

    // A unit test: `RegionStats` is #[non_exhaustive], so only this crate can make one
    // that is not read from a region (here from the C struct, as `Region::stats` does).
    #[test]
    fn failures_of_reads_the_entry_of_a_status() {
        let mut c = sys::cms_region_stats::default();
        c.failures = 14;
        c.failures_by_status[0] = 7; // statuses below -(STATS_STATUS_SLOTS - 1)
        c.failures_by_status[(-status::OUT_OF_DEVICE_MEMORY) as usize] = 2;
        c.failures_by_status[STATS_STATUS_SLOTS - 1] = 5;
        let s = RegionStats::from_sys(&c);
        assert_eq!(s.failures, 14);
        assert_eq!(s.failures_of(ErrorKind::OutOfDeviceMemory.status()), 2);
        assert_eq!(s.failures_of(status::ALREADY_PAUSED), 0);
        assert_eq!(s.failures_of(-(STATS_STATUS_SLOTS as i32 - 1)), 5);
        assert_eq!(s.failures_of(-(STATS_STATUS_SLOTS as i32)), 7);
        assert_eq!(s.failures_of(-1000), 7);
        assert_eq!(s.failures_of(status::OK), 0);
        assert_eq!(s.failures_of(3), 0);
    }
}
