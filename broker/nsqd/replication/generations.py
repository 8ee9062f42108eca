"""Generations: how an owner that comes back is kept from delivering what was adopted.

Each owner's messages belong to a generation of its shard, 1 at first. Adopting an owner
fences the generation its copies belong to: the adopter, and every backup it pulls
copies from, accepts no more frames of that generation (so what it gave the adopter is
all it acknowledged). Once the adoption is done the generation is *announced*: an owner
saying HELLO with it (or an older one) is told so in WELCOME, and then empties its own
queues of replicated topics and starts the next generation.

A node keeps all of this in ``<data-path>/replication/generations.json``, rewritten
whole (it is small: a number per peer) and fsynced before anything depends on it.

Generation numbers alone cannot tell a node's lives apart: one whose data path was lost
starts again at 1 and may be moved by a WELCOME to a number it used before. So each data
path also has an *incarnation*, a random name made with this file and said in HELLO: a
backup holding live copies of another incarnation of the owner knows they are nobody's
now, and has them adopted (``backup_server.py``). A data path whose last run did not
stop, without durable mode, lost what its memory queues held: it takes a new name too
(``run_marker.py``).
"""
from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field

FILE = "generations.json"


@dataclass
class Generations:
    own: int = 1  # the generation of what this node publishes now
    fenced: dict[str, int] = field(default_factory=dict)  # owner -> newest generation refused
    announced: dict[str, int] = field(default_factory=dict)  # owner -> newest generation adopted
    path: str | None = None
    incarnation: str = field(default_factory=lambda: secrets.token_hex(8))  # this data path's life

    @classmethod
    def load(cls, directory: str) -> "Generations":
        path = os.path.join(directory, FILE)
        try:
            with open(path) as f:
                data = json.load(f)
        except FileNotFoundError:
            made = cls(path=path)
            made.save()  # the incarnation must outlive a restart that keeps the data path
            return made
        loaded = cls(int(data["own"]), {k: int(v) for k, v in data["fenced"].items()},
                     {k: int(v) for k, v in data["announced"].items()}, path)
        if "incarnation" in data:
            loaded.incarnation = str(data["incarnation"])
        else:  # written before incarnations: this life gets its name now
            loaded.save()
        return loaded

    def save(self) -> None:
        if self.path is None:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        temp = self.path + ".tmp"
        with open(temp, "w") as f:
            json.dump({"own": self.own, "fenced": self.fenced, "announced": self.announced,
                       "incarnation": self.incarnation}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, self.path)

    # -- a peer's side ------------------------------------------------------------
    def fence(self, owner: str, generation: int) -> None:
        """Refuse ``owner``'s frames of ``generation`` and older from now on."""
        if generation > self.fenced.get(owner, 0):
            self.fenced[owner] = generation
            self.save()

    def new_life(self) -> None:
        """This data path lost messages it had acknowledged (its run before did not stop,
        and what its memory queues held is gone): it speaks as another incarnation, so
        that the backups holding their copies have them adopted."""
        self.incarnation = secrets.token_hex(8)
        self.save()

    def announce(self, owner: str, generation: int) -> None:
        """``owner``'s copies up to ``generation`` are adopted: tell it when it says HELLO."""
        if generation > self.announced.get(owner, 0) or generation > self.fenced.get(owner, 0):
            self.fenced[owner] = max(generation, self.fenced.get(owner, 0))
            self.announced[owner] = max(generation, self.announced.get(owner, 0))
            self.save()

    def refuses(self, owner: str, generation: int) -> bool:
        return max(generation, 1) <= self.fenced.get(owner, 0)

    def announced_for(self, owner: str) -> int:
        return self.announced.get(owner, 0)

    # -- the owner's side ---------------------------------------------------------
    def superseded_by(self, fence: int) -> bool:
        """A WELCOME's fence: True when it covers our generation, which then moves past it."""
        if fence < self.own:
            return False
        self.own = fence + 1
        self.save()
        return True
