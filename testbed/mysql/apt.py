"""``apt-get``/``apt-cache`` confined to a private sources list, package lists and cache: the
system's apt setup is read (to find its Debian mirror) but never changed."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from testbed.mysql.errors import LocalMySQLError, log
from testbed.mysql.process import run

DEFAULT_SUITE: Final = "sid"
FALLBACK_MIRROR: Final = "http://deb.debian.org/debian"
DEFAULT_KEYRING: Final = "/usr/share/keyrings/debian-archive-keyring.gpg"
MIRROR_ENV: Final = "MYSQL_CDC_DEBIAN_MIRROR"
SUITE_ENV: Final = "MYSQL_CDC_DEBIAN_SUITE"

#: One enabled apt source: (types, uris, suites, components, signed_by keyring or None).
AptSource = tuple[list[str], list[str], list[str], list[str], str | None]


def _sources_files() -> list[Path]:
    etc = Path("/etc/apt")
    files = [etc / "sources.list"]
    parts = etc / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in {".list", ".sources"})
    return files


def _deb822_sources(text: str) -> Iterator[AptSource]:
    """The enabled stanzas of a deb822 ``.sources`` file."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        signed_by = fields.get("signed-by")
        yield (
            fields.get("types", "").split(),
            fields.get("uris", "").split(),
            fields.get("suites", "").split(),
            fields.get("components", "").split(),
            signed_by if signed_by and signed_by.startswith("/") else None,
        )


def _one_line_sources(text: str) -> Iterator[AptSource]:
    """The ``deb``/``deb-src`` lines of a one-line-style ``.list`` file."""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        match = re.match(r"^(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
        if not match:
            continue
        options = dict(opt.split("=", 1) for opt in (match.group(2) or "").split() if "=" in opt)
        signed = options.get("signed-by")
        yield (
            [match.group(1)],
            [match.group(3)],
            [match.group(4)],
            match.group(5).split(),
            signed if signed and signed.startswith("/") else None,
        )


def system_sources() -> Iterator[AptSource]:
    """Every enabled system apt source (``/etc/apt/sources.list`` and ``sources.list.d``)."""
    for path in _sources_files():
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        yield from _deb822_sources(text) if path.suffix == ".sources" else _one_line_sources(text)


def debian_mirror() -> tuple[str, str]:
    """``(mirror URL, keyring)``: ``$MYSQL_CDC_DEBIAN_MIRROR`` or the Debian mirror the system uses."""
    override = os.environ.get(MIRROR_ENV)
    if override:
        return override.rstrip("/"), DEFAULT_KEYRING
    for types, uris, suites, components, signed_by in system_sources():
        if "deb" not in types or "main" not in components or any("security" in s for s in suites):
            continue
        for uri in uris:
            if uri.rstrip("/").endswith("/debian") and "security" not in uri:
                return uri.rstrip("/"), signed_by or DEFAULT_KEYRING
    return FALLBACK_MIRROR, DEFAULT_KEYRING


class PrivateApt:
    """``apt-get``/``apt-cache`` with their sources list, package lists and cache under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mirror, keyring = debian_mirror()
        self.suite = os.environ.get(SUITE_ENV, DEFAULT_SUITE)
        if not Path(keyring).is_file():
            raise LocalMySQLError(
                f"the Debian archive keyring {keyring} is missing (apt-get install debian-archive-keyring)"
            )
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        for sub in ("lists/partial", "cache/archives/partial"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.sources = root / f"{self.suite}.sources"
        self.sources.write_text(
            f"Types: deb\nURIs: {self.mirror}\nSuites: {self.suite}\nComponents: main\n"
            f"Architectures: {arch}\nSigned-By: {keyring}\n",
            encoding="utf-8",
        )
        self.options = [
            "-o", f"Dir::Etc::SourceList={self.sources}",
            "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={root / 'lists'}",
            "-o", f"Dir::Cache={root / 'cache'}",
            "-o", "Acquire::Languages=none",
            "-o", "APT::Get::Show-Versions=1",
        ]  # fmt: skip
        if os.geteuid() == 0:
            # The private download directory is not readable by the _apt sandbox user.
            self.options += ["-o", "APT::Sandbox::User=root"]

    def update(self) -> None:
        """Fetch the suite's package index into the private lists."""
        log(f"fetching the package index of Debian {self.suite} from {self.mirror} ...")
        run(["apt-get", *self.options, "-q", "update"], what="apt-get update (private sources list)")

    def depends(self, packages: Iterable[str]) -> dict[str, list[str]]:
        """Direct ``Depends``/``Pre-Depends`` of each package (virtual packages left out)."""
        names = sorted(set(packages))
        if not names:
            return {}
        result = run(
            ["apt-cache", *self.options, "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
             "--no-breaks", "--no-replaces", "--no-enhances", *names],
            what="apt-cache depends",
        )  # fmt: skip
        depends: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in result.stdout.splitlines():
            if line and not line[0].isspace():
                current = depends.setdefault(line.strip(), [])
                continue
            match = re.match(r"^\s*\|?(?:Pre)?Depends:\s*(\S+)", line)
            if match and current is not None and not match.group(1).startswith("<"):
                current.append(match.group(1).split(":", 1)[0])
        return depends

    def download(self, packages: Iterable[str], destination: Path) -> dict[str, Path]:
        """Download the candidate ``.deb`` of each package into ``destination``; name -> file."""
        names = sorted(set(packages))
        if not names:
            return {}
        destination.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=destination, prefix=".download-") as tmp:
            run(["apt-get", *self.options, "-q", "download", *names], cwd=Path(tmp), what="apt-get download")
            files: dict[str, Path] = {}
            for deb in sorted(Path(tmp).glob("*.deb")):
                name = run(["dpkg-deb", "-f", str(deb), "Package"]).stdout.strip()
                target = destination / deb.name
                os.replace(deb, target)
                files[name] = target
        absent = set(names) - set(files)
        if absent:
            raise LocalMySQLError(f"apt-get download did not produce a .deb for: {', '.join(sorted(absent))}")
        return files


def deb_file_names(deb: Path) -> frozenset[str]:
    """Base names of every file and symlink in a ``.deb`` (to match sonames against)."""
    listing = run(["dpkg-deb", "-c", str(deb)]).stdout
    names: set[str] = set()
    for line in listing.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6:
            names.add(Path(parts[5].split(" -> ", 1)[0]).name)
    return frozenset(names)
