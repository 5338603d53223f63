"""handlers.narrate's reporter: the work below a command reports to what the command's boundary installed."""

from __future__ import annotations

import threading

from handlers.narrate import ProgressLines, relay_progress, report, reporting


def test_messages_go_to_the_installed_reporter_and_nowhere_outside_it():
    heard: list[str] = []
    report("before")  # no reporter: silent
    with reporting(heard.append):
        report("one")
        with reporting(None):  # --json: silent inside
            report("hidden")
        report("two")
    report("after")
    assert heard == ["one", "two"]


def test_each_thread_reports_to_its_own_reporter():
    """The MCP server runs each call in a worker thread with that call's reporter."""
    heard: dict[str, list[str]] = {"a": [], "b": []}
    barrier = threading.Barrier(2)

    def call(key: str) -> None:
        with reporting(heard[key].append):
            barrier.wait()
            report(key)

    threads = [threading.Thread(target=call, args=(k,)) for k in heard]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert heard == {"a": ["a"], "b": ["b"]}


def test_a_childs_progress_lines_reach_the_parents_reporter(tmp_path):
    import io

    child = io.StringIO()
    ProgressLines(child)("[1/2] row\nwith a newline")
    child.write("a log line\n")
    heard: list[str] = []
    passthrough = io.StringIO()
    with reporting(heard.append):
        relay_progress(io.StringIO(child.getvalue()), passthrough)
    assert heard == ["[1/2] row with a newline"] and passthrough.getvalue() == "a log line\n"
