"""kcoord.spark beyond one process: a plan on Spark's ``local-cluster`` master (a master, two workers and two
executor JVMs, each with its own Python workers), with kcoord coming only from a venv shipped to the executors.

The driver runs from this checkout's venv, in a process of its own (one SparkContext per process: the other Spark
tests keep theirs open). The executors get a fresh venv holding kcoord's wheel, its runtime dependencies and
pyarrow, packed with venv-pack and shipped through ``spark.archives`` (``env.tar.gz#environment``), as the README
tells users to do; their Python is ``./environment/bin/python``. PySpark is not in that venv: executors get it
from SPARK_HOME's python/lib zips, as on any cluster. The test proves where the executors' kcoord came from and
that their plans equal the in-process assignors group by group.

How local-cluster runs with a pip-installed PySpark: SPARK_HOME is the pyspark package directory (its bin/, jars/
and python/lib/ are what the workers launch executors and Python workers from). The workers keep their executors'
working directories, where the archive is unpacked, under SPARK_HOME/work/; so that nothing is written into the
installed package, SPARK_HOME is a temporary directory linking pyspark's bin/, jars/ and python/, with a work/ of
its own. A driver that is a plain Python process (not spark-submit) takes the executors' Python from
PYSPARK_PYTHON when its SparkContext starts; ``spark.pyspark.python`` is set too, as a spark-submit would need.
Everything binds to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

# first: without the spark extra, tests.support.spark_estate skips the module importing it (a wheel's test run) or
# fails (`make test`)
from tests.support.spark_estate import Estate, assert_equal_by_group, by_group  # isort: skip

import pyspark  # noqa: E402

from kcoord import spark as S  # noqa: E402

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
MASTER = "local-cluster[2,1,1024]"  # 2 workers × 1 core × 1024 MiB: one executor JVM each
# What the executors' Python needs beyond kcoord's wheel and its runtime dependencies: pyarrow (mapInArrow). Not
# pandas (mapInArrow does not use it) nor PySpark (Spark ships it).
WORKER_EXTRAS = ("pyarrow",)
ESTATE_SEED, ESTATE_GROUPS = 345, 60
CASES = {"range": 8, "cooperative-sticky": None}  # assignor: split_partitions (range: groups split in chunks)


def spark_home(root: Path) -> Path:
    """A SPARK_HOME that is pyspark's package directory but for work/ (the executors' working directories)."""
    home = root / "spark-home"
    home.mkdir()
    package = Path(pyspark.__file__).resolve().parent
    for name in ("bin", "jars", "python"):
        (home / name).symlink_to(package / name, target_is_directory=True)
    (home / "work").mkdir()
    return home


def runtime_requirements(wheel: Path) -> list[str]:
    """The names of the wheel's dependencies (Requires-Dist without an extra)."""
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        lines = z.read(meta).decode().splitlines()
    reqs = [line.split(":", 1)[1] for line in lines if line.startswith("Requires-Dist:")]
    return [re.match(r"\s*([A-Za-z0-9._-]+)", r).group(1) for r in reqs if not re.search(r"\bextra\s*==", r)]


