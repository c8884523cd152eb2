# SPDX-License-Identifier: MIT
"""Sharing regions with other processes and the control socket (include/cumemsaver_ipc.h).

Exporter, Import and ControlSocket are made by Context.exporter, Context.open_import and
Context.control_socket. Each is a context manager with an idempotent close(); Context.close()
closes the ones still open first (the C handles must go before their context).
"""

import ctypes
import enum
import threading
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union

from . import _lib as L
from .api import (
    Context,
    CumemsaverError,
    PathLike,
    Region,
    Tag,
    _bool,
    _call,
    _callback,
    _decode,
    _enum_arg,
    _enum_or_int,
    _i32,
    _path,
    _status_of,
    _tag,
    _u32,
    _u64,
    logger,
)


class Access(enum.IntEnum):
    """What importers of a published region may do with it (CMS_ACCESS_*)."""

    READ = L.CMS_ACCESS_READ
    READWRITE = L.CMS_ACCESS_READWRITE


class ImportState(enum.IntEnum):
    """cms_import_info.state (CMS_IMPORT_*)."""

    MAPPED = L.CMS_IMPORT_MAPPED
    REVOKED = L.CMS_IMPORT_REVOKED
    LAYOUT_CHANGED = L.CMS_IMPORT_LAYOUT_CHANGED
    DISCONNECTED = L.CMS_IMPORT_DISCONNECTED
    FAILED = L.CMS_IMPORT_FAILED


class ImportEvent(enum.IntEnum):
    """Events passed to an import's on_event (CMS_IMPORT_EVENT_*)."""

    REVOKED = L.CMS_IMPORT_EVENT_REVOKED
    REMAPPED = L.CMS_IMPORT_EVENT_REMAPPED
    LAYOUT_CHANGED = L.CMS_IMPORT_EVENT_LAYOUT_CHANGED
    DISCONNECTED = L.CMS_IMPORT_EVENT_DISCONNECTED
    FAILED = L.CMS_IMPORT_EVENT_FAILED


class ControlOp(enum.IntEnum):
    """cms_control_request.op (CMS_CONTROL_STATUS / PAUSE / RESUME)."""

    STATUS = L.CMS_CONTROL_STATUS
    PAUSE = L.CMS_CONTROL_PAUSE
    RESUME = L.CMS_CONTROL_RESUME


class ControlPhase(enum.IntEnum):
    """cms_control_request.phase: BEFORE (decide) or AFTER (informed of the result)."""

    BEFORE = L.CMS_CONTROL_BEFORE
    AFTER = L.CMS_CONTROL_AFTER


@dataclass(frozen=True)
class ImportInfo:
    """A snapshot of an import (cms_import_info_get)."""

    tag: str
    exporter_device: int
    device: int
    state: Union[ImportState, int]
    access: Union[Access, int]
    epoch: int  # the exporter's epoch of the memory mapped (or last mapped)
    allocations: int
    base: int  # start of the reserved range (device pointer)
    bytes: int
    exporter_pid: int
    exporter_uid: int
    error: int  # the status behind LAYOUT_CHANGED, DISCONNECTED or FAILED; else 0


@dataclass(frozen=True)
class ControlRequest:
    """A pause or resume request of a control socket's peer (valid copy of the C struct)."""

    op: Union[ControlOp, int]
    phase: Union[ControlPhase, int]
    tag: str
    peer_pid: int
    peer_uid: int
    result: int  # AFTER: the status of cms_pause / cms_resume; BEFORE: 0


def _uids(allowed_uids: Optional[List[int]]):
    """(array, count) for an allowed_uids option; the array must outlive the call."""
    if not allowed_uids:
        return None, 0
    uids = [_u32(u, "uid") for u in allowed_uids]
    return (ctypes.c_uint32 * len(uids))(*uids), len(uids)


_T = TypeVar("_T", bound="_Owned")


class _Owned:
    """A C handle of a context, destroyed by close() (idempotent), on `with` exit, by
    Context.close() and, as a last resort, when garbage collected."""

    _destroy = ""  # the C function that frees the handle

    def __init__(self, context: Context):
        self._ctx = context
        self._handle: Optional[int] = None
        self._lock = threading.Lock()

    def _adopt(self, handle: int) -> None:
        self._handle = handle
        self._ctx._children.add(self)

    @property
    def context(self) -> Context:
        return self._ctx

    @property
    def handle(self) -> Optional[int]:
        """The raw C handle as an int (None once closed)."""
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _h(self) -> int:
        if self._handle is None:
            raise ValueError(f"cumemsaver {type(self).__name__} is closed")
        return self._handle

    def close(self) -> None:
        """Frees the C handle (its status is raised; the handle is freed all the same)."""
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is None:
                return
            self._ctx._children.discard(self)
            _call(self._destroy, handle)

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            if self._handle is not None:
                getattr(L.lib(), self._destroy)(self._handle)
                self._handle = None
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self._handle is None else hex(self._handle)
        return f"<cumemsaver.{type(self).__name__} {state}>"


