"""The report's Spark session: the local driver JVM's options, and its logging kept quiet.

How this works: a local report starts its own driver JVM (PySpark's gateway).  Unless Spark's
own logging is asked for (``mqadmin report lag --debug``), the JVM gets a log4j2 file that
lets only errors through from its first line, and its stderr is passed on line by line
without the JDK's one start-up notice about incubator modules (Spark's launcher always adds
the vector module), so the report's progress is all the operator reads.  Under
``spark-submit`` the JVM already runs with the cluster's logging: nothing here applies.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

SMALL_INPUT_BYTES = 200 << 20

#: The driver JVM's logging unless asked for Spark's own: errors only, so Spark's start-up
#: warnings (loopback hostname, native-hadoop, its log4j profile) do not come between the
#: report's progress lines.  The gateway's own logger is set too: Spark tells a shell
#: (which a PySpark driver is) its default level unless that logger has one.
QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""
#: What the JDK prints at start-up for the module Spark's launcher adds (not a Spark log line,
#: so no log4j setting reaches it).
JDK_NOTICE = b"WARNING: Using incubator modules:"


def java_opts(input_bytes: int | None) -> str:
    """The local driver JVM's options: the parallel collector, and only the quick C1
    compiler for a small input (a short job spends much of its time compiling; a long
    pass over a big one runs about twice as fast with C2).  MQADMIN_REPORT_JAVA_OPTS
    overrides them."""
    small = input_bytes is not None and input_bytes < SMALL_INPUT_BYTES
    return os.environ.get("MQADMIN_REPORT_JAVA_OPTS", "-XX:+UseParallelGC" + (
        " -XX:TieredStopAtLevel=1" if small else ""))


def quiet_log_config() -> Path:
    """A log4j2 properties file with `QUIET_LOG4J2` (written once, named by its content)."""
    digest = hashlib.sha256(QUIET_LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"mqadmin-spark-log4j2-{digest}.properties"
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(QUIET_LOG4J2, encoding="utf-8")
        tmp.replace(path)
    return path


def _pass_on(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours, but for the JDK's incubator notice."""
    for line in stream:
        if not line.startswith(JDK_NOTICE):
            os.write(2, line)


def _start_quiet_jvm(conf: SparkConf) -> None:
    """Start the driver JVM with its stderr passed through `_pass_on` (unless a JVM runs
    already: a session made and stopped earlier in this process, or spark-submit's)."""
    from subprocess import PIPE

    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    gateway = launch_gateway(conf, popen_kwargs={"stderr": PIPE})  # type: ignore[no-untyped-call]
    threading.Thread(target=_pass_on, args=(gateway.proc.stderr,), name="spark-stderr",
                     daemon=True).start()
    SparkContext(conf=conf, gateway=gateway)  # the session below takes this context


def session(master: str | None, app_name: str = "mqadmin-lag-report",
            input_size: int | None = None, spark_logs: bool = False) -> SparkSession:
    """The active session, or a new one on `master` configured for small aggregates
    (`input_size`: the input's bytes, when known, for the local JVM's compiler).  The
    driver JVM logs errors only from its start, unless `spark_logs` (Spark's own logging)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    options = {"spark.app.name": app_name, "spark.sql.session.timeZone": "UTC",
               "spark.ui.showConsoleProgress": "false", "spark.sql.adaptive.enabled": "true"}
    if master:
        options["spark.master"] = master
    java = []
    if master is None or master.startswith("local"):
        java.append(java_opts(input_size))
        options |= {"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "2g",
                    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
        # The local executors run the figures' Arrow UDF: they need this Python's pyarrow.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if not spark_logs:
        java.append(f"-Dlog4j2.configurationFile={quiet_log_config().as_uri()}")
    if java:
        options["spark.driver.extraJavaOptions"] = " ".join(java)
    if not spark_logs:
        _start_quiet_jvm(SparkConf(loadDefaults=False).setAll(list(options.items())))
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not spark_logs:
        spark.sparkContext.setLogLevel("ERROR")
    return spark
