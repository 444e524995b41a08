"""The message store on each backend, same run, same machine: enqueue latency
(p50/p99) and enqueues a second from one writer, and a claim + finish, for
SQLite (a file in a temp dir) and PostgreSQL (the test suite's throwaway
server, tests/support/pg.py, started here; its fsync is off, as in the tests,
so this measures agentwrap's statements and round trips, not a disk).

    python scripts/bench_store.py [--n 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from benchlib import stats_ms, write_json  # noqa: E402
from support import pg  # noqa: E402

from agentwrap.message import NewMessage, QueueLimits, Status  # noqa: E402
from agentwrap.queue.backend import open_store  # noqa: E402

ROOMY = QueueLimits(max_pending_per_session=1_000_000, max_pending_total=10_000_000,
                    rate_per_minute=10**9)


def measure(db: Path, url: str, n: int) -> dict[str, Any]:
    store = open_store(db, ROOMY, url=url)
    try:
        lat: list[float] = []
        t0 = time.perf_counter()
        for i in range(n):
            a = time.perf_counter()
            store.enqueue(NewMessage(session=f"s{i % 4}", content=f"message {i}"))
            lat.append(time.perf_counter() - a)
        rate = n / (time.perf_counter() - t0)
        claims: list[float] = []
        for k in range(min(200, n // 4)):
            a = time.perf_counter()
            store.claim_batch("s0", f"b{k}", max_bytes=1)
            store.finish(Status.DELIVERED, "ok", batch_id=f"b{k}")
            claims.append(time.perf_counter() - a)
        return {"enqueue_ms": stats_ms(lat), "enqueues_per_s": rate,
                "claim_finish_ms": stats_ms(claims)}
    finally:
        store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="aw-bench-store-"))
    server = pg.start()
    try:
        _, url = server.new_schema()
        out = {"sqlite": measure(work / "q.db", "", args.n),
               "postgres": measure(work / "unused.db", url, args.n),
               "postgres_start_s": server.started_in_s}
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for backend in ("sqlite", "postgres"):
        r = out[backend]
        e, c = r["enqueue_ms"], r["claim_finish_ms"]
        print(f"{backend:9} enqueue p50 {e['p50_ms']:.2f} ms  p99 {e['p99_ms']:.2f} ms"
              f"  {r['enqueues_per_s']:.0f}/s   claim+finish p50 {c['p50_ms']:.2f} ms")
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
