"""Socket.IO packets whose JSON nests deeper than Python's parser goes still get an answer.

python-socketio decodes a packet before it knows which handler it is for; a RecursionError there
drops the packet, so the sender's `call` waits for an acknowledgement that never comes.
"""

from __future__ import annotations

from typing import Any

from socketio import packet

# The event an undecodable event arrives as; its handler acknowledges it with `invalid_json`.
UNDECODABLE_EVENT = "_undecodable_event"


class TolerantPacket(packet.Packet):  # type: ignore[misc]  # python-socketio ships no type information
    """An event that cannot be decoded keeps its acknowledgement id and becomes UNDECODABLE_EVENT;
    a connect whose auth data cannot be decoded connects without auth data (refused when tokens are on)."""

    data: Any  # the event's name and arguments, or the connect's auth data

    def decode(self, encoded_packet: str | bytes) -> int:
        """The number of binary attachments that follow, as Packet.decode answers."""
        try:
            attachments: int = super().decode(encoded_packet)
            return attachments
        except RecursionError:
            if self.packet_type == packet.EVENT:
                self.data = [UNDECODABLE_EVENT]
            elif self.packet_type == packet.CONNECT:
                self.data = None
            else:
                raise
            return 0
