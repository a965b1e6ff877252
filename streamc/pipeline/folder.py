"""The build's output folder: every file a build writes goes through here, inside ``root``.

Files are written atomically: the bytes go to a hidden temporary file beside the target,
which then replaces the target in one rename. A build killed at any moment leaves each
file either as it was or complete, never half-written under its final name; the
temporaries it may leave are removed when the folder is next opened.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import BuildError, ConfigError
from ..ir import Graph


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


MARKER = ".streamc-build"
#: The runner's record of completed steps and the states it resumes from.
RECORD_FOLDER = ".streamc"
_PARTIAL_SUFFIX = ".partial"


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once, at import: os.umask can only be read by setting it, which is not thread-safe later on.
_FILE_MODE = 0o666 & ~_current_umask()


def write_atomically(target: Path, data: bytes) -> Path:
    """Write ``data`` to ``target`` so that ``target`` is never seen half-written.

    The data is written to a temporary file in the same folder, synced to disk and renamed
    over ``target`` (``os.replace``). If anything fails or the process is interrupted before
    the rename, ``target`` keeps its old content (or stays absent).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=_PARTIAL_SUFFIX)
    try:
        # mkstemp makes the file private (0600); the target gets the mode a plain open() would give it.
        os.chmod(temporary, _FILE_MODE)
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


class BuildFolder:
    """A build's output folder. streamc writes only into a new or empty folder, or one it made before
    (marked by a ``.streamc-build`` file), so that a mistyped output_dir cannot mix a build into
    someone's files."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"output_dir '{self.root}' is a file, not a folder")
        if self.root.is_dir() and not (self.root / MARKER).exists():
            foreign = sorted(p.name for p in self.root.iterdir())
            if foreign:
                listed = ", ".join(repr(name) for name in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
                raise ConfigError(f"output_dir '{self.root}' holds files streamc did not write ({listed}); "
                                  "give an empty or new folder")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / MARKER).touch()
        self.reports = self.root / "reports"
        self.reports.mkdir(exist_ok=True)
        self.records = self.root / RECORD_FOLDER
        self._remove_partial_writes()

    @contextlib.contextmanager
    def exclusive(self):
        """Hold the folder for one build: another build of it is refused until this one ends.

        The lock is the kernel's (``flock`` on the marker file), so a killed build releases it.
        """
        with (self.root / MARKER).open("rb") as marker:
            try:
                fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BuildError(f"output_dir '{self.root}' is in use by another streamc build; wait for it to "
                                 "end or give another output_dir") from None
            yield self

    def _remove_partial_writes(self) -> None:
        """Temporaries of writes that an interrupted build never renamed into place."""
        for leftover in self.root.rglob(f".*{_PARTIAL_SUFFIX}"):
            if leftover.is_file() and not leftover.is_symlink():
                leftover.unlink()

    def path(self, *parts: str) -> Path:
        """``root/parts...``, its folder created; for tools that write there themselves."""
        target = self.root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_bytes(self, *parts: str, data: bytes) -> Path:
        """Write ``data`` atomically to ``root/parts...``."""
        return write_atomically(self.root.joinpath(*parts), data)

    def write_text(self, *parts: str, text: str) -> Path:
        """Write ``text`` (UTF-8) atomically to ``root/parts...``."""
        return self.write_bytes(*parts, data=text.encode("utf-8"))

    def save_array(self, *parts: str, array: np.ndarray) -> Path:
        """Save ``array`` atomically as ``.npy`` at ``root/parts...``."""
        buffer = io.BytesIO()
        np.save(buffer, array)
        return self.write_bytes(*parts, data=buffer.getvalue())

    def write_report(self, name: str, data: dict) -> Path:
        return self.write_text("reports", f"{name}.json", text=json.dumps(_jsonable(data), indent=2) + "\n")

    def write_model(self, step: str, graph: Graph) -> Path:
        return self.write_bytes(f"model_{step}.onnx", data=graph.to_onnx().SerializeToString())
