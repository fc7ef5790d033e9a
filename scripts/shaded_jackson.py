"""Build ``iceberg-shaded-jackson.jar``: pyspark's Jackson relocated the way Iceberg relocates it.

``iceberg_jars.py`` calls :func:`build_shaded_jackson` only when the Iceberg Spark runtime jar it
extracted lacks Iceberg's relocated Jackson
(``org/apache/iceberg/shaded/com/fasterxml/jackson/...``: ``--wheel-version 1.0.3``), or when
``--force-shade`` asks for the companion jar anyway. Without those classes the runtime jar fails
with ``NoClassDefFoundError: org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder``.

The build:

1. Debian's ``libjarjar-java`` is fetched with ``apt-get download`` through a private apt
   configuration whose single source is the system's main Debian archive entry (nothing is
   installed on the system; the package has no run-time dependencies because it bundles its own
   ASM) and unpacked with ``dpkg -x`` into ``<repo>/.cache/jarjar/``; later builds reuse it.
2. pyspark's own ``jackson-core``, ``jackson-databind``, ``jackson-annotations`` and
   ``jackson-datatype-jsr310`` jars (from the ``jars/`` directory of the pyspark imported by the
   given python) are merged into one jar without ``META-INF/versions``, ``module-info.class``,
   service files and signatures.
3. jarjar relocates that jar with the rule
   ``rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from debian_packages import fetch_debian_package
from jar_tools import CACHE_ROOT, DEFAULT_PYTHON, JarAssemblyError, jar_has, log, run

SHADED_JACKSON_JAR = "iceberg-shaded-jackson.jar"
#: A class that the runtime jar loads for any catalog operation.
SHADED_JACKSON_PROBE = "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class"
JARJAR_PACKAGE = "libjarjar-java"
JARJAR_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1"
JACKSON_JAR_RE = re.compile(r"^jackson-(core|databind|annotations|datatype-jsr310)-(\d[\w.\-]*)\.jar$")
JACKSON_ARTIFACTS = ("core", "databind", "annotations", "datatype-jsr310")


def _ensure_jarjar(complete_wheel_version: str) -> Path:
    """Fetch Debian's jarjar with a private apt configuration; return its jar."""
    try:
        return fetch_debian_package(JARJAR_PACKAGE, CACHE_ROOT / "jarjar", "usr/share/java/jarjar.jar")
    except JarAssemblyError as exc:
        raise JarAssemblyError(
            f"{exc}\n  Or use wheel version {complete_wheel_version}, whose runtime jar needs no companion jar, "
            "or `--packages` where Maven is reachable."
        ) from None


def _pyspark_jackson_jars(python: str) -> list[Path]:
    """Locate pyspark's Jackson jars via ``import pyspark`` in *python*."""
    hint = (
        f"create the project venv with pyspark 3.5 (expected at {DEFAULT_PYTHON}), or pass "
        "--python pointing at an interpreter where `import pyspark` works."
    )
    proc = run(
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


def build_shaded_jackson(dest: Path, python: str, *, complete_wheel_version: str) -> tuple[Path, list[Path]]:
    """Build ``iceberg-shaded-jackson.jar`` in *dest* from the Jackson jars of *python*'s pyspark.

    Args:
        dest: output directory; the jar is written there atomically.
        python: interpreter whose ``import pyspark`` locates the Jackson jars.
        complete_wheel_version: the runtime-jar wheel version that needs no companion jar,
            suggested when jarjar cannot be fetched.

    Returns:
        The built jar and the Jackson jars it was built from (their signatures go into the stamp).

    Raises:
        JarAssemblyError: a step failed; the message tells what to do.
    """
    jarjar = _ensure_jarjar(complete_wheel_version)
    jackson = _pyspark_jackson_jars(python)
    log("relocating " + ", ".join(p.name for p in jackson) + " with jarjar ...")
    target = dest / SHADED_JACKSON_JAR
    with tempfile.TemporaryDirectory(prefix="iceberg-jarjar-", dir=dest) as tmp:
        merged = Path(tmp) / "jackson-merged.jar"
        _merge_jars(jackson, merged)
        rules = Path(tmp) / "rules.txt"
        rules.write_text(JARJAR_RULE + "\n")
        out = Path(tmp) / SHADED_JACKSON_JAR
        run(
            [_java(), "-jar", str(jarjar), "process", str(rules), str(merged), str(out)],
            what="jarjar process",
            hint=(
                f"check that `java -version` works and that {jarjar} is a valid jar "
                f"(delete {CACHE_ROOT / 'jarjar'} to fetch it again)."
            ),
        )
        if not out.is_file() or not jar_has(out, SHADED_JACKSON_PROBE):
            raise JarAssemblyError(
                f"jarjar produced no {SHADED_JACKSON_PROBE}.\n"
                f"  What to do: check the rule {JARJAR_RULE!r} and pyspark's Jackson jars {jackson}."
            )
        os.replace(out, target)
    return target, jackson
