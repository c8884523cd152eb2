# SPDX-License-Identifier: MIT
"""cumemsaver: release GPU memory and take it back at the same virtual addresses.

Pure-Python ctypes bindings for libcumemsaver.so.1. The library is loaded on first use (the
one `pip install` bundles, else CUMEMSAVER_LIBRARY, else pkg-config's libdir, else the system
loader). Without a GPU, Context(driver_path=SIMULATION) (or CMS_DRIVER_LIBRARY=sim) runs on
the host simulation installed with the library. Every status raises
its own subclass of CumemsaverError, importable from here (ERRORS maps status to class).
"""

from ._needs_torch import NeedsPyTorch  # noqa: F401
from .api import (  # noqa: F401
    ERRORS,
    SIMULATION,
    AlreadyPaused,
    BackupInfo,
    Context,
    CumemsaverError,
    DeviceMemoryInfo,
    DeviceResult,
    Disconnected,
    DriverError,
    Exists,
    Forked,
    InternalError,
    InvalidArgument,
    InvalidDevice,
    IOFailure,
    LayoutChanged,
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
    PeerTimeout,
    PermissionDenied,
    PointerInfo,
    Policy,
    ProtocolError,
    REGION_VERIFY,
    Refused,
    Region,
    RegionFrozen,
    RegionInfo,
    RegionPaused,
    RegionStats,
    ResumeResult,
    RollbackFailed,
    State,
    StructSizeError,
    VerifyFailed,
    last_error,
    last_error_message,
    log_to_logging,
    logger,
    status_name,
    status_string,
    version,
    version_number,
    version_string,
    version_tuple,
)

from .hooks import (  # noqa: F401
    HookContext,
    hook_alloc,
    hook_free,
    hook_memory_margin_set,
    hook_region_current,
    hook_region_default,
    hook_region_default_set,
    hook_region_default_template_set,
    hook_region_pop,
    hook_region_push,
    torch_alloc,
    torch_free,
)
from .ipc import (  # noqa: F401
    Access,
    ControlOp,
    ControlPhase,
    ControlRequest,
    ControlSocket,
    Exporter,
    Import,
    ImportEvent,
    ImportInfo,
    ImportState,
)

__version__ = "1.3.0"
