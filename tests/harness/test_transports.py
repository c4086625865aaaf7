"""The two transports and ``memspec serve``: one session interface, faults reported, no hangs."""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memspec.conformance.core.locations import PYTHONPATH_ADDED, backend_environment, import_from
from memspec.conformance.transport import prestart
from memspec.conformance.transport.backend import BackendDefect, InProcessBackend, check_answer
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.transport.served import handle_line, serve
from memspec.spec.errors import UsageError

REFERENCE = "memspec.reference_impl:open_store"
SERVE = f"{sys.executable} -m memspec.conformance serve --backend {REFERENCE}"
FAULTS = f"{sys.executable} -m tests.backends.protocol_faults"


def exchange(lines: list[object]) -> list[dict]:
    """Runs ``serve`` on the given request lines and returns its answers."""
    stdin = io.StringIO(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    stdout = io.StringIO()
    assert serve(InProcessBackend(REFERENCE), stdin, stdout) == 0
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


def test_serve_round_trip(tmp_path: Path) -> None:
    # CONTRACT-12/13: one JSON object per line each way, ids echoed, fields by op.
    answers = exchange(
        [
            {
                "id": 0,
                "op": "open",
                "root": str(tmp_path),
                "memory_char_limit": 100,
                "user_char_limit": 50,
            },
            {"id": 1, "op": "load"},
            {"id": 2, "op": "add", "target": "memory", "content": "User prefers tabs"},
            {"id": 3, "op": "entries", "target": "memory"},
            {"id": 4, "op": "snapshot", "target": "memory"},
            {"id": 5, "op": "fence", "raw": "recalled"},
            {"id": 6, "op": "frobnicate"},
        ]
    )
    assert [a["id"] for a in answers] == list(range(7))
    assert answers[0]["features"] and answers[0]["backend"] == REFERENCE
    assert answers[2]["code"] == "OK"
    assert answers[3]["entries"] == ["User prefers tabs"]
    assert answers[4]["snapshot"] is None  # frozen at the load before the add
    assert answers[5]["block"].startswith("<memory-context>\n")
    assert answers[6] == {
        "id": 6,
        "ok": False,
        "code": "E_UNSUPPORTED",
        "message": "unknown op 'frobnicate'",
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not a JSON object"),
        ("[1, 2]", "a request is a JSON object"),
        ({"id": 1, "op": "load"}, "send 'open' first"),
        ({"id": 1, "op": "open", "root": "/nonexistent/root"}, "existing directory"),
    ],
)
def test_serve_answers_bad_requests_and_goes_on(line: object, message: str) -> None:
    answers = exchange([line])
    assert answers[0]["code"] == "E_INVALID" and message in answers[0]["message"]


def test_serve_reports_missing_fields(tmp_path: Path) -> None:
    answers = exchange(
        [{"id": 0, "op": "open", "root": str(tmp_path)}, {"id": 1, "op": "add", "target": "memory"}]
    )
    assert answers[1]["code"] == "E_INVALID" and "content" in answers[1]["message"]


def test_serve_exits_1_when_the_backend_raises(tmp_path: Path) -> None:
    stdin = io.StringIO(
        json.dumps({"id": 0, "op": "open", "root": str(tmp_path)})
        + "\n"
        + json.dumps({"id": 1, "op": "add", "target": "memory", "content": "x"})
        + "\n"
    )
    assert (
        serve(InProcessBackend("tests.backends.wrappers:raises_on_add"), stdin, io.StringIO()) == 1
    )


def test_serve_with_a_bad_backend_name_exits_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "serve", "--backend", "nope:nope"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "cannot import" in result.stderr
    assert "Traceback" not in result.stderr


def test_command_backend_session(tmp_path: Path) -> None:
    session = CommandBackend(SERVE, timeout=30).open(tmp_path)
    try:
        assert session.request("load")["ok"]
        assert session.request("add", target="memory", content="x")["code"] == "OK"
        assert session.request("entries", target="memory")["entries"] == ["x"]
        assert "batch" in session.features
    finally:
        session.close()
    assert session.process.returncode == 0


def test_a_session_closes_itself_when_its_block_ends(tmp_path: Path) -> None:
    # One session interface: either transport's session is its own context manager.
    with CommandBackend(SERVE, timeout=30).open(tmp_path) as command:
        assert command.request("load")["ok"]
        assert command.process.poll() is None
    assert command.process.returncode == 0
    threads = threading.active_count()
    backend = InProcessBackend("tests.backends.wrappers:thread_bound", 5)
    with pytest.raises(KeyError), backend.open(tmp_path) as in_process:
        assert in_process.request("load")["ok"]
        raise KeyError("the block stops half-way")
    assert _threads_settle_at(threads)  # closed on the way out: its thread ended


