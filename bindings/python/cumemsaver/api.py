# SPDX-License-Identifier: MIT
"""Idiomatic Python layer over the ctypes mirror in _lib.py."""

import contextlib
import ctypes
import enum
import logging
import operator
import os
import threading
import weakref
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    Union,
)

from . import _lib as L

if TYPE_CHECKING:  # for the annotations only (ipc and hooks import this module)
    from .hooks import HookContext
    from .ipc import ControlSocket, Exporter, Import

Tag = str  # tags are text: str only (UTF-8 in C), never bytes
PathLike = Union[str, bytes, "os.PathLike[str]"]

# driver_path of the host simulation installed with the library (libcumemsaver-sim.so beside
# libcumemsaver.so.1: the one `pip install` bundles): Context(driver_path=SIMULATION), or
# CMS_DRIVER_LIBRARY=sim in the environment. No GPU needed; docs/simulation.md.
SIMULATION = "sim"

# The library's log lines (Context(log="logging")) and the errors of Python callbacks that
# cannot reach the caller go to this logger. A library adds no handler of its own but a
# NullHandler (the application configures logging).
logger = logging.getLogger("cumemsaver")
logger.addHandler(logging.NullHandler())

_U64_MAX = (1 << 64) - 1


# ---- Enums -------------------------------------------------------------------


class Policy(enum.IntEnum):
    """Restore policy of a region: what content survives a pause."""

    DISCARD = L.CMS_POLICY_DISCARD
    ZERO = L.CMS_POLICY_ZERO
    HOST = L.CMS_POLICY_HOST
    DISK = L.CMS_POLICY_DISK  # since 1.1: set the directory with cms_region_disk_dir_set


class State(enum.IntEnum):
    ACTIVE = L.CMS_STATE_ACTIVE
    PAUSED = L.CMS_STATE_PAUSED


class LogLevel(enum.IntEnum):
    ERROR = L.CMS_LOG_ERROR
    WARN = L.CMS_LOG_WARN
    INFO = L.CMS_LOG_INFO
    DEBUG = L.CMS_LOG_DEBUG


_PY_LEVELS = {
    L.CMS_LOG_ERROR: logging.ERROR,
    L.CMS_LOG_WARN: logging.WARNING,
    L.CMS_LOG_INFO: logging.INFO,
    L.CMS_LOG_DEBUG: logging.DEBUG,
}


def log_to_logging(level: int, message: str) -> None:
    """A log callback for Context(log=...) that passes the library's lines to the logger
    "cumemsaver" (CMS_LOG_ERROR -> logging.ERROR, WARN -> WARNING, INFO, DEBUG).
    Context(log="logging") uses it."""
    logger.log(_PY_LEVELS.get(level, logging.DEBUG), "%s", message)


def _level_of_logger() -> int:
    """The highest CMS_LOG_* level the "cumemsaver" logger would emit now."""
    for cms_level in (L.CMS_LOG_DEBUG, L.CMS_LOG_INFO, L.CMS_LOG_WARN):
        if logger.isEnabledFor(_PY_LEVELS[cms_level]):
            return cms_level
    return L.CMS_LOG_ERROR


def _enum_or_int(cls, value):
    try:
        return cls(value)
    except ValueError:  # a value from a newer library
        return value


# ---- Errors ------------------------------------------------------------------


class CumemsaverError(Exception):
    """A call returned a non-OK status. The base class of every status's exception.

    status  -- the cms_status number (negative)
    name    -- cms_status_name(status), e.g. "CMS_ERR_NOT_FOUND"
    message -- the library's message for the failed call (cms_last_error_message)
    function -- the C function that failed ("" when raised by Python code)

    Each subclass knows its own status, so a callback may raise one without arguments
    (raise cumemsaver.Refused) or with a message (raise cumemsaver.Refused(message="busy")).
    """

    status: int = L.CMS_ERR_INTERNAL

    def __init__(
        self,
        status: Optional[int] = None,
        name: Optional[str] = None,
        message: str = "",
        function: str = "",
    ):
        if status is None:
            status = type(self).status
        if name is None:
            name = L.STATUS_NAMES.get(status, f"CMS_STATUS_{status}")
        self.status = status
        self.name = name
        self.message = message
        self.function = function
        text = f"{name} ({status})"
        if function:
            text = f"{function}: {text}"
        if message:
            text += f": {message}"
        super().__init__(text)

    def __reduce__(self):
        # pickled with what __init__ takes (across processes: multiprocessing, torch.distributed)
        return (type(self), (self.status, self.name, self.message, self.function))


class InvalidArgument(CumemsaverError, ValueError):
    pass


class NoDriver(CumemsaverError):
    pass


class DriverError(CumemsaverError):
    pass


class OutOfDeviceMemory(CumemsaverError, MemoryError):
    pass


class OutOfHostMemory(CumemsaverError, MemoryError):
    pass


class NotFound(CumemsaverError, LookupError):
    pass


class Exists(CumemsaverError):
    pass


class AlreadyPaused(CumemsaverError):
    pass


class NotPaused(CumemsaverError):
    pass


class RegionPaused(CumemsaverError):
    """CMS_ERR_PAUSED: the operation needs an active region (alloc in a paused region)."""


class InvalidDevice(CumemsaverError):
    pass


class NotSupported(CumemsaverError):
    pass


class StructSizeError(CumemsaverError):
    pass


class NotBase(CumemsaverError):
    pass


class RollbackFailed(CumemsaverError):
    pass


class NoDevice(CumemsaverError):
    pass


class InternalError(CumemsaverError):
    pass


class Forked(CumemsaverError):
    pass


# Statuses of ABI 1.1 (IPC, docs/ipc.md).
class ProtocolError(CumemsaverError):
    """CMS_ERR_PROTOCOL: a peer's message is malformed or of an unsupported version."""


class PermissionDenied(CumemsaverError):
    """CMS_ERR_PERMISSION: the peer's uid is not allowed, or the exporter refused ours."""


class PeerTimeout(CumemsaverError):
    """CMS_ERR_TIMEOUT: a peer did not answer in time."""


class Disconnected(CumemsaverError):
    """CMS_ERR_DISCONNECTED: the peer closed its socket or exited."""


class LayoutChanged(CumemsaverError):
    """CMS_ERR_LAYOUT_CHANGED: the exporter's region no longer has the layout mapped."""


