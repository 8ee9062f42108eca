"""Hypothesis strategies shared by the protocol property tests.

Each command strategy draws a pair: the bytes a client would send (built with the
public encoders) and the :class:`Command` nsqd's side must decode them into.
"""
from __future__ import annotations

import json
import string

from hypothesis import strategies as st

from nsq_protocol import commands
from nsq_protocol.commands import Command
from nsq_protocol.frames import FRAME_TYPES

NAME_ALPHABET = string.ascii_letters + string.digits + "._-"
# message ids travel inside a command line, so they never hold a space or a newline
ID_ALPHABET = bytes(range(0x21, 0x7F))

# small limits so that random data reaches the size checks often
SMALL_MSG = 64
SMALL_BODY = 256


@st.composite
def names(draw: st.DrawFn) -> str:
    ephemeral = draw(st.booleans())
    longest = 64 - len("#ephemeral") if ephemeral else 64
    base = draw(st.text(NAME_ALPHABET, min_size=1, max_size=longest))
    return base + "#ephemeral" if ephemeral else base


message_ids = st.binary(min_size=16, max_size=16).map(
    lambda raw: bytes(ID_ALPHABET[b % len(ID_ALPHABET)] for b in raw))
bodies = st.binary(min_size=1, max_size=SMALL_MSG)
delays = st.integers(min_value=0, max_value=60 * 60 * 1000)
# kept small and printable so an IDENTIFY body always fits SMALL_BODY
short_text = st.text(string.ascii_letters + string.digits + "_ -", max_size=12)
json_scalars = st.none() | st.booleans() | st.integers(-2**31, 2**31) | short_text


def _pub() -> st.SearchStrategy[tuple[bytes, Command]]:
    return st.builds(lambda t, b: (commands.pub(t, b), Command(b"PUB", (t.encode(),), body=b)),
                     names(), bodies)


def _mpub() -> st.SearchStrategy[tuple[bytes, Command]]:
    return st.builds(
        lambda t, bs: (commands.mpub(t, bs), Command(b"MPUB", (t.encode(),), bodies=bs)),
        names(), st.lists(bodies, min_size=1, max_size=3))


def _dpub() -> st.SearchStrategy[tuple[bytes, Command]]:
    return st.builds(
        lambda t, d, b: (commands.dpub(t, d, b),
                         Command(b"DPUB", (t.encode(), str(d).encode()), body=b, defer_ms=d)),
        names(), delays, bodies)


def _identify() -> st.SearchStrategy[tuple[bytes, Command]]:
    data = st.dictionaries(short_text, json_scalars, max_size=5)
    return data.map(lambda d: (commands.identify(d),
                               Command(b"IDENTIFY", (), body=json.dumps(d).encode())))


def _auth() -> st.SearchStrategy[tuple[bytes, Command]]:
    return st.binary(min_size=1, max_size=40).map(
        lambda s: (commands.auth(s), Command(b"AUTH", (), body=s)))


def _line_commands() -> st.SearchStrategy[tuple[bytes, Command]]:
    return st.one_of(
        st.builds(lambda t, c: (commands.sub(t, c), Command(b"SUB", (t.encode(), c.encode()))),
                  names(), names()),
        st.integers(0, 10_000).map(lambda n: (commands.rdy(n), Command(b"RDY", (str(n).encode(),)))),
        message_ids.map(lambda i: (commands.fin(i), Command(b"FIN", (i,)))),
        st.builds(lambda i, d: (commands.req(i, d), Command(b"REQ", (i, str(d).encode()))),
                  message_ids, delays),
        message_ids.map(lambda i: (commands.touch(i), Command(b"TOUCH", (i,)))),
        st.just((commands.cls(), Command(b"CLS", ()))),
        st.just((commands.nop(), Command(b"NOP", ()))),
    )


any_command = st.one_of(_line_commands(), _pub(), _mpub(), _dpub(), _identify(), _auth())
command_streams = st.lists(any_command, min_size=1, max_size=8)

frames = st.tuples(st.sampled_from(FRAME_TYPES), st.binary(max_size=300))
frame_streams = st.lists(frames, min_size=1, max_size=8)


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at random places (possibly into single bytes, possibly not at all)."""
    if draw(st.integers(0, 9)) == 0:
        return [data[i:i + 1] for i in range(len(data))]
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:])]


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few bytes flipped, inserted or deleted."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(("flip", "insert", "delete")))
        if action == "insert" or not out:
            at = draw(st.integers(0, len(out)))
            out[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif action == "flip":
            at = draw(st.integers(0, len(out) - 1))
            out[at] = draw(st.integers(0, 255))
        else:
            at = draw(st.integers(0, len(out) - 1))
            del out[at:at + draw(st.integers(1, 6))]
    return bytes(out)