def test_a_close_that_fails_is_raised_at_the_end_of_the_block(tmp_path: Path) -> None:
    backend = InProcessBackend("tests.backends.wrappers:hangs_on_close", 0.2)
    failed = pytest.raises(BackendDefect, match=r"did not return within 0\.2 s")
    with failed, backend.open(tmp_path) as session:
        assert session.request("load")["ok"]
    assert failed.excinfo is not None and failed.excinfo.value.hung


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("hang", "did not answer within 5 s"),
        ("crash", "exited with status 3"),
        ("garbage", "not JSON: 'Traceback \\(most recent call last\\): oops'"),
        ("wrong-id", "carries id"),
    ],
)
def test_command_backend_faults_are_defects(tmp_path: Path, mode: str, message: str) -> None:
    session = CommandBackend(f"{FAULTS} {mode}", timeout=5).open(tmp_path)
    assert session.request("load")["ok"]
    with pytest.raises(BackendDefect, match=message) as caught:
        session.request("add", target="memory", content="x")
    assert caught.value.sent["op"] == "add"
    assert caught.value.hung == (mode == "hang")  # only a timeout says the call hung
    assert session.process.poll() is not None  # killed, never left hanging
    if mode == "crash":
        assert "about to crash" in str(caught.value)  # stderr tail is shown


@pytest.mark.parametrize("mode", ["silent-start", "no-open"])
def test_command_backend_that_cannot_open(tmp_path: Path, mode: str) -> None:
    processes: list[subprocess.Popen[str]] = []
    backend = CommandBackend(
        f"{FAULTS} {mode}", timeout=2, prestart=False, started=processes.append
    )
    with pytest.raises(BackendDefect):
        backend.open(tmp_path)
    # the process it started is gone too: a refused open leaves nothing running
    assert processes and all(process.poll() is not None for process in processes)


@pytest.mark.parametrize("command", ["", "'unbalanced", "/nonexistent/program"])
def test_bad_commands(tmp_path: Path, command: str) -> None:
    with pytest.raises((UsageError, BackendDefect)):
        CommandBackend(command, timeout=1).open(tmp_path)


def test_in_process_defects(tmp_path: Path) -> None:
    session = InProcessBackend("tests.backends.wrappers:raises_on_add", 5).open(tmp_path)
    with pytest.raises(BackendDefect, match="raised RuntimeError: boom") as raised:
        session.request("add", target="memory", content="x")
    assert raised.value.clause == "CONTRACT-6"
    # the memory tool never raises, whatever text it is given (TOOL-6)
    tool = InProcessBackend("tests.backends.tool_broken:raises_on_bad_json", 5).open(tmp_path)
    with pytest.raises(BackendDefect, match="raised JSONDecodeError") as raised:
        tool.request("tool_call", arguments="not json")
    assert raised.value.clause == "TOOL-6"
    hung = InProcessBackend("tests.backends.wrappers:hangs_on_add", 0.2).open(tmp_path)
    with pytest.raises(BackendDefect, match=r"did not return within 0\.2 s"):
        hung.request("add", target="memory", content="x")
    with pytest.raises(BackendDefect, match="dead"):
        hung.request("load")
    with pytest.raises(BackendDefect, match="factory raised OSError"):
        InProcessBackend("tests.backends.wrappers:factory_raises").open(tmp_path)


def _threads_settle_at(count: int) -> bool:
    deadline = time.monotonic() + 5
    while threading.active_count() > count and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count() <= count  # fewer: an earlier test's thread ended meanwhile


def test_a_session_runs_on_one_thread(tmp_path: Path) -> None:
    # The factory and every call of a session share a thread, so thread-bound stores work.
    threads = threading.active_count()
    session = InProcessBackend("tests.backends.wrappers:thread_bound", 5).open(tmp_path)
    assert session.request("load")["ok"]
    assert session.request("add", target="memory", content="User prefers tabs")["ok"]
    assert session.request("entries", target="memory")["entries"] == ["User prefers tabs"]
    assert session.request("snapshot", target="memory")["ok"]
    session.close()
    assert _threads_settle_at(threads)  # close ended the session's thread


def test_a_dropped_session_ends_its_thread(tmp_path: Path) -> None:
    # A session nobody closes still lets its thread end once it is garbage.
    threads = threading.active_count()
    backend = InProcessBackend(REFERENCE, 5)
    for index in range(5):
        root = tmp_path / str(index)
        root.mkdir()
        session = backend.open(root)
        assert session.request("entries", target="memory")["ok"]
        del session
    gc.collect()
    assert _threads_settle_at(threads)


def test_a_hung_close_is_a_defect(tmp_path: Path) -> None:
    session = InProcessBackend("tests.backends.wrappers:hangs_on_close", 0.2).open(tmp_path)
    with pytest.raises(BackendDefect, match=r"did not return within 0\.2 s"):
        session.close()
    session.close()  # dead: close does not call the store again


@pytest.mark.parametrize("spec", ["nocolon", ":x", "memspec.nope:open", "memspec.spec:nothing"])
def test_bad_factory_names(spec: str) -> None:
    with pytest.raises(UsageError):
        InProcessBackend(spec)


@pytest.mark.parametrize(
    "answer",
    [
        None,
        {"ok": True},
        {"ok": "yes", "code": "OK"},
        {"ok": True, "code": "E_LIMIT"},
        {"ok": False, "code": "E_MADE_UP"},
    ],
)
def test_check_answer_rejects_non_outcomes(answer: object) -> None:
    with pytest.raises(BackendDefect):
        check_answer("add", {"op": "add"}, answer)