class Exporter(_Owned):
    """Offers regions of a context to other processes (cms_exporter_*).

    Made by Context.exporter(path, allowed_uids=None, revoke_timeout_ms=0): listens on the
    Unix socket path (mode 0600). allowed_uids: uids that may import (None: ours only).
    revoke_timeout_ms: how long a pause waits for importers to drop their mappings (0:
    10000). Raises Exists when path is a live socket or another file, IOFailure.
    """

    _destroy = "cms_exporter_destroy"

    def __init__(
        self,
        context: Context,
        path: PathLike,
        allowed_uids: Optional[List[int]] = None,
        revoke_timeout_ms: int = 0,
    ):
        super().__init__(context)
        opts = L.init_struct(L.cms_exporter_options)
        uids, n = _uids(allowed_uids)
        opts.allowed_uids = ctypes.cast(uids, ctypes.POINTER(ctypes.c_uint32)) if n else None
        opts.nallowed_uids = n
        opts.revoke_timeout_ms = _u32(revoke_timeout_ms, "revoke_timeout_ms")
        out = L.cms_exporter_p()
        _call(
            "cms_exporter_create",
            context._h(),
            _path(path),
            ctypes.byref(opts),
            ctypes.byref(out),
        )
        self._adopt(out.value)

    def publish(self, region: Region, access: Access = Access.READWRITE) -> None:
        """Offers region (created with shareable=True) to importers, who ask for its tag
        (cms_exporter_publish). From now on a pause of the region first revokes their
        mappings. Raises InvalidArgument (not shareable, another context), Exists (already
        published), NotFound (destroyed)."""
        access = _enum_arg(Access, access, "access")
        with region._use() as handle:
            _call("cms_exporter_publish", self._h(), handle, access)

    def importers(self) -> int:
        """The number of importers connected now (cms_exporter_importers)."""
        count = ctypes.c_uint64()
        _call("cms_exporter_importers", self._h(), ctypes.byref(count))
        return count.value


class Import(_Owned):
    """A region of another process mapped into this one (cms_import_*).

    Made by Context.open_import(path, tag, ...): connects to the exporter at path, asks for
    the region tagged tag (on exporter_device, -1: any) and maps it on device. read_only
    asks for read-only access. allowed_uids: uids the exporter may run as (None: ours).
    timeout_ms: for connecting and the first grant (0: 10000). name: shown in the
    exporter's messages.

    on_quiesce(epoch) is called (on the import's thread) when the exporter is about to
    pause: stop using the memory and return None or True to consent; False refuses (the
    exporter's pause fails with Refused), and so does an exception (logged to the logger
    "cumemsaver"), answered with its status. None: the library synchronizes the device
    first. on_event(ImportEvent, epoch) is told of REVOKED, REMAPPED (same addresses, new
    epoch), LAYOUT_CHANGED, DISCONNECTED and FAILED. Neither may close the import.
    """

    _destroy = "cms_import_close"

    def __init__(
        self,
        context: Context,
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
    ):
        _callback(on_quiesce, "on_quiesce")
        _callback(on_event, "on_event")
        super().__init__(context)
        opts = L.init_struct(L.cms_import_options)
        opts.device = _i32(device, "device")
        opts.exporter_device = _i32(exporter_device, "exporter_device")
        opts.flags = L.CMS_IMPORT_READ_ONLY if _bool(read_only, "read_only") else 0
        uids, n = _uids(allowed_uids)
        opts.allowed_uids = ctypes.cast(uids, ctypes.POINTER(ctypes.c_uint32)) if n else None
        opts.nallowed_uids = n
        opts.timeout_ms = _u32(timeout_ms, "timeout_ms")
        # The CFUNCTYPE objects live as long as this object (the import's thread calls them).
        self._quiesce_cb = None
        self._event_cb = None
        if on_quiesce is not None:

            def quiesce(_user, _imp, epoch, _fn=on_quiesce):
                try:
                    return L.CMS_ERR_REFUSED if _fn(epoch) is False else L.CMS_OK
                except BaseException as exc:  # never let an exception unwind into C
                    if not isinstance(exc, CumemsaverError):
                        logger.exception("cumemsaver: an import's on_quiesce raised")
                    return _status_of(exc)

            self._quiesce_cb = L.cms_import_quiesce_fn(quiesce)
            opts.quiesce_fn = self._quiesce_cb
        if on_event is not None:

            def event(_user, _imp, ev, epoch, _fn=on_event):
                try:
                    _fn(_enum_or_int(ImportEvent, ev), epoch)
                except BaseException:
                    logger.exception("cumemsaver: an import's on_event raised")

            self._event_cb = L.cms_import_event_fn(event)
            opts.event_fn = self._event_cb
        name_bytes = None if name is None else _tag(name, "name")
        opts.name = name_bytes
        out = L.cms_import_p()
        _call(
            "cms_import_open",
            context._h(),
            _path(path),
            _tag(tag),
            ctypes.byref(opts),
            ctypes.byref(out),
        )
        self._adopt(out.value)

    def info(self) -> ImportInfo:
        """A snapshot of the import's state (cms_import_info_get); works in every state."""
        info = L.init_struct(L.cms_import_info)
        _call("cms_import_info_get", self._h(), ctypes.byref(info))
        fields = {f: getattr(info, f) for f in ImportInfo.__dataclass_fields__}
        fields.update(
            tag=_decode(info.tag),
            state=_enum_or_int(ImportState, info.state),
            access=_enum_or_int(Access, info.access),
        )
        return ImportInfo(**fields)

    def alloc(self, index: int) -> Tuple[int, int]:
        """(local device pointer, size) of the index-th allocation of the layout, in the
        exporter's address order (cms_import_alloc_get); the pointer stays the same for the
        life of the import. Raises Disconnected, LayoutChanged, InvalidArgument (index)."""
        ptr, size = ctypes.c_uint64(), ctypes.c_uint64()
        _call(
            "cms_import_alloc_get",
            self._h(),
            _u64(index, "index"),
            ctypes.byref(ptr),
            ctypes.byref(size),
        )
        return ptr.value, size.value

    def allocs(self) -> List[Tuple[int, int]]:
        """Every allocation of the layout as (pointer, size)."""
        return [self.alloc(i) for i in range(self.info().allocations)]

    def translate(self, exporter_ptr: int) -> int:
        """The local address of an exporter's address (cms_import_translate); raises NotFound
        when it is in no allocation of the layout."""
        ptr = ctypes.c_uint64()
        _call("cms_import_translate", self._h(), _u64(exporter_ptr, "ptr"), ctypes.byref(ptr))
        return ptr.value


