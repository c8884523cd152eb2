# SPDX-License-Identifier: MIT
"""Low-level ctypes layer over libcumemsaver.so.1 (include/cumemsaver.h, ABI 1.0).

Hand-written for now; the ABI/bindings work will generate this module from the ABI
description. Keep it a 1:1 mirror of the header: every constant, struct and function,
nothing idiomatic. The idiomatic layer lives in api.py.
"""

import ctypes
import os
import shutil
import subprocess

SONAME = "libcumemsaver.so.1"

# ---- Versions ---------------------------------------------------------------
CMS_VERSION_MAJOR = 1
CMS_VERSION_MINOR = 1
CMS_VERSION_PATCH = 0
CMS_VERSION_NUMBER = (CMS_VERSION_MAJOR << 16) | (CMS_VERSION_MINOR << 8) | CMS_VERSION_PATCH

# ---- Status codes ------------------------------------------------------------
CMS_OK = 0
CMS_ERR_INVALID_ARGUMENT = -1
CMS_ERR_NO_DRIVER = -2
CMS_ERR_DRIVER = -3
CMS_ERR_OUT_OF_DEVICE_MEMORY = -4
CMS_ERR_OUT_OF_HOST_MEMORY = -5
CMS_ERR_NOT_FOUND = -6
CMS_ERR_EXISTS = -7
CMS_ERR_ALREADY_PAUSED = -8
CMS_ERR_NOT_PAUSED = -9
CMS_ERR_PAUSED = -10
CMS_ERR_INVALID_DEVICE = -11
CMS_ERR_NOT_SUPPORTED = -12
CMS_ERR_STRUCT_SIZE = -13
CMS_ERR_NOT_BASE = -14
CMS_ERR_ROLLBACK_FAILED = -15
CMS_ERR_NO_DEVICE = -16
CMS_ERR_INTERNAL = -17
CMS_ERR_FORKED = -18
CMS_STATUS_MIN = -18

# ---- Logging -----------------------------------------------------------------
CMS_LOG_ERROR = 0
CMS_LOG_WARN = 1
CMS_LOG_INFO = 2
CMS_LOG_DEBUG = 3

# ---- Regions -----------------------------------------------------------------
CMS_POLICY_DISCARD = 0
CMS_POLICY_ZERO = 1
CMS_POLICY_HOST = 2

CMS_STATE_ACTIVE = 0
CMS_STATE_PAUSED = 1

CMS_TAG_MAX = 63

CMS_REGION_RELEASE_HOST = 0x1

# ---- Pause / resume ----------------------------------------------------------
CMS_PAUSE_NO_SYNC = 0x1
CMS_RESUME_ASYNC = 0x1

# ---- Types -------------------------------------------------------------------
cms_status = ctypes.c_int32
# Opaque handles: carried as void pointers (cms_context *, cms_region *).
cms_context_p = ctypes.c_void_p
cms_region_p = ctypes.c_void_p

# typedef void (*cms_log_fn)(void *user, int32_t level, const char *message);
cms_log_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)


class cms_context_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("driver_path", ctypes.c_char_p),
        ("log_fn", cms_log_fn),
        ("log_user", ctypes.c_void_p),
        ("log_level", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    ]


class cms_region_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device", ctypes.c_int32),
        ("policy", ctypes.c_uint32),
        ("flags", ctypes.c_uint64),
    ]


