"""Sans-IO codecs for NSQ's wire protocols.

Nothing in this package opens a socket or touches an event loop: it turns bytes into
typed values and back, and reports bad input as :class:`ProtocolError` values carrying
NSQ's error codes.
"""
from .errors import ProtocolError
from .frames import FRAME_ERROR, FRAME_MESSAGE, FRAME_RESPONSE, Frame, FrameDecoder, encode_frame
from .message import MSG_ID_LENGTH, WireMessage, decode_message, encode_message
from .names import is_ephemeral, is_valid_channel_name, is_valid_topic_name

MAGIC_V2 = b"  V2"
MAGIC_V1 = b"  V1"
HEARTBEAT = b"_heartbeat_"
OK = b"OK"
CLOSE_WAIT = b"CLOSE_WAIT"

__all__ = [
    "CLOSE_WAIT", "FRAME_ERROR", "FRAME_MESSAGE", "FRAME_RESPONSE", "HEARTBEAT", "MAGIC_V1",
    "MAGIC_V2", "MSG_ID_LENGTH", "OK", "Frame", "FrameDecoder", "ProtocolError", "WireMessage",
    "decode_message", "encode_frame", "encode_message", "is_ephemeral", "is_valid_channel_name",
    "is_valid_topic_name",
]
