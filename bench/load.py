"""Load on a two-replica deployment: N concurrent clients against two `goldenset serve
--no-scheduler` processes sharing one PostgreSQL database (or SQLite with `--database-url`), for a
bounded time after a warm-up, each request sent to the replicas in turn.

By default every client reads release item pages (`GET /v1/evals/{name}/releases/latest/items`,
the dev split of about 800 items, 740 KB), what eval pipelines do. `--mix mixed` sends, per client
and chosen at random with these weights: release item pages (50%), item pages (`GET
/v1/items?limit=50`, 25%), exports (`GET .../releases/latest/export.jsonl`, 10%) and pushes of 5
new records (`POST /v1/sources/{name}/items`, 15%). It prints requests per second, p50/p95/p99
and the errors of each kind, the CPU each process used, and a PASS/FAIL line for release item
pages at p99 <= 150 ms with 0 errors.

Every request is sent by a lean keep-alive client (`_Connection`): the load generator shares the
machine's cores with the replicas, and a full HTTP client per simulated client takes a share that
grows with the clients. The CPU line says what each process used; "requests per replica CPU-second"
is the replicas' own efficiency, whatever share of the cores they got.

The database is made once: CISA KEV records ingested, curated with the tests' hashing encoder
(no model is run), approved and released. The replicas run with `GOLDENSET_CURATE_AFTER_INGEST=false`,
as API replicas do; nothing curates during the run.

    .venv/bin/python bench/load.py                    # 16 clients, 60 s, PostgreSQL on 127.0.0.1
    .venv/bin/python bench/load.py --mix mixed --clients 32 --seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlmodel import select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from schemas.evals import EvalCreate  # noqa: E402
from schemas.item import Item, ItemStatus  # noqa: E402
from service.core.db import make_engine, migrate, write_session  # noqa: E402
from service.core.tokens import create_token  # noqa: E402
from service.evals.definitions import create_eval  # noqa: E402
from service.evals.refresh import refresh_eval  # noqa: E402
from tests.eval_support import ingest_and_curate, kev_records  # noqa: E402

SECRET = "bench-load-secret-key-0123456789abcdef0123456789"
EVAL = "kev"
SOURCE = "kev"
DATABASE = "bench_load"
LIMIT_P99_MS = 150.0
WEIGHTS = {"release_items": 50, "item_page": 25, "export": 10, "push": 15}


def _database_url(base: str) -> str:
    """A fresh database named DATABASE next to `base` (PostgreSQL), or `base` itself (SQLite)."""
    if not base.startswith("postgresql"):
        return base
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        connection.execute(text(f"CREATE DATABASE {DATABASE}"))
    admin.dispose()
    return base.rsplit("/", 1)[0] + f"/{DATABASE}"


def _prepare(url: str, records: int) -> str:
    """Ingest, curate, approve and release KEV records; return an admin token."""
    engine = make_engine(url)
    migrate(engine)
    started = time.perf_counter()
    ingest_and_curate(engine, SOURCE, kev_records()[:records])
    with write_session(engine) as session:
        create_eval(
            session=session,
            data=EvalCreate(name=EVAL, sources=[SOURCE], approval_policy="manual", max_age_days=None, sealed_fraction=0.2, target_size=records),
            secret_key=SECRET,
            actor="bench",
        )
        for item in session.exec(select(Item).where(Item.status == ItemStatus.UNIQUE.value)).all():
            item.status = ItemStatus.APPROVED.value
            session.add(item)
        token, _ = create_token(session=session, name="bench", scopes="admin")
        session.commit()
    refresh_eval(engine, name=EVAL, at=datetime.now(UTC), secret_key=SECRET, actor="bench")
    engine.dispose()
    print(f"database ready: {records} records in {time.perf_counter() - started:.1f} s", flush=True)
    return token


def _serve(url: str, port: int) -> subprocess.Popen[bytes]:
    environment = {
        **os.environ,
        "GOLDENSET_DATABASE_URL": url,
        "GOLDENSET_SECRET_KEY": SECRET,
        "GOLDENSET_CURATE_AFTER_INGEST": "false",
        "GOLDENSET_LOG_LEVEL": "WARNING",
    }
    command = [str(Path(sys.executable).parent / "goldenset"), "serve", "--no-scheduler", "--host", "127.0.0.1", "--port", str(port)]
    log = ROOT / "var" / "bench-load" / f"replica-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as output:  # each replica's warnings and errors, kept for reading after a run
        return subprocess.Popen(command, env=environment, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)  # noqa: S603 (our own entry point)


def _wait(base: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"{base} did not answer /healthz")


async def _client(bases: list[str], token: str, stop: float, seed: int, mix: dict[str, int], timings: dict[str, list[float]], errors: dict[str, int]) -> None:
    rng = random.Random(seed)
    kinds, weights = list(mix), list(mix.values())
    turn = seed
    connections = [_Connection(base, token) for base in bases]
    try:
        while time.monotonic() < stop:
            kind = rng.choices(kinds, weights)[0]
            connection = connections[turn % len(bases)]
            turn += 1
            started = time.perf_counter()
            try:
                if kind == "release_items":
                    status = await connection.request("GET", f"/v1/evals/{EVAL}/releases/latest/items")
                elif kind == "item_page":
                    status = await connection.request("GET", "/v1/items?limit=50")
                elif kind == "export":
                    status = await connection.request("GET", f"/v1/evals/{EVAL}/releases/latest/export.jsonl")
                else:
                    status = await connection.request("POST", f"/v1/sources/{SOURCE}/items", json.dumps(_push(seed, turn)).encode())
            except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
                errors[kind] += 1
                errors[f"{kind}:{type(exc).__name__}"] += 1
                continue
            elapsed = (time.perf_counter() - started) * 1000
            if status >= 400:
                errors[kind] += 1
                errors[f"{kind}:{status}"] += 1
            else:
                timings[kind].append(elapsed)
    finally:
        for connection in connections:
            connection.close()


class _Connection:
    """A lean HTTP/1.1 keep-alive client: it sends one request at a time and reads the status and
    the whole body (by Content-Length or chunked) and nothing more. The load generator shares the
    machine's cores with the replicas; a full HTTP client per simulated client takes a share that
    grows with the clients (a third of a core at 64) and leaves the replicas less."""

    def __init__(self, base: str, token: str) -> None:
        host, _, port = base.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        self.head = f"Host: {self.host}:{self.port}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\n"
        self.stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> int:
        """Send the request, read the whole answer and return its status (the connection is
        reopened after an error). A kept-alive connection the replica closed while it sat idle
        (uvicorn closes one after 5 s) is reopened and the request sent again, as any HTTP client
        does."""
        reused = self.stream is not None
        try:
            return await self._exchange(method, path, body)
        except ConnectionResetError:
            if not reused:
                raise
            return await self._exchange(method, path, body)

    def close(self) -> None:
        if self.stream is not None:
            self.stream[1].close()
            self.stream = None

    async def _exchange(self, method: str, path: str, body: bytes) -> int:
        if self.stream is None:
            self.stream = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        reader, writer = self.stream
        try:
            extra = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n" if body else ""
            writer.write(f"{method} {path} HTTP/1.1\r\n{self.head}{extra}\r\n".encode() + body)
            status_line = await reader.readline()
            if not status_line:
                raise ConnectionResetError("the replica closed the connection without an answer")
            length, chunked = 0, False
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"transfer-encoding" and b"chunked" in value.lower():
                    chunked = True
            if not chunked:
                await reader.readexactly(length)
            else:
                while size := int((await reader.readline()).split(b";")[0], 16):
                    await reader.readexactly(size + 2)
                await reader.readline()
            return int(status_line.split()[1])
        except BaseException:
            writer.close()
            self.stream = None
            raise


def _push(client: int, turn: int) -> list[dict[str, Any]]:
    """Five new KEV-shaped records, unique to this client and turn."""
    return [
        {
            "cveID": f"CVE-2099-{client:02d}{turn:06d}{index}",
            "dateAdded": "2025-06-01",
            "vulnerabilityName": f"Load test product {client} vulnerability {turn}-{index}",
            "vendorProject": "Load",
            "product": f"Product {client}",
            "shortDescription": f"A load test record from client {client}, request {turn}, number {index}.",
            "requiredAction": "Apply the vendor's fix.",
        }
        for index in range(5)
    ]


def _cpu_seconds(replicas: list[subprocess.Popen[bytes]]) -> dict[str, float]:
    """CPU time used so far by this load generator, each replica and every PostgreSQL process
    (Linux /proc; what is not readable counts as 0)."""
    tick = os.sysconf("SC_CLK_TCK")

    def of(pid: int | str) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick

    postgres = sum(of(pid) for pid in os.listdir("/proc") if pid.isdigit() and _command(pid).startswith("postgres"))
    return {"clients": time.process_time(), **{f"replica {number + 1}": of(process.pid) for number, process in enumerate(replicas)}, "postgresql": postgres}


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of the same load before the measured run")
    parser.add_argument("--records", type=int, default=1000, help="KEV records in the database before the run")
    parser.add_argument("--ports", default="18401,18402")
    parser.add_argument("--mix", type=_mix, default="release_items=100", help="what clients send: kind=weight pairs, or 'mixed' (the weights above)")
    arguments = parser.parse_args()
    url = _database_url(arguments.database_url)
    token = _prepare(url, arguments.records)
    ports = [int(port) for port in arguments.ports.split(",")]
    replicas = [_serve(url, port) for port in ports]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for base in bases:
            _wait(base, time.monotonic() + 90)
        timings: dict[str, list[float]] = defaultdict(list)
        errors: dict[str, int] = defaultdict(int)
        # Warm-up, not measured: the replicas fill their caches and connection pools.
        warm_errors: dict[str, int] = defaultdict(int)
        asyncio.run(_all(bases, token, time.monotonic() + arguments.warmup, arguments.clients, arguments.mix, defaultdict(list), warm_errors))
        if warm_errors:
            print(f"errors during warm-up: {dict(warm_errors)}")
        stop = time.monotonic() + arguments.seconds
        started, cpu_before = time.perf_counter(), _cpu_seconds(replicas)
        asyncio.run(_all(bases, token, stop, arguments.clients, arguments.mix, timings, errors))
        wall = time.perf_counter() - started
        cpu = {name: after - cpu_before[name] for name, after in _cpu_seconds(replicas).items()}
    finally:
        for process in replicas:
            process.terminate()
        for process in replicas:
            process.wait(timeout=20)
    total = sum(len(values) for values in timings.values())
    print(f"\n{len(bases)} replicas, {arguments.clients} clients, {wall:.0f} s: {total / wall:.1f} requests/s, {sum(errors.values())} errors")
    print(f"{'kind':<15}{'requests':>10}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for kind in arguments.mix:
        values = timings[kind]
        p50 = statistics.median(values) if values else float("nan")
        print(f"{kind:<15}{len(values):>10}{len(values) / wall:>9.1f}{p50:>9.1f}{_percentile(values, 0.95):>9.1f}{_percentile(values, 0.99):>9.1f}{errors[kind]:>8}")
    print("CPU seconds per second of load: " + ", ".join(f"{name} {seconds / wall:.2f}" for name, seconds in cpu.items()))
    replica_cpu = sum(seconds for name, seconds in cpu.items() if name.startswith("replica"))
    print(f"requests per replica CPU-second: {total / replica_cpu:.0f}" if replica_cpu else "requests per replica CPU-second: unknown")
    p99 = _percentile(timings["release_items"], 0.99)
    verdict = "PASS" if p99 <= LIMIT_P99_MS and not errors["release_items"] else "FAIL"
    print(f"{verdict}: release item pages p99 {p99:.1f} ms (limit {LIMIT_P99_MS:.0f} ms), {errors['release_items']} errors")
    print(json.dumps({"clients": arguments.clients, "seconds": round(wall, 1), "rps": round(total / wall, 1), "release_items_p99_ms": round(p99, 1), "errors": dict(errors)}))


async def _all(bases: list[str], token: str, stop: float, clients: int, mix: dict[str, int], timings: dict[str, list[float]], errors: dict[str, int]) -> None:
    await asyncio.gather(*(_client(bases, token, stop, seed, mix, timings, errors) for seed in range(clients)))


def _mix(text: str) -> dict[str, int]:
    """`kind=weight,...` (kinds of WEIGHTS), or `mixed` for WEIGHTS itself."""
    if text == "mixed":
        return dict(WEIGHTS)
    mix: dict[str, int] = {}
    for part in text.split(","):
        kind, _, weight = part.partition("=")
        if kind.strip() not in WEIGHTS or not weight.strip().isdigit():
            raise argparse.ArgumentTypeError(f"--mix takes 'mixed' or kind=weight pairs of {', '.join(WEIGHTS)}, not {part!r}")
        mix[kind.strip()] = int(weight)
    return mix


if __name__ == "__main__":
    main()
