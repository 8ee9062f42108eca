"""Writing a whole buffer to a file, or, for an append-only log, nothing of it.

``os.write`` may write less than it was given: to a regular file when the disk fills part
way (the next write then fails with ENOSPC). A log that kept that part and went on would
hold a torn record between whole ones, and its replay stops at the first record it
cannot read, so everything written after it would be lost at the next start."""
from __future__ import annotations

import errno
import os


class PartialWrite(OSError):
    """``written`` bytes of the buffer reached the file before ``error``."""

    def __init__(self, written: int, error: OSError) -> None:
        super().__init__(error.errno, f"{error.strerror or error} after {written} bytes")
        self.written = written


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    done = 0
    try:
        while done < len(view):
            count = os.write(fd, view[done:])
            if count == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += count
    except OSError as error:
        if done:
            raise PartialWrite(done, error) from error
        raise


def append_whole(fd: int, data: bytes) -> None:
    """Append ``data`` to the file ``fd`` (opened with O_APPEND) whole, or raise with the
    file as it was: what part of it was written is cut off again."""
    try:
        write_all(fd, data)
    except PartialWrite as partial:
        try:
            os.ftruncate(fd, os.fstat(fd).st_size - partial.written)
        except OSError as error:
            raise OSError(error.errno, f"{partial}, and cutting it off failed: {error}") from partial
        raise
