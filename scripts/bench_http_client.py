"""The project's HTTP model client against the openai SDK, side by side in one run.

    python scripts/bench_http_client.py [--requests 300] [--in-flight 64] [--delay 0.5] [--rounds 2]

Both clients talk to the same scripted OpenAI-compatible server on 127.0.0.1 (its own
process), with retries and the response cache off. For each client the script prints:

- import: seconds to import it in a fresh interpreter, and the interpreter's RSS after;
- serial: CPU milliseconds of the client's process per request, over `--requests`
  requests answered at once (no delay), so the figure is the client's own cost;
- in flight: wall time of `--in-flight` threads sending `--in-flight * 10` requests to a
  server that answers each after `--delay` s, over the ideal (requests x delay / in flight).

Rounds alternate the clients (A, B, A, B) so that a busy machine loads both alike; the
table shows the best round of each and the ratio openai SDK / project.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

IMPORTS = {
    "project": "from playground.agents.http_model import HTTPChatModel",
    "openai SDK": "import openai",
}


def serve(delay: float, port_out) -> None:
    """Run a scripted server answering every request with one short reply after `delay` seconds."""
    from playground.testing.openai_server import Reply, ScriptedChatServer

    with ScriptedChatServer(default=lambda body: Reply(content="Action: look", delay=delay)) as server:
        port_out.put(server.base_url)
        threading.Event().wait()


def start_server(delay: float) -> tuple[multiprocessing.Process, str]:
    """Start `serve` in its own process; return it and its base URL."""
    queue: multiprocessing.Queue = multiprocessing.Queue()
    process = multiprocessing.Process(target=serve, args=(delay, queue), daemon=True)
    process.start()
    return process, queue.get(timeout=30)


def import_cost(client: str) -> tuple[float, float]:
    """Seconds to import `client` in a fresh interpreter, and that interpreter's RSS (MB) after."""
    code = ("import re, time; t = time.perf_counter(); " + IMPORTS[client] + "; "
            "print(time.perf_counter() - t, "
            "int(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read())[1]) / 1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.split()
    return float(out[0]), float(out[1])


def sender(client: str, url: str):
    """A function sending one chat request with `client` to `url` and returning the reply text."""
    messages = [{"role": "user", "content": "Valid actions: look, go east\nWhat now?"}]
    if client == "project":
        from playground.agents.http_model import HTTPChatModel

        model = HTTPChatModel(url, "m", retries=0, cache_dir=None)
        return lambda: model.complete(messages).text
    import openai

    sdk = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=60.0)
    return lambda: sdk.chat.completions.create(model="m", messages=messages, temperature=0.0, seed=0,  # type: ignore[arg-type]
                                               max_tokens=256).choices[0].message.content


def serial_cost(client: str, url: str, requests: int) -> float:
    """CPU milliseconds of this process per request, `requests` sent one after another."""
    send = sender(client, url)
    send()  # connection set-up and lazy imports are not per-request costs
    start = time.process_time()
    for _ in range(requests):
        send()
    return (time.process_time() - start) * 1000 / requests


def in_flight_wall(client: str, url: str, in_flight: int, requests: int) -> float:
    """Wall seconds for `requests` requests sent by `in_flight` threads, each thread with its own client."""
    sends = [sender(client, url) for _ in range(in_flight)]
    per_thread = requests // in_flight
    errors: list[BaseException] = []

    def work(send) -> None:
        try:
            for _ in range(per_thread):
                send()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(send,)) for send in sends]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{client}: {len(errors)} thread(s) failed, first: {errors[0]!r}")
    return time.perf_counter() - start


def main() -> None:
    """Measure both clients in alternating rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    fast, fast_url = start_server(0.0)
    slow, slow_url = start_server(args.delay)
    total = args.in_flight * 10
    ideal = total * args.delay / args.in_flight
    best: dict[str, dict[str, float]] = {}
    try:
        for round_number in range(args.rounds):
            for client in IMPORTS:
                seconds, rss = import_cost(client)
                row = {"import s": seconds, "RSS after import MB": rss,
                       "serial CPU ms/request": serial_cost(client, fast_url, args.requests),
                       "in flight wall/ideal": in_flight_wall(client, slow_url, args.in_flight, total) / ideal}
                print(f"round {round_number + 1} {client}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()),
                      flush=True)
                kept = best.setdefault(client, row)
                for key, value in row.items():
                    kept[key] = min(kept[key], value)
    finally:
        fast.terminate()
        slow.terminate()
    keys = list(next(iter(best.values())))
    print(f"\n{args.requests} serial requests; {total} requests, {args.in_flight} in flight, "
          f"{args.delay} s delay (ideal {ideal:.1f} s); best of {args.rounds} rounds")
    print("| measure | project | openai SDK | SDK / project |")
    print("|---|---|---|---|")
    for key in keys:
        mine, sdk = best["project"][key], best["openai SDK"][key]
        print(f"| {key} | {mine:.3f} | {sdk:.3f} | {sdk / mine:.2f}× |")


if __name__ == "__main__":
    main()
