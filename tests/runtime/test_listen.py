"""The listening sockets of proctor's servers hand out connections with Nagle's algorithm off."""

from __future__ import annotations

import asyncio
import socket

import pytest

from proctor.console.serve import bind_socket
from proctor.errors import UsageError
from proctor.runtime.listen import listen_tcp


def _accepted_nodelay(sock: socket.socket) -> int:
    """TCP_NODELAY of the server side of one connection accepted by asyncio on ``sock``."""

    async def main() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handle(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            accepted = w.get_extra_info("socket")
            seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            w.close()

        server = await asyncio.start_server(handle, sock=sock)
        async with server:
            reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(seen, 10)
            await reader.read()
            writer.close()
            await writer.wait_closed()
        return value

    return asyncio.run(main())


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "[::1]"])
def test_accepted_connections_send_small_replies_at_once(host: str) -> None:
    if ":" in host and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    sock = listen_tcp(host, 0)
    assert sock.proto == socket.IPPROTO_TCP
    assert _accepted_nodelay(sock) != 0


def test_the_console_socket_is_made_the_same_way() -> None:
    assert _accepted_nodelay(bind_socket("127.0.0.1", 0)) != 0


def test_a_taken_address_is_refused_with_the_console_code_and_closes_nothing_else() -> None:
    first = listen_tcp("127.0.0.1", 0)
    try:
        first_port = first.getsockname()[1]
        # SO_REUSEADDR does not let a second listener take a port that is listening
        with pytest.raises(UsageError) as refused:
            bind_socket("127.0.0.1", first_port)
        assert refused.value.code == "console_bind_failed"
        assert first.fileno() != -1
    finally:
        first.close()