def pack_worker_env(root: Path, timings: dict[str, float]) -> Path:
    """A fresh venv with kcoord's wheel, packed by venv-pack: the archive the executors unpack."""
    import venv_pack

    from tests.support.wheelhouse import kcoord_wheel

    wheel = kcoord_wheel()
    start = time.perf_counter()
    env = root / "worker-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    # each at the driver's version: the same pyarrow on both sides of Arrow's stream, and pip finds them cached
    pins = [f"{name}=={version(name)}" for name in (*runtime_requirements(wheel), *WORKER_EXTRAS)]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "--quiet",
                    "--no-compile", "--disable-pip-version-check", str(wheel), *pins], check=True,
                   stdin=subprocess.DEVNULL)
    timings["install_s"] = time.perf_counter() - start
    start = time.perf_counter()
    archive = root / "worker-env.tar.gz"
    venv_pack.pack(prefix=str(env), output=str(archive), compress_level=1)
    timings["pack_s"] = time.perf_counter() - start
    timings["archive_mb"] = archive.stat().st_size / 2**20
    shutil.rmtree(env)  # only the archive goes on
    return archive


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Runs the driver below on local-cluster in a process of its own; yields what it reported."""
    root = tmp_path_factory.mktemp("spark-cluster")
    timings: dict[str, float] = {}
    archive = pack_worker_env(root, timings)
    home = spark_home(root)
    out = root / "result.json"
    # nothing of this process's Python setup reaches the executors: no PYTHONPATH, no PYSPARK_* or SPARK_* but ours
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_")) and k != "PYTHONPATH"}
    env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON="./environment/bin/python")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tests.interop.test_spark_cluster", str(archive), str(out)], cwd=ROOT,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    timings["driver_s"] = time.perf_counter() - start
    try:
        assert done.returncode == 0, f"the driver failed ({done.returncode}):\n{done.stdout[-4000:]}\n" \
                                     f"{done.stderr[-8000:]}"
        result = json.loads(out.read_text())
        result["timings"] = {**timings, **result.pop("driver_timings")}
        print("local-cluster:", ", ".join(f"{k} {v:.1f}" for k, v in result["timings"].items()))
        result["work"] = str(home / "work")
        yield result
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the unpacked venvs: a few hundred MB


def test_executors_import_kcoord_from_the_shipped_archive(cluster_run):
    probes = cluster_run["probes"]
    work = Path(cluster_run["work"])
    assert len(probes) == 2 and len({p["pid"] for p in probes}) == 2  # a barrier stage: one task per executor
    assert cluster_run["executors"] == 2
    dirs = set()
    for p in probes:
        cwd = Path(p["cwd"])  # SPARK_HOME/work/<app>/<executor id>: an executor's working directory
        assert cwd.parent.parent.resolve() == work.resolve(), p
        dirs.add(cwd)
        unpacked = cwd / "environment"
        assert Path(p["executable"]).is_relative_to(unpacked), p
        assert Path(p["prefix"]) == unpacked, p
        assert Path(p["kcoord"]).is_relative_to(unpacked / "lib"), p
        assert Path(p["kcoord_spark"]).is_relative_to(unpacked / "lib"), p
        assert Path(p["pyarrow"]).is_relative_to(unpacked / "lib"), p
        assert not any(Path(p[k]).is_relative_to(ROOT) for k in ("executable", "prefix", "kcoord")), p
        assert p["pid"] != cluster_run["driver_pid"]
        # PySpark comes from SPARK_HOME's zip, not from the archive (which does not hold it)
        assert Path(p["pyspark"]).is_relative_to(work.parent / "python" / "lib" / "pyspark.zip"), p
    assert len(dirs) == 2
    # and the driver ran this checkout's venv
    assert Path(cluster_run["driver_executable"]).parent == Path(sys.executable).parent


@pytest.mark.parametrize("assignor", list(CASES))
def test_plan_on_local_cluster_equals_the_in_process_assignors(cluster_run, assignor):
    estate = Estate(seed=ESTATE_SEED, groups=ESTATE_GROUPS)
    got = cluster_run["plans"][assignor]
    assert_equal_by_group(estate, assignor, got)
    assert sum(len(ms) for ms in got.values()) == len(estate.rows)
    if CASES[assignor] is not None:  # some groups were planned in chunks, by separate tasks
        assert cluster_run["split_groups"][assignor] > 0


def test_local_session_takes_the_workers_python_from_spark_pyspark_python(monkeypatch):
    # PySpark reads the workers' Python from PYSPARK_PYTHON when the context starts; local_session puts the
    # setting there (no Spark started here: the builder is a stand-in)
    seen: dict[str, Any] = {}

    class Builder:
        def __getattr__(self, name: str) -> Any:
            return lambda *args: self

        def getOrCreate(self) -> Any:
            seen["python"] = os.environ.get("PYSPARK_PYTHON")
            return type("Session", (), {"sparkContext": type("Context", (), {"setLogLevel": lambda *a: None})()})()

    monkeypatch.setattr(S, "SparkSession", type("SparkSession", (), {"builder": Builder()}))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    S.local_session("spark://nowhere:7077", conf={"spark.pyspark.python": "./environment/bin/python"})
    assert seen["python"] == "./environment/bin/python"
    monkeypatch.delenv("PYSPARK_PYTHON")
    S.local_session("local[1]")
    assert seen["python"] == sys.executable


# ---------------------------------------------------------------------------------------------------------------
# The driver: python -m tests.interop.test_spark_cluster ARCHIVE OUT.json (cwd: the checkout; env: see cluster_run)


def probe(batches: Iterator[Any]) -> Iterator[Any]:
    """Where a task's Python and kcoord come from (a mapInArrow body run on the executors)."""
    import pyarrow as pa

    import kcoord
    import kcoord.spark

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{
        "pid": os.getpid(), "cwd": os.getcwd(), "executable": sys.executable, "prefix": sys.prefix,
        "kcoord": kcoord.__file__, "kcoord_spark": kcoord.spark.__file__, "pyarrow": pa.__file__,
        "pyspark": sys.modules["pyspark"].__file__}])


PROBE_SCHEMA = ("pid long, cwd string, executable string, prefix string, kcoord string, kcoord_spark string, "
                "pyarrow string, pyspark string")


def driver(archive: str, out: str) -> None:
    from pyspark.sql import SparkSession

    timings = {}
    start = time.perf_counter()
    spark = (SparkSession.builder.master(MASTER).appName("kcoord-local-cluster")
             .config("spark.archives", f"{archive}#environment")
             .config("spark.pyspark.python", "./environment/bin/python")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")  # both executors before any job
             .config("spark.sql.shuffle.partitions", "4").config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    timings["session_s"] = time.perf_counter() - start
    try:
        # a barrier stage of two tasks needs both executors' single cores at once: one probe from each
        start = time.perf_counter()
        probes = [r.asDict() for r in spark.range(0, 2, 1, 2).mapInArrow(probe, PROBE_SCHEMA, barrier=True)
                  .collect()]
        timings["probe_s"] = time.perf_counter() - start
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # less the driver
        estate = Estate(seed=ESTATE_SEED, groups=ESTATE_GROUPS)
        members, topics = estate.frames(spark)
        plans, split = {}, {}
        for assignor, split_partitions in CASES.items():
            start = time.perf_counter()
            plans[assignor] = by_group(S.plan(members, topics, assignor, split_partitions=split_partitions))
            timings[f"plan_{assignor}_s"] = time.perf_counter() - start
            split[assignor] = len({c[0] for c in S._prepare(members, topics, assignor, split_partitions,
                                                            check=False)[4]})
        Path(out).write_text(json.dumps({"probes": probes, "executors": executors, "plans": plans,
                                         "split_groups": split, "driver_pid": os.getpid(),
                                         "driver_executable": sys.executable, "driver_timings": timings}))
    finally:
        spark.stop()


if __name__ == "__main__":
    driver(*sys.argv[1:3])
