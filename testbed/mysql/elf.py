"""The unpacked prefix as a filesystem root: its library directories, its dynamic loader and the
shared libraries its binaries still miss (ELF ``DT_NEEDED`` read with the stdlib: binutils is not
guaranteed to be installed)."""

from __future__ import annotations

import os
import platform
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from testbed.mysql.errors import LocalMySQLError

#: machine -> (multiarch triplet, dynamic loader file name)
_ARCHES: Final[dict[str, tuple[str, str]]] = {
    "x86_64": ("x86_64-linux-gnu", "ld-linux-x86-64.so.2"),
    "aarch64": ("aarch64-linux-gnu", "ld-linux-aarch64.so.1"),
}


def _arch() -> tuple[str, str]:
    machine = platform.machine()
    try:
        return _ARCHES[machine]
    except KeyError:
        raise LocalMySQLError(f"unsupported machine architecture {machine!r} (supported: {sorted(_ARCHES)})") from None


def library_dirs(prefix: Path) -> list[Path]:
    """The prefix's library directories that exist, in search order."""
    triplet, _ = _arch()
    candidates = [prefix / "usr/lib" / triplet, prefix / "lib" / triplet, prefix / "usr/lib64", prefix / "lib64"]
    return [path for path in candidates if path.is_dir()]


def loader_path(prefix: Path) -> Path:
    """The prefix's own dynamic loader (``ld-linux-*.so``), which runs every bundled binary."""
    _, loader = _arch()
    for directory in library_dirs(prefix):
        resolved = resolve_in_prefix(prefix, directory / loader)
        if resolved is not None:
            return resolved
    raise LocalMySQLError(f"the dynamic loader {loader} is missing from {prefix}; run `install --force`")


def elf_needed(path: Path) -> list[str]:
    """The ``DT_NEEDED`` sonames of a 64-bit little-endian ELF file (empty for non-ELF files)."""
    with path.open("rb") as handle:
        header = handle.read(64)
        if len(header) < 64 or header[:4] != b"\x7fELF":
            return []
        if header[4] != 2 or header[5] != 1:
            raise LocalMySQLError(f"{path}: not a 64-bit little-endian ELF file")
        (phoff,) = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        handle.seek(phoff)
        table = handle.read(phentsize * phnum)
        loads: list[tuple[int, int, int]] = []
        dynamic: tuple[int, int] | None = None
        for index in range(phnum):
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz, _memsz, _align = struct.unpack_from(
                "<IIQQQQQQ", table, index * phentsize
            )
            if p_type == 1:  # PT_LOAD
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:  # PT_DYNAMIC
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            return []
        handle.seek(dynamic[0])
        entries = handle.read(dynamic[1])
        needed: list[int] = []
        strtab_address: int | None = None
        for offset in range(0, len(entries) - 15, 16):
            tag, value = struct.unpack_from("<qQ", entries, offset)
            if tag == 0:  # DT_NULL
                break
            if tag == 1:  # DT_NEEDED
                needed.append(value)
            elif tag == 5:  # DT_STRTAB
                strtab_address = value
        if strtab_address is None:
            return []
        strtab = next(
            (
                offset + strtab_address - vaddr
                for vaddr, offset, size in loads
                if vaddr <= strtab_address < vaddr + size
            ),
            None,
        )
        if strtab is None:
            raise LocalMySQLError(f"{path}: DT_STRTAB lies outside every PT_LOAD segment")
        names: list[str] = []
        for relative in needed:
            handle.seek(strtab + relative)
            names.append(handle.read(512).split(b"\0", 1)[0].decode("ascii"))
        return names


def resolve_in_prefix(prefix: Path, path: Path) -> Path | None:
    """Follow symlinks as if ``prefix`` were ``/``; the regular file reached, or None."""
    current = path
    for _ in range(40):
        if current.is_symlink():
            target = os.readlink(current)
            if target.startswith("/"):
                current = prefix / target.lstrip("/")
            else:
                current = Path(os.path.normpath(current.parent / target))
            continue
        return current if current.is_file() else None
    return None


def missing_sonames(prefix: Path, binaries: Sequence[str]) -> set[str]:
    """Sonames that ``binaries`` (paths relative to the prefix) need, transitively, but the prefix
    does not provide."""
    lib_dirs = library_dirs(prefix)
    queue: list[Path] = []
    for relative in binaries:
        binary = prefix / relative
        if not binary.is_file():
            raise LocalMySQLError(f"{relative} is missing from {prefix} after unpacking")
        queue.append(binary)
    seen: set[Path] = set(queue)
    missing: set[str] = set()
    while queue:
        for soname in elf_needed(queue.pop()):
            found = None
            for directory in lib_dirs:
                found = resolve_in_prefix(prefix, directory / soname)
                if found is not None:
                    break
            if found is None:
                missing.add(soname)
            elif found not in seen:
                seen.add(found)
                queue.append(found)
    return missing
