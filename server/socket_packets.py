"""Socket.IO packets whose JSON nests deeper than Python's parser goes still get an answer.

python-socketio decodes a packet before it knows which handler it is for; a RecursionError there
drops the packet, so the sender's `call` waits for an acknowledgement that never comes.
"""

from __future__ import annotations

from socketio import packet

# The event an undecodable event arrives as; its handler acknowledges it with `invalid_json`.
UNDECODABLE_EVENT = "_undecodable_event"


class TolerantPacket(packet.Packet):
    """An event that cannot be decoded keeps its acknowledgement id and becomes UNDECODABLE_EVENT;
    a connect whose auth data cannot be decoded connects without auth data (refused when tokens are on)."""

    def decode(self, encoded_packet):
        try:
            return super().decode(encoded_packet)
        except RecursionError:
            if self.packet_type == packet.EVENT:
                self.data = [UNDECODABLE_EVENT]
            elif self.packet_type == packet.CONNECT:
                self.data = None
            else:
                raise
            return 0
