# SPDX-License-Identifier: MIT
"""cumemsaver: release GPU memory and take it back at the same virtual addresses.

Pure-Python ctypes bindings for libcumemsaver.so.1. The library is loaded on first use
(CUMEMSAVER_LIBRARY, else pkg-config's libdir, else the system loader).
"""

from .api import (  # noqa: F401
    ERRORS,
    AlreadyPaused,
    Context,
    CumemsaverError,
    DeviceMemoryInfo,
    DeviceResult,
    DriverError,
    Exists,
    Forked,
    InternalError,
    InvalidArgument,
    InvalidDevice,
    LogLevel,
    NoDevice,
    NoDriver,
    NotBase,
    NotFound,
    NotPaused,
    NotSupported,
    OutOfDeviceMemory,
    OutOfHostMemory,
    PauseResult,
    PointerInfo,
    Policy,
    Region,
    RegionInfo,
    RegionPaused,
    RegionStats,
    ResumeResult,
    RollbackFailed,
    State,
    StructSizeError,
    last_error_message,
    status_name,
    status_string,
    version,
    version_string,
    version_tuple,
)

__version__ = "1.2.0"
