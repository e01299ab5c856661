"""A minimal keep-alive HTTP/1.1 GET of `/metrics`: the scrape's hot path (`VllmClient.scrape_text`).

Why it exists: the monitor scrapes every server at 2 Hz (`--interval 0.25`: 4 Hz), and a fleet of
32 servers at 4 Hz is 128 scrapes a second. Through httpx one GET of a 56 KB page costs ~2.3 ms of
CPU here; over one kept-alive asyncio stream it costs ~0.3 ms. This path only handles the plain
case, a `200` with a `Content-Length` or chunked `text/plain` body on plain `http://` without a
proxy; anything else raises `FastGetUnsupported` and `VllmClient.scrape_text` asks httpx instead,
which also words every error as the monitor does.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 2**20


class FastGetUnsupported(Exception):
    """Not the plain case (status, encoding, framing, content type): use the full client."""


class FastGet:
    """GET `path` on one kept-alive connection (reconnects after any failure)."""

    def __init__(self, base_url: str, *, api_key: str | None = None) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._host_header = parts.netloc.rsplit("@", 1)[-1]
        self._auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self._prefix = parts.path.rstrip("/")
        self._requests: dict[str, bytes] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def _request(self, path: str) -> bytes:
        """The request bytes for `path` (built once per path: the filtered scrape asks two)."""
        request = self._requests.get(path)
        if request is None:
            full = (self._prefix + path) or "/"
            request = self._requests[path] = (
                f"GET {full} HTTP/1.1\r\nHost: {self._host_header}\r\nUser-Agent: mtpwatch\r\n"
                f"Accept: text/plain\r\n{self._auth}Connection: keep-alive\r\n\r\n"
            ).encode("latin-1")
        return request

    async def get(self, path: str = "/metrics") -> str:
        """The body of a 200 answer to GET `path`; raises FastGetUnsupported, OSError or
        asyncio.IncompleteReadError."""
        try:
            return await self._get(path)
        except BaseException:
            self.close()  # a half-read answer leaves the connection unusable (cancellation included)
            raise

    async def _get(self, path: str) -> str:
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=_MAX_HEAD)
        reader, writer = self._reader, self._writer
        assert reader is not None
        writer.write(self._request(path))
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, _, rest = head.partition("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or parts[1] != "200":
            raise FastGetUnsupported(status_line)
        fields = (line.partition(":") for line in rest.split("\r\n"))
        headers = {name.strip().lower(): value.strip().lower() for name, sep, value in fields if sep}
        if headers.get("content-encoding", "identity") != "identity":
            raise FastGetUnsupported("content-encoding")
        ctype = headers.get("content-type", "")
        if "html" in ctype or "json" in ctype:
            raise FastGetUnsupported(ctype)
        if "content-length" in headers:
            n = int(headers["content-length"])
            if n > _MAX_BODY:
                raise FastGetUnsupported("body too large")
            body = await reader.readexactly(n)
        elif headers.get("transfer-encoding") == "chunked":
            pieces: list[bytes] = []
            size = 0
            while True:
                size_line = await reader.readuntil(b"\r\n")
                n = int(size_line.split(b";", 1)[0].strip(), 16)
                if n == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass  # trailers
                    break
                size += n
                if size > _MAX_BODY:
                    raise FastGetUnsupported("body too large")
                pieces.append((await reader.readexactly(n + 2))[:-2])
            body = b"".join(pieces)
        else:
            raise FastGetUnsupported("no length")
        if headers.get("connection") == "close":
            self.close()
        return body.decode("utf-8", "replace")

    def close(self) -> None:
        """Drop the connection (the next get reconnects)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._reader = self._writer = None
