"""The socket a node serves HTTP on (``cronwheel.node.server.bind``)."""

from __future__ import annotations

import asyncio
import socket

from cronwheel.node.server import bind


async def test_accepted_connections_send_at_once_without_waiting_for_acks() -> None:
    """asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets whose protocol is
    IPPROTO_TCP. A listening socket made with protocol 0 gave connections that held a response's
    body until the client acknowledged its headers: 40 ms per request on a keep-alive connection
    (a client's delayed ACK), 23 requests/s where 2,300/s were possible."""
    listening = bind("127.0.0.1", 0)
    nodelay: list[int] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nodelay.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=listening)
    async with server:
        _, writer = await asyncio.open_connection(*listening.getsockname()[:2])
        for _ in range(100):
            if nodelay:
                break
            await asyncio.sleep(0.01)
        writer.close()
    assert nodelay == [1]