class cms_region_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("tag", ctypes.c_char * (CMS_TAG_MAX + 1)),
        ("device", ctypes.c_int32),
        ("policy", ctypes.c_uint32),
        ("state", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("flags", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("logical_bytes", ctypes.c_uint64),
        ("physical_bytes", ctypes.c_uint64),
        ("backed_bytes", ctypes.c_uint64),
        ("backup_bytes", ctypes.c_uint64),
        ("epoch", ctypes.c_uint64),
        ("granularity", ctypes.c_uint64),
        ("host_bytes", ctypes.c_uint64),
        ("restore_pending", ctypes.c_uint32),
        ("reserved2", ctypes.c_uint32),
    ]


class cms_pointer_info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("region", cms_region_p),
        ("base", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("offset", ctypes.c_uint64),
        ("physical_size", ctypes.c_uint64),
        ("device", ctypes.c_int32),
        ("state", ctypes.c_uint32),
    ]


class cms_pause_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("stream", ctypes.c_uint64),
        ("event", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
    ]


class cms_pause_result(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("regions", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("bytes_released", ctypes.c_uint64),
        ("bytes_backed_up", ctypes.c_uint64),
        ("driver_free_before", ctypes.c_uint64),
        ("driver_free_after", ctypes.c_uint64),
        ("elapsed_ns", ctypes.c_uint64),
    ]


class cms_resume_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("flags", ctypes.c_uint64),
        ("stream", ctypes.c_uint64),
    ]


class cms_resume_result(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("regions", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("bytes_backed", ctypes.c_uint64),
        ("bytes_restored", ctypes.c_uint64),
        ("elapsed_ns", ctypes.c_uint64),
    ]


STRUCTS = (
    cms_context_options,
    cms_region_options,
    cms_region_info,
    cms_pointer_info,
    cms_pause_options,
    cms_pause_result,
    cms_resume_options,
    cms_resume_result,
)


def init_struct(cls):
    """A zeroed struct with struct_size set (what the CMS_*_INIT macros do for outputs)."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s


P = ctypes.POINTER
_c = ctypes
# name: (restype, [argtypes])
FUNCTIONS = {
    "cms_version": (_c.c_uint32, []),
    "cms_version_string": (_c.c_char_p, []),
    "cms_status_name": (_c.c_char_p, [cms_status]),
    "cms_status_string": (_c.c_char_p, [cms_status]),
    "cms_last_error": (_c.c_char_p, []),
    "cms_last_error_message": (_c.c_size_t, [_c.c_char_p, _c.c_size_t]),
    "cms_context_options_init": (cms_status, [P(cms_context_options)]),
    "cms_context_create": (cms_status, [P(cms_context_options), P(cms_context_p)]),
    "cms_context_destroy": (cms_status, [cms_context_p]),
    "cms_device_memory_info": (
        cms_status,
        [cms_context_p, _c.c_int32, P(_c.c_uint64), P(_c.c_uint64)],
    ),
    "cms_region_options_init": (cms_status, [P(cms_region_options)]),
    "cms_region_create": (
        cms_status,
        [cms_context_p, _c.c_char_p, P(cms_region_options), P(cms_region_p)],
    ),
    "cms_region_find": (cms_status, [cms_context_p, _c.c_char_p, _c.c_int32, P(cms_region_p)]),
    "cms_region_destroy": (cms_status, [cms_region_p]),
    "cms_region_info_get": (cms_status, [cms_region_p, P(cms_region_info)]),
    "cms_alloc": (cms_status, [cms_region_p, _c.c_uint64, P(_c.c_uint64)]),
    "cms_free": (cms_status, [cms_context_p, _c.c_uint64]),
    "cms_pointer_info_get": (cms_status, [cms_context_p, _c.c_uint64, P(cms_pointer_info)]),
    "cms_pause_options_init": (cms_status, [P(cms_pause_options)]),
    "cms_resume_options_init": (cms_status, [P(cms_resume_options)]),
    "cms_pause": (
        cms_status,
        [cms_context_p, _c.c_char_p, P(cms_pause_options), P(cms_pause_result)],
    ),
    "cms_resume": (
        cms_status,
        [cms_context_p, _c.c_char_p, P(cms_resume_options), P(cms_resume_result)],
    ),
    "cms_region_pause": (cms_status, [cms_region_p, P(cms_pause_options), P(cms_pause_result)]),
    "cms_region_resume": (
        cms_status,
        [cms_region_p, P(cms_resume_options), P(cms_resume_result)],
    ),
}
del P, _c


def _candidates():
    env = os.environ.get("CUMEMSAVER_LIBRARY")
    if env:
        yield env
        return
    if shutil.which("pkg-config"):
        try:
            out = subprocess.run(
                ["pkg-config", "--variable=libdir", "cumemsaver"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
            libdir = out.stdout.strip()
            if out.returncode == 0 and libdir:
                path = os.path.join(libdir, SONAME)
                if os.path.exists(path):
                    yield path
        except (OSError, subprocess.SubprocessError):
            pass
    yield SONAME


def load(path=None):
    """Loads the library (path, else CUMEMSAVER_LIBRARY, else pkg-config's libdir, else the
    system loader) and declares every function. Raises OSError if none loads."""
    errors = []
    for cand in [path] if path else _candidates():
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError as e:
            errors.append(f"{cand}: {e}")
    else:
        raise OSError("cannot load libcumemsaver: " + "; ".join(errors))
    for name, (restype, argtypes) in FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_lib = None


def lib():
    """The process-wide loaded library (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = load()
    return _lib
