"""Fetch one Debian package and unpack it into ``<repo>/.cache``, without installing anything.

``apt-get download`` through a private apt configuration whose single source is the system's main
Debian archive entry (its lists and cache in the package's own folder under ``.cache``), then
``dpkg -x``. Used for Java tools and jars that no PyPI package carries: jarjar (``shaded_jackson.py``)
and the MariaDB Connector/J JDBC driver of the JDBC catalog tests (``jdbc_jars.py``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

from jar_tools import JarAssemblyError, log, run

AptEntry = tuple[str, str, str | None]  # (uri, suite, signed_by)


def _os_codename() -> str:
    """Return ``VERSION_CODENAME`` from ``/etc/os-release`` ("" if unknown)."""
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return ""


def _parse_one_line_sources(text: str) -> list[AptEntry]:
    """Parse one-line ``deb ...`` entries that include the ``main`` component."""
    entries: list[AptEntry] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        signed_by = None
        match = re.match(r"deb\s+\[([^\]]*)\]\s+(.*)", line)
        if match:
            for opt in match.group(1).split():
                if opt.startswith("signed-by="):
                    signed_by = opt.split("=", 1)[1]
            rest = match.group(2).split()
        else:
            rest = line.split()[1:]
        if len(rest) >= 3 and "main" in rest[2:]:  # uri, suite, components...
            entries.append((rest[0], rest[1], signed_by))
    return entries


def _parse_deb822_sources(text: str) -> list[AptEntry]:
    """Parse deb822 (``*.sources``) stanzas of type ``deb`` with the ``main`` component."""
    entries: list[AptEntry] = []
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for raw in block.splitlines():
            if raw.startswith("#") or ":" not in raw or raw[:1].isspace():
                continue
            key, value = raw.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        if "main" not in fields.get("components", "").split():
            continue
        signed_by = fields.get("signed-by")
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                entries.append((uri, suite, signed_by))
    return entries


def system_debian_source() -> AptEntry:
    """Return (uri, suite, signed_by) of the system's main Debian archive entry.

    Reads ``/etc/apt/sources.list`` (one-line format) and the ``*.list`` and
    ``*.sources`` (deb822) files of ``/etc/apt/sources.list.d``, and prefers an
    entry for the release codename with the ``main`` component that is not a
    security or updates suite. Falls back to ``deb.debian.org``.
    """
    codename = _os_codename()
    entries: list[AptEntry] = []
    with contextlib.suppress(OSError):
        entries += _parse_one_line_sources(Path("/etc/apt/sources.list").read_text())
    parts = Path("/etc/apt/sources.list.d")
    if parts.is_dir():
        for path in sorted(parts.iterdir()):
            with contextlib.suppress(OSError):
                if path.suffix == ".list":
                    entries += _parse_one_line_sources(path.read_text())
                elif path.suffix == ".sources":
                    entries += _parse_deb822_sources(path.read_text())

    def rank(entry: AptEntry) -> int:
        uri, suite, _ = entry
        return -((4 if suite == codename else 0) + (2 if "-" not in suite else 0) + (1 if "security" not in uri else 0))

    if entries:
        uri, suite, signed_by = min(entries, key=rank)
        # A multi-line Signed-By holds an inline key, which a one-line entry cannot.
        if signed_by and "\n" in signed_by:
            signed_by = None
        return uri, suite, signed_by
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    return "http://deb.debian.org/debian", codename or "bookworm", keyring if Path(keyring).exists() else None


def fetch_debian_package(package: str, root: Path, member: str) -> Path:
    """``package``'s file ``member`` (a path inside the package, e.g. ``usr/share/java/x.jar``), fetched
    and unpacked into ``root/root`` on first use; later calls reuse it."""
    unpacked = root / "root"
    found_member = unpacked / member
    if found_member.is_file():
        return found_member
    if not shutil.which("apt-get") or not shutil.which("dpkg"):
        raise JarAssemblyError(
            f"apt-get/dpkg not found, so {package} cannot be fetched from Debian.\n"
            "  What to do: run on Debian/Ubuntu, or put the file there by hand: " + str(found_member)
        )
    apt = root / "apt"
    for sub in ("lists/partial", "cache/archives/partial", "debs"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    uri, suite, signed_by = system_debian_source()
    option = f"[signed-by={signed_by}] " if signed_by else ""
    sources = apt / "sources.list"
    sources.write_text(f"deb {option}{uri} {suite} main\n")
    opts = [
        "-o",
        f"Dir::Etc::SourceList={sources}",
        "-o",
        "Dir::Etc::SourceParts=/dev/null",
        "-o",
        f"Dir::State::Lists={apt / 'lists'}",
        "-o",
        f"Dir::Cache={apt / 'cache'}",
        "-o",
        "Debug::NoLocking=1",
    ]
    if os.geteuid() == 0:
        # Keep apt from dropping to the _apt user, which cannot write here.
        opts += ["-o", "APT::Sandbox::User=root"]
    hint = (
        f"check that the Debian archive {uri} ({suite}) is reachable; the private apt "
        f"configuration is in {apt} (delete it to start over)."
    )
    log(f"fetching {package} from {uri} {suite} with a private apt configuration ...")
    run(["apt-get", *opts, "update"], what="apt-get update (private lists)", hint=hint)
    debs = apt / "debs"
    run(["apt-get", *opts, "download", package], what=f"apt-get download {package}", hint=hint, cwd=debs)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        raise JarAssemblyError(f"apt-get download left no {package}_*.deb in {debs}.\n  What to do: {hint}")
    shutil.rmtree(unpacked, ignore_errors=True)
    run(["dpkg", "-x", str(found[-1]), str(unpacked)], what="dpkg -x", hint=hint)
    if not found_member.is_file():
        raise JarAssemblyError(f"{found[-1].name} did not contain {member}.\n  What to do: {hint}")
    return found_member