class ControlSocket(_Owned):
    """Lets cmsctl --socket PATH (of an allowed uid) ask for the status of the context's
    regions and pause or resume a tag (cms_control_*).

    Made by Context.control_socket(path, handler=None, allow_all=False, allowed_uids=None).
    handler(ControlRequest) runs on the socket's thread for each pause / resume request:
    in phase BEFORE, return None or True to let the library act, False to refuse
    (Refused), or raise a CumemsaverError to refuse with its status (another exception is
    logged and answered with InternalError); in phase AFTER (result holds the outcome) the
    return is ignored. It may call the library but not close the socket. Without a handler
    the socket serves status only, unless allow_all=True.
    """

    _destroy = "cms_control_destroy"

    def __init__(
        self,
        context: Context,
        path: PathLike,
        handler: Optional[Callable[[ControlRequest], Optional[bool]]] = None,
        allow_all: bool = False,
        allowed_uids: Optional[List[int]] = None,
    ):
        _callback(handler, "handler")
        super().__init__(context)
        opts = L.init_struct(L.cms_control_options)
        opts.flags = L.CMS_CONTROL_ALLOW_ALL if _bool(allow_all, "allow_all") else 0
        uids, n = _uids(allowed_uids)
        opts.allowed_uids = ctypes.cast(uids, ctypes.POINTER(ctypes.c_uint32)) if n else None
        opts.nallowed_uids = n
        self._handler_cb = None
        if handler is not None:

            def control(_user, req_p, _fn=handler):
                try:
                    r = req_p.contents
                    req = ControlRequest(
                        op=_enum_or_int(ControlOp, r.op),
                        phase=_enum_or_int(ControlPhase, r.phase),
                        tag=_decode(r.tag),
                        peer_pid=r.peer_pid,
                        peer_uid=r.peer_uid,
                        result=r.result,
                    )
                    return L.CMS_ERR_REFUSED if _fn(req) is False else L.CMS_OK
                except BaseException as exc:  # never let an exception unwind into C
                    if not isinstance(exc, CumemsaverError):
                        logger.exception("cumemsaver: the control handler raised")
                    return _status_of(exc)

            self._handler_cb = L.cms_control_fn(control)
            opts.fn = self._handler_cb
        out = L.cms_control_p()
        _call(
            "cms_control_create",
            context._h(),
            _path(path),
            ctypes.byref(opts),
            ctypes.byref(out),
        )
        self._adopt(out.value)
