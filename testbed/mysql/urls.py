"""Server URLs (``mysql://USER:PASSWORD@HOST:PORT``) naming an existing server's admin account,
as given by ``MYSQL_CDC_EXTERNAL_URL`` or ``--mysql-url``."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from testbed.mysql.access import HOST, ROOT_USER


class ServerUrl(NamedTuple):
    """The parts of ``mysql://USER:PASSWORD@HOST:PORT`` (an existing server's admin account)."""

    scheme: str
    host: str
    port: int
    user: str
    password: str


def parse_server_url(url: str) -> ServerUrl:
    """Split a server URL (``MYSQL_CDC_EXTERNAL_URL``, ``--mysql-url``); user and password are URL-decoded.

    Missing parts default to ``127.0.0.1``, port 3306, user ``root`` and an empty password.
    """
    parts = urlsplit(url)
    return ServerUrl(
        scheme=parts.scheme,
        host=parts.hostname or HOST,
        port=parts.port or 3306,
        user=unquote(parts.username or ROOT_USER),
        password=unquote(parts.password or ""),
    )
