# SPDX-License-Identifier: MIT
"""Whether the original torch_memory_saver is installed beside this package.

Both provide the top-level package torch_memory_saver, so Python imports whichever comes
first on sys.path, silently, and pip mixes their files where both are in one directory. The
original is found by its installed metadata (importlib.metadata over sys.path): a
distribution named torch-memory-saver (any spelling: torch_memory_saver, Torch.Memory.Saver),
or any other distribution except this one whose top_level.txt lists torch_memory_saver (a
fork under another name). Standard library only: this module imports neither torch nor
cumemsaver.
"""

import importlib.metadata as metadata
import os
import re
import sys
import warnings
from typing import Iterable, List, Mapping, NamedTuple, Optional

PACKAGE = "torch_memory_saver"
OURS = "cumemsaver-torch-memory-saver"  # this distribution (bindings/python-tms)
PEER = "torch-memory-saver"  # the original's distribution name, normalized
CHOICE_VAR = "CUMEMSAVER_TORCH_MEMORY_SAVER"
CHOICE = "cumemsaver"  # the one value of CHOICE_VAR: use this package despite the original


class Found(NamedTuple):
    """An installed distribution that provides torch_memory_saver and is not this one."""

    name: str  # as its metadata spells it
    version: str
    location: str  # the sys.path entry holding it


def normalize(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): lower case, runs of -_. as -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _top_level(dist) -> List[str]:
    """The top-level packages dist's top_level.txt lists (none when it has no such file)."""
    try:
        text = dist.read_text("top_level.txt")
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return []
    return text.split() if text else []


def peer_distributions(path: Optional[Iterable[str]] = None) -> List[Found]:
    """The distributions on path (default sys.path) that provide torch_memory_saver and are
    not this package, in path order; each (name, location) once. A distribution whose
    metadata cannot be read is left out."""
    found: List[Found] = []
    seen = set()
    for dist in metadata.distributions(path=list(sys.path if path is None else path)):
        try:
            name = dist.metadata.get("Name") or ""
            version = dist.version or "?"
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # unreadable (UnicodeDecodeError is a ValueError) or, in some Python
            # versions, missing metadata (others give an empty Name)
        norm = normalize(name)
        if not norm or norm == OURS:
            continue
        if norm != PEER and PACKAGE not in _top_level(dist):
            continue
        location = os.path.realpath(str(dist.locate_file("")))
        if (norm, location) in seen:
            continue
        seen.add((norm, location))
        found.append(Found(name, version, location))
    return found


def _ours() -> str:
    """This package: distribution, version and directory (or where it is imported from)."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    try:
        return f"cumemsaver's drop-in, {OURS} {metadata.version(OURS)} (in {here}),"
    except metadata.PackageNotFoundError:
        return f"cumemsaver's drop-in (imported from {here}, not installed)"


def message(peers: List[Found], choice: str = "") -> str:
    """The ImportError's text: both packages, what would happen, how to choose."""
    theirs = "; ".join(f"{p.name} {p.version} (in {p.location})" for p in peers)
    bad = f" ({CHOICE_VAR}={choice!r} is not {CHOICE!r})" if choice else ""
    return (
        f"torch_memory_saver: both {_ours()} and the original torch_memory_saver, "
        f"{theirs}, provide this import name; Python would import whichever comes first on "
        "sys.path, silently. Keep one: to use cumemsaver, `pip uninstall "
        f"{peers[0].name}`; to use the original, `pip uninstall {OURS}`. Where both are in "
        "the same directory their files overlap (uninstalling one removes files of the "
        "other): uninstall both, then install the one you keep. Or set "
        f"{CHOICE_VAR}={CHOICE} to import cumemsaver's anyway, with a warning instead of "
        f"this error{bad}."
    )


def check(path: Optional[Iterable[str]] = None, environ: Optional[Mapping[str, str]] = None):
    """Raises ImportError (name torch_memory_saver) where the original is installed on path
    (default sys.path); with environ[CUMEMSAVER_TORCH_MEMORY_SAVER] == "cumemsaver" (default
    os.environ) warns (RuntimeWarning) instead. Returns the distributions found."""
    peers = peer_distributions(path)
    if not peers:
        return peers
    choice = (os.environ if environ is None else environ).get(CHOICE_VAR, "")
    if choice == CHOICE:
        warnings.warn(
            f"torch_memory_saver: {CHOICE_VAR}={CHOICE}: serving torch_memory_saver with "
            f"{_ours()} although the original is installed too: "
            + "; ".join(f"{p.name} {p.version} (in {p.location})" for p in peers),
            RuntimeWarning,
            stacklevel=3,
        )
        return peers
    raise ImportError(message(peers, choice), name=PACKAGE)
