"""A real separate process that writes to a ledger, for the concurrency and crash tests.

usage: python ledger_worker.py URL MODE STREAM [ARGS...]
  race    GOFILE            wait for GOFILE, append one event at expected version 0; print WIN or LOSE
  batches N SIZE GOFILE     append N batches of SIZE events to STREAM (retrying on version races)
  forever SIZE              append batches of SIZE events to STREAM until killed; print each committed batch
"""

import os
import sys
import time

from ledger import ConcurrencyError, NewEvent, open_ledger
from ledger.events import LessonRecorded


def wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.005)


def main() -> None:
    url, mode, stream = sys.argv[1:4]
    ledger = open_ledger(url)
    if mode == "race":
        wait_for(sys.argv[4])
        try:
            ledger.append(stream, 0, [LessonRecorded(text=f"pid {os.getpid()}")])
            print("WIN", flush=True)
        except ConcurrencyError:
            print("LOSE", flush=True)
    elif mode == "batches":
        n, size, go = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
        wait_for(go)
        version = ledger.stream_version(stream)
        for b in range(n):
            ledger.append(stream, version, [LessonRecorded(text=f"{stream} {b}.{i}") for i in range(size)])
            version += size
        print("DONE", flush=True)
    elif mode == "forever":
        size = int(sys.argv[4])
        version = ledger.stream_version(stream)
        b = 0
        while True:
            events = [NewEvent(event=LessonRecorded(text="x" * 200 + f" {b}.{i}")) for i in range(size)]
            ledger.append(stream, version, events)
            version += size
            b += 1
            print(f"COMMITTED {b}", flush=True)


if __name__ == "__main__":
    main()
