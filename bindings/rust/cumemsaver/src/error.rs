// SPDX-License-Identifier: MIT
//! Errors: [`ErrorKind`] (one variant per `cms_status`) and [`Error`] (kind + message).

use crate::sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;
use std::ptr;

pub(crate) fn c_str_static(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // The library returns static strings for names, descriptions and the version.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// `cms_status_name`: "CMS_OK", "CMS_ERR_NOT_FOUND", ..., "CMS_ERR_UNKNOWN_STATUS".
pub fn status_name(status: i32) -> &'static str {
    c_str_static(unsafe { sys::cms_status_name(status as _) })
}

/// `cms_status_string`: a one-line English description of a status.
pub fn status_string(status: i32) -> &'static str {
    c_str_static(unsafe { sys::cms_status_string(status as _) })
}

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

macro_rules! error_kinds {
    ($($(#[$doc:meta])* $kind:ident = $c:ident / $short:ident,)*) => {
        /// What went wrong: one variant per error status (`cms_status`, `CMS_ERR_*`).
        /// `Other` carries a status this crate does not know (from a newer library).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $($(#[$doc])* $kind,)*
            /// A status number this crate does not know.
            Other(i32),
        }

        impl ErrorKind {
            /// The kind of a (negative) status number.
            pub fn from_status(status: i32) -> ErrorKind {
                $(if status == sys::$c as i32 {
                    return ErrorKind::$kind;
                })*
                ErrorKind::Other(status)
            }
            /// The `cms_status` number.
            pub fn status(self) -> i32 {
                match self {
                    $(ErrorKind::$kind => sys::$c as i32,)*
                    ErrorKind::Other(s) => s,
                }
            }
        }

        /// Status numbers (`cms_status`): 0 is OK, errors are negative and never renumbered.
        pub mod status {
            use crate::sys;
            pub const OK: i32 = sys::CMS_OK as i32;
            $(pub const $short: i32 = sys::$c as i32;)*
        }
    };
}

// To add a status: append it here (the name of its constant in ffi.rs).
error_kinds! {
    /// An argument is NULL, zero, out of range or has unknown flag bits.
    InvalidArgument = CMS_ERR_INVALID_ARGUMENT / INVALID_ARGUMENT,
    /// The driver library cannot be loaded or initialised.
    NoDriver = CMS_ERR_NO_DRIVER / NO_DRIVER,
    /// A driver call failed.
    Driver = CMS_ERR_DRIVER / DRIVER,
    OutOfDeviceMemory = CMS_ERR_OUT_OF_DEVICE_MEMORY / OUT_OF_DEVICE_MEMORY,
    OutOfHostMemory = CMS_ERR_OUT_OF_HOST_MEMORY / OUT_OF_HOST_MEMORY,
    /// No region with this tag, or a pointer in no allocation.
    NotFound = CMS_ERR_NOT_FOUND / NOT_FOUND,
    Exists = CMS_ERR_EXISTS / EXISTS,
    AlreadyPaused = CMS_ERR_ALREADY_PAUSED / ALREADY_PAUSED,
    NotPaused = CMS_ERR_NOT_PAUSED / NOT_PAUSED,
    /// The operation needs an active region.
    Paused = CMS_ERR_PAUSED / PAUSED,
    InvalidDevice = CMS_ERR_INVALID_DEVICE / INVALID_DEVICE,
    NotSupported = CMS_ERR_NOT_SUPPORTED / NOT_SUPPORTED,
    StructSize = CMS_ERR_STRUCT_SIZE / STRUCT_SIZE,
    NotBase = CMS_ERR_NOT_BASE / NOT_BASE,
    RollbackFailed = CMS_ERR_ROLLBACK_FAILED / ROLLBACK_FAILED,
    NoDevice = CMS_ERR_NO_DEVICE / NO_DEVICE,
    Internal = CMS_ERR_INTERNAL / INTERNAL,
    Forked = CMS_ERR_FORKED / FORKED,
    Protocol = CMS_ERR_PROTOCOL / PROTOCOL,
    Permission = CMS_ERR_PERMISSION / PERMISSION,
    Timeout = CMS_ERR_TIMEOUT / TIMEOUT,
    Disconnected = CMS_ERR_DISCONNECTED / DISCONNECTED,
    LayoutChanged = CMS_ERR_LAYOUT_CHANGED / LAYOUT_CHANGED,
    Refused = CMS_ERR_REFUSED / REFUSED,
    Io = CMS_ERR_IO / IO,
    /// The region is frozen (read-only): thaw it first (since 1.3).
    Frozen = CMS_ERR_FROZEN / FROZEN,
    /// (1.3) A verified region's restored content differs from what its pause checksummed.
    VerifyFailed = CMS_ERR_VERIFY_FAILED / VERIFY_FAILED,
}

impl ErrorKind {
    /// `cms_status_name` of the kind, e.g. "CMS_ERR_NOT_FOUND".
    pub fn name(self) -> &'static str {
        status_name(self.status())
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), status_string(self.status()))
    }
}

/// A failed call: its [`ErrorKind`] and the library's message for that call
/// (`cms_last_error`, read on the calling thread right after the call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// Builds the error of a call that just returned `status`, reading the calling
    /// thread's last-error message. Call it on the thread of the failed call, before any
    /// other library call.
    pub fn from_status(status: i32) -> Error {
        Error {
            kind: ErrorKind::from_status(status),
            message: last_error_message(),
        }
    }

    /// An error made by this crate (not by the library), with its own message.
    pub fn new(kind: ErrorKind, message: &str) -> Error {
        Error {
            kind,
            message: message.to_string(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The `cms_status` number (negative).
    pub fn status(&self) -> i32 {
        self.kind.status()
    }
    /// `cms_status_name(status)`, e.g. "CMS_ERR_NOT_FOUND".
    pub fn name(&self) -> &'static str {
        status_name(self.status())
    }
    /// The library's message for the failed call (may be empty).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Error {
        Error {
            kind,
            message: String::new(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: {}", self.name(), self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` of this crate.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn check(st: sys::cms_status) -> Result<()> {
    let st = st as i32;
    if st == status::OK {
        Ok(())
    } else {
        Err(Error::from_status(st))
    }
}
