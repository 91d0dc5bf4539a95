"""Apache 4.9.8's Java producer (`DefaultMQProducer`, the 4.x client) as a process that
prints the outcome of each send, for the failover test and benchmark.

It is compiled with javac against the Apache build that `APACHE_RMQ_HOME` names (its
`env.sh` gives the JVM, the options 4.9.8 needs on Java 17 and the classpath).  The producer
sends numbered bodies (`<prefix><8 digits>`) one after the other, synchronously, with the
client's own retries and route polling (every 200 ms here, 30 s by default), until it has
sent `count` (0: until its stdin closes).  Each send prints one line:

    <number> <SendStatus> <host:port of the broker that stored it>
    <number> ERROR <exception class>

A body counts as acknowledged only when the client said SEND_OK.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

HOME = os.environ.get("APACHE_RMQ_HOME", "")
CLASS = "FailoverProducer"

SOURCE = r"""
import java.io.IOException;
import java.net.InetSocketAddress;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;

public class FailoverProducer {
    static volatile boolean stop;

    static String storeHost(SendResult r) {
        try {
            InetSocketAddress a = (InetSocketAddress) MessageDecoder.decodeMessageId(
                r.getOffsetMsgId()).getAddress();
            return a.getAddress().getHostAddress() + ":" + a.getPort();
        } catch (Exception e) {
            return "?";
        }
    }

    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1], prefix = args[2];
        long count = Long.parseLong(args[3]);
        DefaultMQProducer producer = new DefaultMQProducer("FailoverJavaPG");
        producer.setNamesrvAddr(ns);
        producer.setInstanceName(prefix + ProcessHandle.current().pid());
        producer.setPollNameServerInterval(200);
        producer.setSendMsgTimeout(3000);
        producer.start();
        Thread eof = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                }
            } catch (IOException e) {
            }
            stop = true;
        });
        eof.setDaemon(true);
        eof.start();
        for (long i = 0; (count == 0 || i < count) && !stop; i++) {
            byte[] body = String.format("%s%08d", prefix, i).getBytes("UTF-8");
            String line;
            try {
                SendResult r = producer.send(new Message(topic, body));
                line = i + " " + r.getSendStatus() + " " + storeHost(r);
            } catch (Exception e) {
                line = i + " ERROR " + e.getClass().getSimpleName();
                Thread.sleep(20);
            }
            System.out.println(line);
            System.out.flush();
        }
        producer.shutdown();
        System.out.println("done");
        System.out.flush();
    }
}
"""


def available() -> bool:
    return bool(HOME) and Path(HOME, "env.sh").is_file()


def _env() -> tuple[str, list[str], str]:
    """The JVM, the options 4.9.8 needs on it and the classpath, from the build's env.sh."""
    out = subprocess.run(["bash", "-c", f'. "{HOME}/env.sh" && printf "%s\\n%s\\n%s" '
                          '"$JAVA" "$RMQ_COMMON_OPTS" "$RMQ_CP"'],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    return out[0], shlex.split(out[1]), out[2]


def command(workdir: Path, ns: str, topic: str, prefix: str, count: int) -> list[str]:
    """Compiles the producer under `workdir` (once) and returns the command that runs it."""
    java, opts, classpath = _env()
    if not (workdir / f"{CLASS}.class").is_file():
        workdir.mkdir(parents=True, exist_ok=True)
        src = workdir / f"{CLASS}.java"
        src.write_text(SOURCE)
        javac = str(Path(java).with_name("javac"))
        subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(workdir), str(src)],
                       check=True, capture_output=True)
    return [java, "-Xmx256m", *opts, f"-Duser.home={workdir}", "-cp",
            f"{workdir}:{classpath}", CLASS, ns, topic, prefix, str(count)]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One send: when its line was read (monotonic), its number, status and storing broker
    (`?`: the client does not say; then `started`, when the send began, monotonic)."""

    at: float
    number: int
    status: str
    broker: str
    started: float = 0.0


class JavaProducer:
    """The Java producer as a child process; `outcomes` grows as it prints."""

    def __init__(self, workdir: Path, ns: str, topic: str, prefix: str, count: int) -> None:
        self.args = command(workdir, ns, topic, prefix, count)
        self.env: dict[str, str] = {}  # over this process's environment
        self.prefix = prefix
        self.outcomes: list[Outcome] = []
        self.proc: asyncio.subprocess.Process | None = None

    def body(self, number: int) -> bytes:
        return f"{self.prefix}{number:08d}".encode()

    @property
    def acked(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "SEND_OK"]

    async def run(self) -> int:
        """Starts the producer and reads its lines until it exits; its exit code."""
        self.proc = await asyncio.create_subprocess_exec(
            *self.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env={**os.environ, **self.env})
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            parts = line.decode().split()
            if len(parts) in (3, 4) and parts[0].isdigit():
                self.outcomes.append(Outcome(time.monotonic(), int(parts[0]), parts[1],
                                             parts[2], float(parts[3]) if parts[3:] else 0.0))
        return await self.proc.wait()

    def stop(self) -> None:
        """Closes its stdin: it ends after the send in flight."""
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