class Refused(CumemsaverError):
    """CMS_ERR_REFUSED: an importer or the control callback refused the request."""


class IOFailure(CumemsaverError):
    """CMS_ERR_IO: a system call on a socket or file failed."""


class RegionFrozen(CumemsaverError):
    """CMS_ERR_FROZEN: the region is frozen (read-only); thaw it first (since 1.3)."""


class VerifyFailed(CumemsaverError):
    """CMS_ERR_VERIFY_FAILED (since 1.3): a verified region's restored content differs from
    what its pause checksummed; the resume was rolled back (paused, backup kept)."""


ERRORS = {
    L.CMS_ERR_INVALID_ARGUMENT: InvalidArgument,
    L.CMS_ERR_NO_DRIVER: NoDriver,
    L.CMS_ERR_DRIVER: DriverError,
    L.CMS_ERR_OUT_OF_DEVICE_MEMORY: OutOfDeviceMemory,
    L.CMS_ERR_OUT_OF_HOST_MEMORY: OutOfHostMemory,
    L.CMS_ERR_NOT_FOUND: NotFound,
    L.CMS_ERR_EXISTS: Exists,
    L.CMS_ERR_ALREADY_PAUSED: AlreadyPaused,
    L.CMS_ERR_NOT_PAUSED: NotPaused,
    L.CMS_ERR_PAUSED: RegionPaused,
    L.CMS_ERR_INVALID_DEVICE: InvalidDevice,
    L.CMS_ERR_NOT_SUPPORTED: NotSupported,
    L.CMS_ERR_STRUCT_SIZE: StructSizeError,
    L.CMS_ERR_NOT_BASE: NotBase,
    L.CMS_ERR_ROLLBACK_FAILED: RollbackFailed,
    L.CMS_ERR_NO_DEVICE: NoDevice,
    L.CMS_ERR_INTERNAL: InternalError,
    L.CMS_ERR_FORKED: Forked,
    L.CMS_ERR_PROTOCOL: ProtocolError,
    L.CMS_ERR_PERMISSION: PermissionDenied,
    L.CMS_ERR_TIMEOUT: PeerTimeout,
    L.CMS_ERR_DISCONNECTED: Disconnected,
    L.CMS_ERR_LAYOUT_CHANGED: LayoutChanged,
    L.CMS_ERR_REFUSED: Refused,
    L.CMS_ERR_IO: IOFailure,
    L.CMS_ERR_FROZEN: RegionFrozen,
    L.CMS_ERR_VERIFY_FAILED: VerifyFailed,
}


for _status, _cls in ERRORS.items():
    _cls.status = _status
    # Raised and printed as cumemsaver.NoDriver, the name they are imported by (they stay
    # importable from cumemsaver.api too); pickle finds them there as well.
    _cls.__module__ = "cumemsaver"
del _status, _cls
CumemsaverError.__module__ = "cumemsaver"


