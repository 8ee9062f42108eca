"""What an owner sent a backup and does not yet know it holds: resent, in order, when the
connection comes back. A backup acknowledges APPENDs cumulatively, so APPEND n leaves
the buffer once ACK >= n, and a FIN or CHANNELS sent after APPEND n once ACK >= n + 1
(the backup may have answered n before reading it). Past ``max_bytes`` the oldest
frames are dropped and counted in ``missed``: that backup is behind."""
from __future__ import annotations

from collections import deque


class ResendBuffer:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._frames: deque[tuple[int, bytes]] = deque()  # (ACK that drops it, frame)
        self._bytes = 0
        self._last_seq = 0
        self.acked_through = 0
        self.missed = 0

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def last_seq(self) -> int:
        """The last APPEND kept."""
        return self._last_seq

    def keep_append(self, seq: int, frame: bytes) -> None:
        self._last_seq = seq
        self._keep(seq, frame)

    def keep_after(self, frame: bytes) -> None:
        self._keep(self._last_seq + 1, frame)

    def _keep(self, drop_at: int, frame: bytes) -> None:
        self._frames.append((drop_at, frame))
        self._bytes += len(frame)
        while self._bytes > self.max_bytes and len(self._frames) > 1:
            self._bytes -= len(self._frames.popleft()[1])
            self.missed += 1

    def acked(self, through: int) -> None:
        self.acked_through = max(self.acked_through, through)
        frames = self._frames
        while frames and frames[0][0] <= through:
            self._bytes -= len(frames.popleft()[1])

    def frames(self) -> list[bytes]:
        return [frame for _, frame in self._frames]
