"""Where a render may write: outputs checked against its inputs and the file system before any work.

Rules (one place for all writers):

* An output never resolves to an input: real paths (symlinks followed in every
  component, ``./`` and ``../`` removed) and, where both exist, ``samefile``
  (hard links, case-insensitive file systems) are compared.
* An output is a new path or a regular file. FIFOs, devices, sockets and
  folders are refused. A symlink given as the output is written through: the
  file it points to is replaced and the link stays.
* A folder output (a PNG sequence) is spelled with a trailing separator and
  must be new or empty.
* Work goes to a short hidden temporary name beside the target (so a 255-byte
  file name still fits) and is renamed over the target only when complete.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from dataclasses import dataclass

TEMP_SUFFIX = ".part"
_TEMP_STEM = 40  # characters of the target's name kept in its temporary name


class UnsafeOutputError(ValueError):
    """An output that would overwrite an input or something that is not a plain file."""


@dataclass(frozen=True)
class OutputPath:
    """A checked output: ``target`` is the real path written (symlinks resolved), ``folder`` for a PNG sequence."""

    given: str
    target: str
    folder: bool

    @property
    def parent(self) -> str:
        return os.path.dirname(self.target)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def is_folder_spelling(path: str) -> bool:
    """True when ``path`` ends with a path separator (``frames/``): it names a folder."""
    return path.endswith(os.sep) or (os.altsep is not None and path.endswith(os.altsep))


def _same(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output(path, inputs=(), what: str = "output") -> OutputPath:
    """Check that ``path`` may be written without destroying anything; returns where to write.

    ``inputs`` are the files the render reads (video, track file, ...); None
    entries are skipped. Raises :class:`UnsafeOutputError` (a ``ValueError``)
    naming ``what`` and the fix, or ``FileNotFoundError`` for a missing folder.
    """
    given = os.fspath(path)
    if not isinstance(given, str):
        given = os.fsdecode(given)
    if not given.strip():
        raise UnsafeOutputError("output path is empty; give a file name such as out.mp4 (or a folder "
                                "ending in / for a PNG sequence)")
    folder = is_folder_spelling(given)
    stripped = given.rstrip("/" + (os.altsep or "")) if folder else given
    if folder and not stripped:
        raise UnsafeOutputError(f"{what} {given!r} is the root folder; give a new or empty folder")
    target = os.path.realpath(os.path.expanduser(stripped))
    for source in inputs:
        if source is None:
            continue
        source = os.fspath(source)
        if _same(target, source):
            raise UnsafeOutputError(f"cannot write {what} {given}: it is the input {source}; writing it would "
                                    "destroy the input. Choose another output name")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise UnsafeOutputError(f"cannot check {what} {given} ({error.strerror})") from None
    if folder:
        if info is not None:
            if not stat.S_ISDIR(info.st_mode):
                raise UnsafeOutputError(f"cannot write {what} {stripped}: it is "
                                        f"{'a file' if stat.S_ISREG(info.st_mode) else _kind(info.st_mode)}, not a "
                                        "folder; give a new or empty folder for the PNG sequence")
            if os.listdir(target):
                raise UnsafeOutputError(f"cannot write {what} {given}: the folder is not empty; give a new or "
                                        "empty folder so no file in it is overwritten")
    elif info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"cannot write {what} {given}: it is a folder; give a file name, or add a "
                                "trailing / to write a PNG sequence into it (it must be empty)")
    elif info is not None and not stat.S_ISREG(info.st_mode):
        raise UnsafeOutputError(f"cannot write {what} {given}: it is {_kind(info.st_mode)}, not a regular "
                                "file; refusing to replace it")
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"cannot write {what} {given}: folder {os.path.dirname(os.path.abspath(stripped))} "
                                "does not exist")
    return OutputPath(given, target, folder)


def check_distinct(outputs) -> None:
    """Two outputs of one render (e.g. a video and its PNG folder) must not overlap."""
    outputs = [output for output in outputs if output is not None]
    for index, first in enumerate(outputs):
        for second in outputs[index + 1:]:
            for a, b in ((first, second), (second, first)):
                if a.target == b.target or (a.folder and b.target.startswith(a.target + os.sep)):
                    raise UnsafeOutputError(f"outputs {first.given} and {second.given} overlap; give separate "
                                            "names")


def temp_name(folder: str, target: str) -> str:
    """A new hidden path beside ``target``: ``.NAME[:40].XXXXXXXX.part`` (fits any legal file name)."""
    stem = os.path.basename(target)[:_TEMP_STEM]
    return os.path.join(folder, f".{stem}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def _create_temp(target: str, label: str, make) -> str:
    """``make(path)`` at a fresh temporary name beside ``target`` (retried while the name is taken); errors
    name ``label``."""
    folder = os.path.dirname(target)
    while True:
        path = temp_name(folder, target)
        try:
            make(path)
            return path
        except FileExistsError:
            continue
        except OSError as error:
            raise PermissionError(f"cannot write {label}: folder {folder} is not writable "
                                  f"({error.strerror})") from None


def create_temp_file(target: str, label: str) -> str:
    """Create an empty temporary file beside ``target`` (permissions follow the umask); errors name ``label``."""
    return _create_temp(target, label, lambda path: os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                                                                     0o666)))


def create_temp_folder(target: str, label: str) -> str:
    """Create an empty temporary folder beside ``target``; errors name ``label``."""
    return _create_temp(target, label, lambda path: os.mkdir(path, 0o777))


def commit(temp: str, target: str) -> None:
    """Move a finished temporary file or folder over ``target`` in one rename."""
    os.replace(temp, target)


def discard(temp: str) -> None:
    """Remove a temporary file or folder (if it is still there)."""
    if os.path.isdir(temp) and not os.path.islink(temp):
        shutil.rmtree(temp, ignore_errors=True)
    elif os.path.lexists(temp):
        os.remove(temp)