@pytest.mark.parametrize(
    ("op", "answer"),
    [
        ("entries", {"ok": True, "code": "OK", "entries": [1]}),
        ("snapshot", {"ok": True, "code": "OK", "snapshot": 3}),
        ("fence", {"ok": True, "code": "OK", "block": None}),
    ],
)
def test_check_answer_rejects_bad_query_answers(op: str, answer: dict) -> None:
    with pytest.raises(BackendDefect):
        check_answer(op, {"op": op}, answer)


def test_handle_line_unsupported_feature(tmp_path: Path) -> None:
    backend = InProcessBackend("tests.backends.wrappers:core_only")
    answer, session = handle_line(
        backend, None, json.dumps({"id": 0, "op": "open", "root": str(tmp_path)})
    )
    assert answer["features"] == ["core"]
    answer, _ = handle_line(
        backend, session, json.dumps({"id": 1, "op": "batch", "target": "memory", "operations": []})
    )
    assert answer == {"id": 1, "ok": False, "code": "E_UNSUPPORTED"}


def test_a_command_backend_starts_with_the_callers_python_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The directory memspec puts first on PYTHONPATH for its own workers is not the backend's:
    Python would look there before its standard library at every import, and read its listing
    again whenever it changed, so the backend's calls, and strace's count of them, would vary."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    with import_from(os.getcwd()):
        assert os.environ["PYTHONPATH"] == os.pathsep.join([os.getcwd(), "/elsewhere"])
        environment = backend_environment()
    assert environment["PYTHONPATH"] == "/elsewhere"
    assert PYTHONPATH_ADDED not in environment and PYTHONPATH_ADDED not in os.environ


def test_a_command_backend_is_not_told_it_runs_under_a_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # pytest sets PYTEST_CURRENT_TEST in the process running a check: a backend that refuses its
    # data under a test (nyx-memory) must not see it, nor xdist's worker names
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert "PYTEST_CURRENT_TEST" in os.environ
    environment = backend_environment()
    assert not {"PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER"} & environment.keys()
    assert environment["PATH"] == os.environ["PATH"]


def test_serve_looks_in_its_directory_last(tmp_path: Path) -> None:
    """``memspec serve`` imports a backend from its directory, which it looks in after every
    other place on its path."""
    (tmp_path / "here.py").write_text(
        "import os, sys\n"
        "from memspec.reference_impl import open_store as reference\n"
        "def open_store(root, **limits):\n"
        "    assert sys.path[-1] == os.getcwd() not in sys.path[:-1], sys.path\n"
        "    return reference(root, **limits)\n"
    )
    memspec = Path(sys.executable).parent / "memspec"
    result = subprocess.run(
        [str(memspec), "serve", "--backend", "here:open_store"],
        input=json.dumps({"id": 0, "op": "open", "root": str(tmp_path)}) + "\n",
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True, result.stdout


def _open_and_close(backend: CommandBackend, root: Path) -> int:
    root.mkdir()
    session = backend.open(root)
    pid = session.process.pid
    session.close()
    return pid


def test_a_command_opened_again_has_its_next_process_ready(tmp_path: Path) -> None:
    # commands opened by earlier tests are forgotten: a backend's environment no longer differs
    # from test to test (the runner's variables are left out of it), so they would count here
    prestart.discard(forget=True)
    backend = CommandBackend(SERVE)
    _open_and_close(backend, tmp_path / "first")
    assert prestart.ready() is None  # a worker that opens one session starts no spare
    _open_and_close(backend, tmp_path / "second")
    spare = prestart.ready()
    assert spare is not None and spare.poll() is None
    assert _open_and_close(backend, tmp_path / "third") == spare.pid
    following = prestart.ready()
    assert following is not None and following.pid != spare.pid
    with pytest.raises(BackendDefect, match="refused to open"):
        CommandBackend(f"{FAULTS} no-open").open(tmp_path)
    assert following.poll() is not None  # another command ends the spare
    assert prestart.ready() is None


def test_a_traced_command_never_starts_twice(tmp_path: Path) -> None:
    prestart.discard()
    backend = CommandBackend(SERVE, prestart=False)
    for name in ("first", "second", "third"):
        _open_and_close(backend, tmp_path / name)
        assert prestart.ready() is None


def test_serve_imports_no_search_library(tmp_path: Path) -> None:
    """``memspec serve`` starts once per session of a command backend: its start imports neither
    Hypothesis nor pytest (importing Hypothesis through the options' profiles cost each start
    about 0.7 s, for a thousand starts in a certification)."""
    opened = json.dumps({"id": 1, "op": "open", "root": str(tmp_path)})
    started = subprocess.run(
        [*SERVE.split()[:1], "-X", "importtime", *SERVE.split()[1:]],
        input=opened + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(started.stdout.splitlines()[0])["ok"], started.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in started.stderr.splitlines()}
    assert not {name for name in imported if name.split(".")[0] in ("hypothesis", "pytest")}