def _decode(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def status_name(status: int) -> str:
    return _decode(L.lib().cms_status_name(status))


def status_string(status: int) -> str:
    return _decode(L.lib().cms_status_string(status))


def last_error() -> str:
    """The message of the calling thread's last failed call (cms_last_error, cut at 511
    bytes; "" before any failure), e.g. after torch_alloc returned 0. last_error_message
    reads the whole message."""
    return _decode(L.lib().cms_last_error())


def last_error_message() -> str:
    """The calling thread's last error message ("" before any failure)."""
    lib = L.lib()
    n = lib.cms_last_error_message(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.cms_last_error_message(buf, n + 1)
    return _decode(buf.value)


def error_for(status: int, function: str = "") -> CumemsaverError:
    """The exception for status; reads the thread's message, so call it right after the
    failing call on the same thread (the raising helpers below do)."""
    message = last_error_message()
    cls = ERRORS.get(status, CumemsaverError)
    return cls(status, status_name(status), message, function)


def _check(status: int, function: str) -> None:
    if status != L.CMS_OK:
        raise error_for(status, function)


def _call(name: str, *args) -> None:
    _check(getattr(L.lib(), name)(*args), name)


def version() -> str:
    """The loaded library's version, "1.3.0" (cms_version_string)."""
    return _decode(L.lib().cms_version_string())


def version_string() -> str:
    """The same as version() (cms_version_string)."""
    return version()


def version_number() -> int:
    """cms_version(): (major << 16) | (minor << 8) | patch of the loaded library, to compare
    with _lib.CMS_VERSION_NUMBER."""
    return L.lib().cms_version()


def version_tuple() -> Tuple[int, int, int]:
    v = version_number()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


# ---- Argument helpers ------------------------------------------------------------
# ctypes would truncate a float, wrap an out-of-range integer, take True as 1 and cut a string
# at a NUL byte: every argument is checked here first. A wrong type raises TypeError, a value
# out of range ValueError, both naming the parameter.


def _index(value, what: str) -> int:
    """An integer argument through operator.index (int, IntEnum, numpy integers); bool,
    float, str and the rest raise TypeError."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None


def _ranged(value, what: str, lo: int, hi: int, kind: str) -> int:
    value = _index(value, what)
    if not lo <= value <= hi:
        raise ValueError(f"{what} must fit in {kind}, got {value}")
    return value


def _u64(value, what: str) -> int:
    return _ranged(value, what, 0, _U64_MAX, "64 unsigned bits")


def _u32(value, what: str) -> int:
    return _ranged(value, what, 0, (1 << 32) - 1, "32 unsigned bits")


def _i32(value, what: str) -> int:
    return _ranged(value, what, -(1 << 31), (1 << 31) - 1, "int32")


def _i64(value, what: str) -> int:
    return _ranged(value, what, -(1 << 63), (1 << 63) - 1, "int64")


def _enum_arg(cls, value, what: str):
    """An enumeration argument: a member of cls, its name as a str in any case ("host",
    "HOST"), or its number. Anything else raises before the library is called: TypeError
    for another type (float, bool, None), ValueError for an unknown name or number."""
    names = ", ".join(repr(m.name.lower()) for m in cls)
    an = "an" if cls.__name__[0] in "AEIOU" else "a"
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError(
                f"{what} must be {an} {cls.__name__} or one of {names}, not {value!r}"
            ) from None
    number = _index(value, what)
    try:
        return cls(number)
    except ValueError:
        numbers = ", ".join(str(int(m)) for m in cls)
        raise ValueError(
            f"{what} must be {an} {cls.__name__} or one of {names} ({numbers}), not {number}"
        ) from None


def _policy(value, what: str = "policy") -> "Policy":
    """A restore policy (Policy, its name, or its number), else TypeError / ValueError."""
    return _enum_arg(Policy, value, what)


def _bool(value, what: str) -> bool:
    """A switch argument: True or False only. 'no', 2.5, 1 or None raise TypeError (a
    non-empty string or any non-zero number would otherwise switch it on)."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
    return value


def _callback(fn, what: str):
    """A callback argument: a callable or None, else TypeError (a number or a string would
    be accepted and fail only when the library calls it, each time, logged)."""
    if fn is not None and not callable(fn):
        raise TypeError(f"{what} must be a callable or None, not {type(fn).__name__}")
    return fn


def _path(path: PathLike, what: str = "path") -> bytes:
    try:
        b = os.fsencode(path)
    except TypeError:
        raise TypeError(
            f"{what} must be a str, bytes or os.PathLike, not {type(path).__name__}"
        ) from None
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL byte")
    return b


def _status_of(exc: BaseException) -> int:
    """The status a Python callback's exception answers C with."""
    if isinstance(exc, CumemsaverError) and exc.status < 0:
        return exc.status
    return L.CMS_ERR_INTERNAL


def _tag(tag: Optional[Tag], what: str = "tag") -> Optional[bytes]:
    """A tag (str only: bytes, numbers and lists raise TypeError) as UTF-8; None stays None."""
    if tag is None:
        return None
    if not isinstance(tag, str):
        raise TypeError(f"{what} must be a str, not {type(tag).__name__}")
    b = tag.encode("utf-8")
    if b"\0" in b:
        # ctypes would cut the string at the NUL; never let a different tag reach C.
        raise ValueError(f"{what} contains a NUL byte")
    return b


# ---- Dataclasses ---------------------------------------------------------------


@dataclass(frozen=True)
class RegionInfo:
    tag: str
    device: int
    policy: Union[Policy, int]
    state: Union[State, int]
    flags: int
    allocations: int
    logical_bytes: int
    physical_bytes: int
    backed_bytes: int
    backup_bytes: int
    epoch: int
    granularity: int
    host_bytes: int
    restore_pending: bool
    peer_device_mask: int  # since 1.1: devices given access besides the region's own (mask)
    pinned_bytes: int  # since 1.1: bytes of host_bytes page-locked with cuMemHostRegister
    retained_bytes: int  # since 1.1: bytes of freed allocations kept in shared handles
    frozen: bool  # since 1.3: read-only (Region.freeze)

    @property
    def paused(self) -> bool:
        return self.state == State.PAUSED


@dataclass(frozen=True)
class BackupInfo:
    """Where an allocation's backup is (since 1.2: cms_backup_get). host: the address of its
    byte 0 in host memory (None for Policy.DISK: use Context.backup_read); valid until the
    region's next pause, its next resume that does not retain, a free of the allocation,
    Region.set_flags or the region's destroy. current: the region is paused and the backup
    is the content (CMS_BACKUP_CURRENT); else it is a retained copy of the last pause."""

    base: int
    size: int
    host: Optional[int]
    policy: Union[Policy, int]
    state: int  # CMS_BACKUP_CURRENT or CMS_BACKUP_RETAINED

    @property
    def current(self) -> bool:
        return self.state == L.CMS_BACKUP_CURRENT


@dataclass(frozen=True)
class RegionStats:
    """Identity and cumulative counters of a region (since 1.2: cms_region_stats)."""

    tag: str
    device: int
    policy: Union[Policy, int]
    state: Union[State, int]
    region_id: int
    pauses: int
    resumes: int
    swaps: int
    failures: int
    failures_by_status: Dict[str, int]  # status name -> failed calls (non-zero ones only)
    bytes_released: int
    bytes_backed: int
    bytes_to_store: int
    bytes_from_store: int
    pause_ns: int
    resume_ns: int
    # Since 1.3 (CMS_REGION_PREPARE): host backup bytes made ahead in the background that
    # became backups, and the background thread's nanoseconds making them (0 before 1.3).
    bytes_prepared: int = 0
    prepare_ns: int = 0
    bytes_verified: int = 0  # since 1.3: bytes its resumes checked (verify=True)
    verify_ns: int = 0  # since 1.3: its device's time checksumming, at pauses and resumes
    bytes_unchanged: int = 0  # since 1.3: not copied, a frozen region's backup held them


def _stats(c) -> RegionStats:
    by_status = {}
    for k, n in enumerate(c.failures_by_status):
        if n:
            by_status["other" if k == 0 else status_name(-k)] = n
    return _fields(
        c,
        RegionStats,
        tag=_decode(c.tag),
        policy=_enum_or_int(Policy, c.policy),
        state=_enum_or_int(State, c.state),
        failures_by_status=by_status,
    )


@dataclass(frozen=True)
class PointerInfo:
    region: "Region"
    base: int
    size: int
    offset: int
    physical_size: int
    device: int
    state: Union[State, int]


# Region flags (cms_region_options.flags: Context.region(flags=...), Region.set_flags), the
# ABI's CMS_REGION_* values, exported from cumemsaver. The keywords of Context.region set
# the first ones: release_host, shareable, coalesce, verify, prepare.
REGION_RELEASE_HOST = L.CMS_REGION_RELEASE_HOST  # host backups given back after each resume
REGION_SHAREABLE = L.CMS_REGION_SHAREABLE  # 1.1: exportable to other processes (docs/ipc.md)
REGION_SHAREABLE_FABRIC = L.CMS_REGION_SHAREABLE_FABRIC  # 1.1: also fabric handles
REGION_COALESCE = L.CMS_REGION_COALESCE  # 1.1: adjacent allocations share physical handles
REGION_GUARD = L.CMS_REGION_GUARD  # 1.2: paused ranges mapped read-only to zeros
REGION_HOST_PAGEABLE = L.CMS_REGION_HOST_PAGEABLE  # 1.2: pageable host backups (HOST)
# 1.2, with REGION_COALESCE: allocations carved from shared 64 MiB chunks from the first one.
REGION_CHUNKS = L.CMS_REGION_CHUNKS
# 1.3 (verify=True): checksums at pause, checked at resume (VerifyFailed on a mismatch).
REGION_VERIFY = L.CMS_REGION_VERIFY
# 1.3 (prepare=True): host backups made ahead by a background thread (HOST).
REGION_PREPARE = L.CMS_REGION_PREPARE
# BackupInfo.state (1.2)
BACKUP_CURRENT = L.CMS_BACKUP_CURRENT
BACKUP_RETAINED = L.CMS_BACKUP_RETAINED


@dataclass(frozen=True)
class DeviceResult:
    """One device's part of a pause or resume (cms_device_result, since 1.1)."""

    device: int
    status: int  # CMS_OK, or this device's own failure
    regions: int
    allocations: int
    bytes: int  # pause: released; resume: created and mapped
    bytes_copied: int  # pause: backed up; resume: restored
    elapsed_ns: int  # this device's work, without its waits for the others


@dataclass(frozen=True)
class PauseResult:
    regions: int
    allocations: int
    bytes_released: int
    bytes_backed_up: int
    driver_free_before: int
    driver_free_after: int
    elapsed_ns: int
    devices: int  # since 1.1: devices the call worked on (one worker thread each)
    failed_device: int  # -1, or on failure the first device whose own step failed
    device_results: Tuple[DeviceResult, ...]  # DeviceResult per device, ascending


@dataclass(frozen=True)
class ResumeResult:
    regions: int
    allocations: int
    bytes_backed: int
    bytes_restored: int
    elapsed_ns: int
    devices: int  # since 1.1, as in PauseResult
    failed_device: int
    device_results: Tuple[DeviceResult, ...]


@dataclass(frozen=True)
class DeviceMemoryInfo:
    free: int
    total: int


def _device_results(cstruct):
    n = min(cstruct.devices, len(cstruct.device_results))
    return tuple(
        DeviceResult(**{f: getattr(e, f) for f in DeviceResult.__dataclass_fields__})
        for e in cstruct.device_results[:n]
    )


def _fields(cstruct, cls, **override):
    if "device_results" in cls.__dataclass_fields__ and "device_results" not in override:
        override["device_results"] = _device_results(cstruct)
    names = [f for f in cls.__dataclass_fields__ if f not in override]
    return cls(**{n: getattr(cstruct, n) for n in names}, **override)


def _pause_args(stream, event, no_sync):
    opts = L.init_struct(L.cms_pause_options)
    opts.stream = _u64(stream, "stream")
    opts.event = _u64(event, "event")
    opts.flags = L.CMS_PAUSE_NO_SYNC if _bool(no_sync, "no_sync") else 0
    return opts, L.init_struct(L.cms_pause_result)


def _resume_args(async_stream):
    opts = L.init_struct(L.cms_resume_options)
    if async_stream is not None:
        opts.flags = L.CMS_RESUME_ASYNC
        opts.stream = _u64(async_stream, "async_stream")
    return opts, L.init_struct(L.cms_resume_result)


# ---- Context and Region --------------------------------------------------------


class Context:
    """A cumemsaver context (cms_context). Use as a context manager or call close().

    driver_path: driver library to load (None: $CMS_DRIVER_LIBRARY, else libcuda.so.1);
         SIMULATION ("sim") loads the host simulation installed with the library.
    log: callable(level: LogLevel, message: str) receiving the library's log lines up to
         log_level, or "logging" to pass them to the logger "cumemsaver" (log_to_logging;
         log_level then defaults to what that logger emits now). It runs on whatever thread
         calls into the library, with library locks held: it must not call back into
         cumemsaver. Exceptions it raises are swallowed. None: no callback (the library
         prints to stderr only when $CMS_LOG is set).
    log_level: the highest LogLevel passed to log (default LogLevel.WARN); a LogLevel, its
         name ("debug") or its number.

    Exporters, imports and control sockets of the context are closed by close() first.
    """

    def __init__(
        self,
        driver_path: Optional[PathLike] = None,
        log: Union[None, str, Callable[[int, str], None]] = None,
        log_level: Optional[int] = None,
    ):
        self._handle = None
        self._lock = threading.Lock()
        self._log_cb = None  # the CFUNCTYPE object: must live as long as the context
        self._callbacks: List[Any] = []  # progress CFUNCTYPEs: kept until close()
        self._children: "weakref.WeakSet[Any]" = weakref.WeakSet()  # exporters, imports, ...
        # The one Region object of each native region (by handle) while anything holds it:
        # find_region, pointer_info and the hooks return it, so destroy() through any of
        # them is seen by all. Lookups run under _regions_lock together with the call that
        # returned the handle, so a handle is never matched to a region destroyed meanwhile.
        self._regions: "weakref.WeakValueDictionary[int, Region]" = weakref.WeakValueDictionary()
        self._regions_lock = threading.RLock()
        if isinstance(log, str):
            if log != "logging":
                raise ValueError(f'log must be a callable, "logging" or None, not {log!r}')
            log = log_to_logging
            if log_level is None:
                log_level = _level_of_logger()
        elif log is not None and not callable(log):
            raise TypeError(f'log must be a callable, "logging" or None, not {type(log).__name__}')
        if log_level is None:
            log_level = LogLevel.WARN
        self._log = log
        opts = L.init_struct(L.cms_context_options)
        self._driver_path = None if driver_path is None else _path(driver_path, "driver_path")
        opts.driver_path = self._driver_path
        opts.log_level = _enum_arg(LogLevel, log_level, "log_level")
        if log is not None:

            def trampoline(_user, level, message, _log=log):
                try:
                    _log(_enum_or_int(LogLevel, level), _decode(message))
                except BaseException:  # never let an exception unwind into C
                    pass

            self._log_cb = L.cms_log_fn(trampoline)
            opts.log_fn = self._log_cb
        handle = L.cms_context_p()
        _call("cms_context_create", ctypes.byref(opts), ctypes.byref(handle))
        self._handle = handle

    # -- lifecycle
    @property
    def handle(self) -> int:
        """The raw cms_context * as an int (for other bindings)."""
        return self._h().value

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _h(self):
        if self._handle is None:
            raise ValueError("cumemsaver context is closed")
        return self._handle

    def close(self) -> None:
        """Destroys every region and allocation and the context. Idempotent. Waits for
        calls on its Region objects in flight on other threads; its Region objects raise
        ValueError from then on. On failure the context stays open with the regions not
        yet destroyed (retry close()); the Region objects of the destroyed ones raise."""
        with self._lock:
            if self._handle is None:
                return
            for child in list(self._children):  # each must go before the context
                child.close()
            with self._regions_lock:
                regions = list(self._regions.values())
            regions = [r for r in regions if r._begin_destroy(close=True)]
            status = L.lib().cms_context_destroy(self._handle)
            if status != L.CMS_OK:
                exc = error_for(status, "cms_context_destroy")  # before any other call
                for region in regions:
                    region._end_destroy(region._alive())
                raise exc
            self._handle = None
            self._callbacks.clear()
            for region in regions:
                region._end_destroy(False)

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            # keep_at_exit: left to process exit (cumemsaver.torch sets it at interpreter
            # exit, so that PyTorch's late frees still find the context).
            if self._handle is not None and not getattr(self, "keep_at_exit", False):
                # collected in one cycle with its exporters / imports / control sockets:
                # those must still go first
                for child in list(self._children):
                    child.close()
                L.lib().cms_context_destroy(self._handle)
                self._handle = None
        except Exception:
            pass

    def __repr__(self):
        return f"<cumemsaver.Context {'closed' if self.closed else hex(self.handle)}>"

    # -- regions
    def region(
        self,
        tag: Tag,
        device: int = 0,
        policy: Union[Policy, int, str] = Policy.DISCARD,
        release_host: bool = False,
        coalesce: bool = False,
        disk_dir: Optional[PathLike] = None,
        shareable: bool = False,
        flags: int = 0,
        prepare: bool = False,
        verify: bool = False,
    ) -> "Region":
        """Creates a region (cms_region_create). Raises Exists if (tag, device) is taken.

        coalesce=True sets CMS_REGION_COALESCE: a resume backs adjacent allocations with
        shared physical handles (far fewer driver calls for many allocations), and a free
        inside such a run keeps its device memory until the next pause (retained_bytes).
        disk_dir: for Policy.DISK, the directory of the region's file, set right after the
        region is created (cms_region_disk_dir_set); if that fails the region is destroyed
        again and the error raised. A DISK region needs it (or Region.set_disk_dir) before
        its first pause. shareable=True sets CMS_REGION_SHAREABLE (Exporter.publish needs
        it). flags: further CMS_REGION_* bits (e.g. CMS_REGION_SHAREABLE_FABRIC).
        prepare=True (since 1.3, Policy.HOST only, not with release_host) sets
        CMS_REGION_PREPARE: a background thread of the library makes each allocation's host
        backup (page-locked) soon after alloc(), so that the first pause only copies;
        Region.info().host_bytes / pinned_bytes and Region.stats().bytes_prepared show it.
        verify=True (since 1.3, HOST and DISK) sets CMS_REGION_VERIFY: each pause
        checksums the content on the device, each resume checks the restored content and
        raises VerifyFailed, rolled back, on a mismatch (Region.set_flags(REGION_VERIFY, 0)
        takes such a backup back as it is).
        policy: a Policy, its name in any case ("host"), or its number. tag: a str."""
        opts = L.init_struct(L.cms_region_options)
        opts.device = _i32(device, "device")
        opts.policy = _enum_arg(Policy, policy, "policy")
        opts.flags = _u64(flags, "flags")
        for on, bit, what in (
            (release_host, REGION_RELEASE_HOST, "release_host"),
            (coalesce, REGION_COALESCE, "coalesce"),
            (shareable, REGION_SHAREABLE, "shareable"),
            (prepare, REGION_PREPARE, "prepare"),
            (verify, REGION_VERIFY, "verify"),
        ):
            if _bool(on, what):
                opts.flags |= bit
        dir_bytes = None if disk_dir is None else _path(disk_dir, "disk_dir")
        out = L.cms_region_p()
        tag_bytes = _tag(tag)
        if tag_bytes is None:
            raise TypeError("tag must be a str, not NoneType")
        with self._regions_lock:
            _call("cms_region_create", self._h(), tag_bytes, ctypes.byref(opts), ctypes.byref(out))
            region = self._region_of(out.value, created=True)
            region._set_key(tag_bytes, opts.device)
        if dir_bytes is not None:
            try:
                _call("cms_region_disk_dir_set", out, dir_bytes)
            except CumemsaverError:
                try:
                    region.destroy()
                except CumemsaverError:
                    pass  # the region stays (find_region finds it); the first error is raised
                raise
        return region

    def _region_of(self, handle: Optional[int], created: bool = False) -> "Region":
        """The Region object of a native handle that a call made under _regions_lock just
        returned: the registered one, or a new one registered now. created: the call made
        the region, so a Region still registered at that address is of a region destroyed
        on another thread, whose destroy() has not yet unregistered it."""
        if not handle:
            raise ValueError("cumemsaver: no region handle (NULL)")
        with self._regions_lock:
            region = self._regions.get(handle)
            if region is None or region._handle is None or created:
                region = object.__new__(Region)
                region._setup(self, handle)
                self._regions[handle] = region
            return region

    def _forget(self, region: "Region", handle: int) -> None:
        """Drops a destroyed region from the registry (unless a new region took its address
        and its entry already)."""
        with self._regions_lock:
            if self._regions.get(handle) is region:
                del self._regions[handle]

    def find_region(self, tag: Tag, device: int = 0) -> "Region":
        """The region with this tag on this device (the same Region object every time while
        one is held, the one region() returned); raises NotFound."""
        out = L.cms_region_p()
        tag_bytes, device = _tag(tag), _i32(device, "device")
        with self._regions_lock:
            _call("cms_region_find", self._h(), tag_bytes, device, ctypes.byref(out))
            region = self._region_of(out.value)
            region._set_key(tag_bytes, device)
            return region

    # -- pause / resume
    def pause(
        self, tag: Optional[Tag] = None, stream: int = 0, event: int = 0, no_sync: bool = False
    ) -> PauseResult:
        """Pauses every active region with this tag (every tag when None)."""
        opts, res = _pause_args(stream, event, no_sync)
        _call("cms_pause", self._h(), _tag(tag), ctypes.byref(opts), ctypes.byref(res))
        return _fields(res, PauseResult)

    def resume(self, tag: Optional[Tag] = None, async_stream: Optional[int] = None) -> ResumeResult:
        """Resumes every paused region with this tag (every tag when None). async_stream: a
        CUstream (int, 0 = NULL stream) to order the restore before, with CMS_RESUME_ASYNC."""
        opts, res = _resume_args(async_stream)
        _call("cms_resume", self._h(), _tag(tag), ctypes.byref(opts), ctypes.byref(res))
        return _fields(res, ResumeResult)

    def swap(
        self,
        pause_tag: Tag,
        resume_tag: Tag,
        stream: int = 0,
        event: int = 0,
        no_sync: bool = False,
    ) -> Tuple[PauseResult, ResumeResult]:
        """Pauses every active region tagged pause_tag and resumes every paused region tagged
        resume_tag in one transactional call (cms_swap); returns what each side did.
        stream / event / no_sync wait for GPU work before the pause side, as in pause()."""
        popts, pres = _pause_args(stream, event, no_sync)
        ropts, rres = _resume_args(None)
        _call(
            "cms_swap",
            self._h(),
            _tag(pause_tag, "pause_tag"),
            _tag(resume_tag, "resume_tag"),
            ctypes.byref(popts),
            ctypes.byref(ropts),
            ctypes.byref(pres),
            ctypes.byref(rres),
        )
        return _fields(pres, PauseResult), _fields(rres, ResumeResult)

    def set_progress(self, fn: Optional[Callable[[str, int, int], None]]) -> None:
        """Sets the progress callback of later pauses, resumes and swaps of the context
        (cms_context_progress_set); None clears it. fn(op, done, total): op "pause",
        "resume" or "swap", done / total bytes of HOST content copied. It runs on the
        library's threads with region locks held: it may read pointer_info and
        device_memory_info but must not pause, resume, allocate, free, read region info or
        destroy. An exception it raises never reaches C: it is logged to the logger
        "cumemsaver" and the operation goes on. Anything but a callable or None raises
        TypeError, before the library is called."""
        if _callback(fn, "fn") is None:
            _call("cms_context_progress_set", self._h(), L.cms_progress_fn(), None)
            return

        def trampoline(_user, op, done, total, _fn=fn):
            try:
                _fn(_decode(op), done, total)
            except BaseException:  # never let an exception unwind into C
                logger.exception("cumemsaver: the progress callback raised")

        cb = L.cms_progress_fn(trampoline)
        with self._lock:
            _call("cms_context_progress_set", self._h(), cb, None)
            # an operation already running keeps the callback it started with
            self._callbacks.append(cb)

    # -- IPC, control socket and hooks (ipc.py, hooks.py)
    def exporter(
        self,
        path: PathLike,
        allowed_uids: Optional[List[int]] = None,
        revoke_timeout_ms: int = 0,
    ) -> "Exporter":
        """Listens on the Unix socket path for importers (cms_exporter_create); publish
        regions with Exporter.publish. See cumemsaver.ipc.Exporter."""
        from .ipc import Exporter

        return Exporter(self, path, allowed_uids, revoke_timeout_ms)

    def open_import(
        self,
        path: PathLike,
        tag: Tag,
        device: int = 0,
        exporter_device: int = -1,
        read_only: bool = False,
        allowed_uids: Optional[List[int]] = None,
        timeout_ms: int = 0,
        on_quiesce: Optional[Callable[[int], Optional[bool]]] = None,
        on_event: Optional[Callable[[Any, int], None]] = None,
        name: Optional[str] = None,
    ) -> "Import":
        """Maps the region tagged tag that the exporter at path publishes (cms_import_open).
        See cumemsaver.ipc.Import."""
        from .ipc import Import

        return Import(
            self,
            path,
            tag,
            device,
            exporter_device,
            read_only,
            allowed_uids,
            timeout_ms,
            on_quiesce,
            on_event,
            name,
        )

    def control_socket(
        self,
        path: PathLike,
        handler: Optional[Callable[[Any], Optional[bool]]] = None,
        allow_all: bool = False,
        allowed_uids: Optional[List[int]] = None,
    ) -> "ControlSocket":
        """Serves cmsctl --socket path (cms_control_create). See cumemsaver.ipc.ControlSocket."""
        from .ipc import ControlSocket

        return ControlSocket(self, path, handler, allow_all, allowed_uids)

    def hook_context(self) -> "HookContext":
        """Makes this the process-wide hook context (cms_hook_context_set) until the
        returned HookContext is closed. See cumemsaver.hooks.HookContext."""
        from .hooks import HookContext

        return HookContext(self)

    # -- pointers
    def regions(self) -> List[RegionStats]:
        """Every live region's identity and counters, in creation order (cms_region_list,
        since 1.2): copies, safe while other threads destroy regions."""
        while True:
            total = ctypes.c_size_t(0)
            _call("cms_region_list", self._h(), None, 0, None, ctypes.byref(total))
            cap = total.value + 4  # room for regions created meanwhile
            arr = (L.cms_region_stats * cap)()
            for e in arr:
                e.struct_size = ctypes.sizeof(L.cms_region_stats)
            written = ctypes.c_size_t(0)
            _call("cms_region_list", self._h(), arr, cap, ctypes.byref(written), ctypes.byref(total))
            if total.value <= cap:
                return [_stats(arr[i]) for i in range(written.value)]

    def free(self, ptr: int) -> None:
        """Frees the allocation whose base is ptr (cms_free); ptr 0 does nothing (since
        1.3, as free(NULL) and cudaFree(0))."""
        _call("cms_free", self._h(), _u64(ptr, "ptr"))

    def range_discard(self, ptr: int, size: int) -> None:
        """Declares [ptr, ptr + size) of one live allocation content-free (cms_range_discard,
        ABI 1.2): the next pause of its region does not copy those bytes (HOST, DISK) and the
        resume after it does not restore them. The declaration ends at that resume, at
        range_keep over the bytes, or at the free: call range_keep before writing bytes
        that must survive. Raises NotFound, InvalidArgument (size 0, overflow, past the
        allocation's end) or Paused (region paused)."""
        _call("cms_range_discard", self._h(), _u64(ptr, "ptr"), _u64(size, "size"))

    def range_keep(self, ptr: int, size: int) -> None:
        """Ends the range_discard declarations over [ptr, ptr + size) (cms_range_keep)."""
        _call("cms_range_keep", self._h(), _u64(ptr, "ptr"), _u64(size, "size"))

    def pointer_info(self, ptr: int) -> PointerInfo:
        """The allocation containing ptr; raises NotFound if it is not ours."""
        info = L.init_struct(L.cms_pointer_info)
        ptr = _u64(ptr, "ptr")
        with self._regions_lock:
            _call("cms_pointer_info_get", self._h(), ptr, ctypes.byref(info))
            region = self._region_of(info.region)
        return _fields(info, PointerInfo, region=region, state=_enum_or_int(State, info.state))

    def backup(self, ptr: int) -> BackupInfo:
        """Where the backup of the allocation containing ptr is (cms_backup_get, since 1.2).
        Raises NotFound, NotSupported (DISCARD, ZERO), NotPaused (no backup now)."""
        info = L.init_struct(L.cms_backup_info)
        _call("cms_backup_get", self._h(), _u64(ptr, "ptr"), ctypes.byref(info))
        return BackupInfo(
            base=info.base,
            size=info.size,
            host=info.host or None,
            policy=_enum_or_int(Policy, info.policy),
            state=info.state,
        )

    def backup_read(self, ptr: int, length: int, out=None):
        """The length bytes of the backup from the byte that backs ptr (cms_backup_read,
        since 1.2: a memcpy from host memory, or a read of a DISK region's file), as bytes,
        like a file's read(). With out (a writable contiguous buffer of at least length bytes:
        a bytearray, memoryview, numpy array, mmap) they are read into out, which is returned,
        like readinto(): no copy, the way for large reads. ptr + length must stay inside the
        allocation. Raises as backup, InvalidArgument for a range past the allocation's end,
        TypeError naming out for an out that is no buffer or not a contiguous one, ValueError
        for a read-only or short one."""
        length, ptr = _u64(length, "length"), _u64(ptr, "ptr")
        if out is None:
            # (never NULL: length 0 still checks ptr, and C refuses a NULL buffer)
            buf = ctypes.create_string_buffer(max(length, 1))
            _call("cms_backup_read", self._h(), ptr, buf, length)
            return buf.raw if length else b""
        try:
            view = memoryview(out).cast("B")
        except TypeError as e:  # not a buffer, or not a contiguous one (a view [::2])
            raise TypeError(
                f"out must be a writable contiguous buffer (bytearray, memoryview, numpy "
                f"array, mmap), not this {type(out).__name__} ({e})"
            ) from None
        if view.readonly or view.nbytes < length:
            raise ValueError(f"out must be a writable buffer of at least {length} bytes")
        if view.nbytes:
            buf = (ctypes.c_char * view.nbytes).from_buffer(view)
        else:
            buf = ctypes.create_string_buffer(1)
        _call("cms_backup_read", self._h(), ptr, buf, length)
        return out

    def device_memory_info(self, device: int = 0) -> DeviceMemoryInfo:
        """The driver's free/total bytes on device (cuMemGetInfo)."""
        free, total = ctypes.c_uint64(), ctypes.c_uint64()
        _call(
            "cms_device_memory_info",
            self._h(),
            _i32(device, "device"),
            ctypes.byref(free),
            ctypes.byref(total),
        )
        return DeviceMemoryInfo(free.value, total.value)


class Region:
    """A region (cms_region *), owned by its Context. There is one Region object per native
    region: Context.region, find_region, pointer_info(p).region and the hooks return the
    same object (Region(context, handle) too), so destroy() through any name of it is seen
    by all. Once the region is destroyed (destroy(), or Context.close()) every method raises
    ValueError without calling the library. A method running on another thread finishes
    before destroy() or Context.close() calls the library; a method called while a destroy
    is in progress raises ValueError. As a context manager (with ctx.region(...) as r:) it
    destroys the region on exit."""

    _ctx: Context
    _handle: Optional[int]

    def __new__(cls, context: Context, handle: int) -> "Region":
        """The Region of a raw handle (an int from another binding): the context's object
        for it. The handle must be a live region of context."""
        if not isinstance(context, Context):
            raise TypeError(f"context must be a Context, not {type(context).__name__}")
        return context._region_of(_u64(handle, "handle"))

    def _setup(self, context: Context, handle: int) -> None:
        self._ctx = context
        self._handle = handle
        self._name = hex(handle)  # its tag once known, for messages after it is gone
        self._cond = threading.Condition(threading.Lock())
        self._users = 0  # calls in flight on other threads
        self._destroying = False
        self._key: Optional[Tuple[bytes, int]] = None  # (tag, device), read before a destroy

    def __reduce__(self):
        raise TypeError("a cumemsaver Region cannot be copied or pickled (it is a handle)")

    @property
    def context(self) -> Context:
        return self._ctx

    @property
    def handle(self) -> Optional[int]:
        """The raw cms_region * as an int (for other bindings); None once destroyed."""
        return self._handle

    @property
    def destroyed(self) -> bool:
        """Whether the region is gone (destroy(), or its context closed)."""
        return self._handle is None

    def _gone(self) -> ValueError:
        return ValueError(f"cumemsaver region {self._name} is destroyed")

    @contextlib.contextmanager
    def _use(self) -> Iterator[int]:
        """The handle, for one call: raises ValueError when the region or its context is
        gone, or is being destroyed; a destroy waits until the call is done."""
        with self._cond:
            if self._handle is None:
                raise self._gone()
            if self._destroying:
                raise ValueError(f"cumemsaver region {self._name} is being destroyed")
            self._ctx._h()  # raises if the context is closed
            self._users += 1
        try:
            yield self._handle
        finally:
            with self._cond:
                self._users -= 1
                if not self._users:
                    self._cond.notify_all()

    def _begin_destroy(self, close: bool = False) -> bool:
        """Before cms_region_destroy (or cms_context_destroy: close): marks the region as
        being destroyed (later calls raise) and waits for the calls in flight. For close,
        waits for a destroy() in progress on another thread and returns False if the region
        is gone; else raises ValueError then."""
        with self._cond:
            while close and self._destroying:
                self._cond.wait()
            if self._handle is None:
                if close:
                    return False
                raise self._gone()
            if self._destroying:
                raise ValueError(f"cumemsaver region {self._name} is being destroyed")
            self._destroying = True
            while self._users:
                self._cond.wait()
        if self._key is None:  # no call can be in flight now
            self._read_key(self._handle)
        return True

    def _read_key(self, handle: int) -> None:
        info = L.init_struct(L.cms_region_info)
        if L.lib().cms_region_info_get(handle, ctypes.byref(info)) == L.CMS_OK:
            self._set_key(bytes(info.tag), info.device)

    def _set_key(self, tag: bytes, device: int) -> None:
        """Its tag and device: for messages once it is gone, and to tell after a failed
        context destroy whether it survived."""
        if self._key is None:
            self._key = (tag, device)
            self._name = f"{_decode(tag)!r} (device {device})"

    def _end_destroy(self, alive: bool) -> None:
        """After the destroy: the region is usable again (alive: the destroy failed before
        it) or gone for good."""
        handle = self._handle
        with self._cond:
            self._destroying = False
            if not alive:
                self._handle = None
            self._cond.notify_all()
        if not alive and handle is not None:
            self._ctx._forget(self, handle)

    def _alive(self) -> bool:
        """After a failed cms_context_destroy (which stops at the first region it cannot
        destroy): whether this region survived, found by its tag and device. The handle
        itself is not touched (it may be freed). Unknown counts as gone: the object then
        raises, and find_region gives a new one if the region is there."""
        if self._key is None:
            return False
        out = L.cms_region_p()
        tag, device = self._key
        st = L.lib().cms_region_find(self._ctx._handle, tag, device, ctypes.byref(out))
        return st == L.CMS_OK and out.value == self._handle

    def __repr__(self):
        state = "destroyed" if self._handle is None else hex(self._handle)
        return f"<cumemsaver.Region {self._name} {state}>"

    def alloc(self, size: int) -> int:
        """Allocates size bytes; returns the device pointer (an int, stable until free)."""
        size = _u64(size, "size")
        ptr = ctypes.c_uint64()
        with self._use() as h:
            _call("cms_alloc", h, size, ctypes.byref(ptr))
        return ptr.value

    def free(self, ptr: int) -> None:
        """Same as Context.free (allocations are found by address)."""
        with self._use():
            self._ctx.free(ptr)

    def pause(self, stream: int = 0, event: int = 0, no_sync: bool = False) -> PauseResult:
        opts, res = _pause_args(stream, event, no_sync)
        with self._use() as h:
            _call("cms_region_pause", h, ctypes.byref(opts), ctypes.byref(res))
        return _fields(res, PauseResult)

    def resume(self, async_stream: Optional[int] = None) -> ResumeResult:
        opts, res = _resume_args(async_stream)
        with self._use() as h:
            _call("cms_region_resume", h, ctypes.byref(opts), ctypes.byref(res))
        return _fields(res, ResumeResult)

    def set_peer_devices(self, devices: Union[int, Iterable[int]]) -> None:
        """Gives other devices read-write access to this region's memory, now and after every
        resume (cms_region_peer_devices_set). devices: an iterable of device ordinals, or a
        bit mask (int); empty / 0: only the region's own device."""
        if isinstance(devices, Iterable) and not isinstance(devices, (str, bytes)):
            mask = 0
            for d in devices:
                mask |= 1 << _ranged(d, "devices", 0, 63, "a device ordinal 0 to 63")
        else:
            mask = _u64(devices, "devices")
        with self._use() as h:
            _call("cms_region_peer_devices_set", h, mask)

    def set_flags(self, mask: int, flags: int) -> None:
        """Sets the retention flags selected by mask to their values in flags
        (cms_region_flags_set, since 1.2): REGION_RELEASE_HOST, REGION_HOST_PAGEABLE,
        REGION_VERIFY (since 1.3).
        On an active region, asking to keep less gives the kept backups back now. Raises
        InvalidArgument (another bit), RegionPaused (HOST_PAGEABLE changed while paused)."""
        mask, flags = _u64(mask, "mask"), _u64(flags, "flags")
        with self._use() as h:
            _call("cms_region_flags_set", h, mask, flags)

    def freeze(self) -> None:
        """Makes the region's memory read-only for its device and peers (cms_region_freeze,
        since 1.3): writes fail, cms_alloc raises RegionFrozen, and a pause whose retained
        backup still holds the content copies nothing (the first pause after freezing an
        active region copies). A paused region becomes read-only at its resume. Raises
        NotSupported for a shareable region. Freezing a frozen region does nothing."""
        with self._use() as h:
            _call("cms_region_freeze", h)

    def thaw(self) -> None:
        """Ends freeze(): read-write again, the next pause copies everything
        (cms_region_thaw, since 1.3). Thawing a region not frozen does nothing."""
        with self._use() as h:
            _call("cms_region_thaw", h)

    @property
    def frozen(self) -> bool:
        """Whether the region is frozen (cms_region_info.frozen, since 1.3)."""
        return self.info().frozen

    def set_disk_dir(self, directory: Optional[PathLike]) -> None:
        """Chooses the directory where this Policy.DISK region keeps its content while paused
        (cms_region_disk_dir_set): its file is created there and unlinked at once. None
        closes the region's file. Raises InvalidArgument for another policy, NotFound,
        PermissionDenied, IOFailure, RegionPaused (while paused)."""
        arg = None if directory is None else _path(directory, "directory")
        with self._use() as h:
            _call("cms_region_disk_dir_set", h, arg)

    def info(self) -> RegionInfo:
        info = L.init_struct(L.cms_region_info)
        with self._use() as h:
            _call("cms_region_info_get", h, ctypes.byref(info))
        self._set_key(bytes(info.tag), info.device)
        return _fields(
            info,
            RegionInfo,
            tag=_decode(info.tag),
            policy=_enum_or_int(Policy, info.policy),
            state=_enum_or_int(State, info.state),
            restore_pending=bool(info.restore_pending),
            frozen=bool(info.frozen),
        )

    def stats(self) -> RegionStats:
        """Cumulative counters of the region (cms_region_stats_get, since 1.2)."""
        c = L.init_struct(L.cms_region_stats)
        with self._use() as h:
            _call("cms_region_stats_get", h, ctypes.byref(c))
        return _stats(c)

    def destroy(self) -> None:
        """Frees every allocation of the region and the region itself. Waits for calls on
        this region in flight on other threads; afterwards every method raises ValueError.
        On failure (a driver status) the region stays, with the allocations not yet freed:
        retry destroy()."""
        self._ctx._h()  # raises if the context is closed
        self._begin_destroy()
        status = L.lib().cms_region_destroy(self._handle)
        exc = error_for(status, "cms_region_destroy") if status != L.CMS_OK else None
        self._end_destroy(exc is not None)
        if exc is not None:
            raise exc

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc) -> None:
        """Leaving `with ctx.region(...) as r:` destroys the region, unless it or its context
        is gone already."""
        if self._handle is not None and not self._destroying and not self._ctx.closed:
            self.destroy()
