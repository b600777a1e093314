"""Memory: the six tools, confinement, atomic writes and no lost updates under concurrency."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lovia import Agent, Runner, ToolError
from lovia.plugins.memory import Memory, _Store
from lovia.testing import ScriptedModel, call

from .conftest import results

TRAVERSAL = [
    "../escape.md",
    "a/../../escape.md",
    "notes/../../../etc/passwd",
    "/etc/passwd",
    "/memories/x.md",
    "~/x.md",
    "C:\\windows\\x.md",
    "nul\x00byte.md",
    "x" * 300 + ".md",
    "a/" * 600,
    "link-out/secret.txt",
    "link-file.md",
    ".lovia-memory.lock",
    "sub/.hidden",
]


@pytest.fixture
def store(tmp_path: Path) -> _Store:
    root = tmp_path / "mem"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret", encoding="utf-8")
    os.symlink(outside, root / "link-out")
    os.symlink(outside / "secret.txt", root / "link-file.md")
    return _Store(root.resolve())


@pytest.mark.parametrize("path", TRAVERSAL)
def test_traversal_corpus_refused_by_every_operation(store: _Store, path: str) -> None:
    ops = [
        lambda: store.view(path, None),
        lambda: store.create(path, "pwned"),
        lambda: store.str_replace(path, "secret", "pwned"),
        lambda: store.insert(path, 0, "pwned"),
        lambda: store.delete(path),
        lambda: store.rename(path, "ok.md"),
        lambda: store.rename("ok.md", path),
    ]
    (store.root / "ok.md").write_text("fine\n", encoding="utf-8")
    for op in ops:
        with pytest.raises(ToolError) as info:
            op()
        assert info.value.message  # a clear reason for the model
    outside = store.root.parent / "outside" / "secret.txt"
    assert outside.read_text(encoding="utf-8") == "secret"
    assert not (store.root.parent / "escape.md").exists()


def test_operations(store: _Store) -> None:
    assert store.create("notes/todo.md", "one\ntwo\nthree\n") == "Created notes/todo.md."
    assert "Overwrote" in store.create("notes/todo.md", "one\ntwo\nthree\n")
    assert store.view("notes/todo.md", None) == "     1\tone\n     2\ttwo\n     3\tthree"
    assert store.view("notes/todo.md", [2, -1]) == "     2\ttwo\n     3\tthree"
    store.str_replace("notes/todo.md", "two", "TWO")
    with pytest.raises(ToolError, match="does not occur"):
        store.str_replace("notes/todo.md", "missing", "x")
    store.create("dup.md", "a a")
    with pytest.raises(ToolError, match="occurs 2 times"):
        store.str_replace("dup.md", "a", "b")
    store.insert("notes/todo.md", 0, "zero")
    store.insert("notes/todo.md", 4, "four")
    with pytest.raises(ToolError, match="between 0 and 5"):
        store.insert("notes/todo.md", 9, "x")
    text = (store.root / "notes/todo.md").read_text(encoding="utf-8")
    assert text == "zero\none\nTWO\nthree\nfour\n"
    listing = store.view(".", None)
    assert "notes/todo.md" in listing and "notes/" in listing and ".lovia" not in listing
    store.rename("notes/todo.md", "archive/old.md")
    with pytest.raises(ToolError, match="already exists"):
        store.rename("dup.md", "archive/old.md")
    store.delete("archive")
    with pytest.raises(ToolError, match="no file or folder"):
        store.delete("archive")
    with pytest.raises(ToolError, match="whole memory folder"):
        store.delete(".")
    assert not list(store.root.glob("**/.tmp-*"))  # no temp files left behind


async def test_memory_through_runs_across_sessions(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem")
    first = ScriptedModel([call("memory_create", path="user.md", file_text="likes tea\n"), "ok"])
    await Runner.run(Agent(name="a", model=first, plugins=[memory]), "I like tea")
    second = ScriptedModel(
        [
            [
                call("memory_view", path="."),
                call("memory_view", path="user.md"),
                call("memory_view", path="../x"),
            ],
            "You like tea.",
        ]
    )
    result = await Runner.run(
        Agent(name="a", model=second, plugins=[Memory(tmp_path / "mem")]), "what do I like?"
    )
    listing, content, refused = results(result.entries)
    assert "user.md" in listing.content and "likes tea" in content.content
    assert refused.is_error and "'..'" in refused.content
    assert "## Memory" in second.requests[0].system


def _writer_script(root: Path, who: str, n: int) -> str:
    return (
        "from pathlib import Path\n"
        "from lovia.plugins.memory import _Store\n"
        f"s = _Store(Path({str(root)!r}))\n"
        f"for i in range({n}):\n"
        f"    s.str_replace('log.md', 'END', '{who}-' + str(i) + '\\nEND')\n"
        f"    s.insert('log.md', 0, 'top-{who}-' + str(i))\n"
    )


async def test_concurrent_writers_lose_no_update(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    memory = Memory(root)
    root.mkdir()
    store = _Store(root.resolve())
    store.create("log.md", "END\n")
    per = 5
    procs = [
        subprocess.Popen([sys.executable, "-c", _writer_script(root.resolve(), f"p{k}", per)])
        for k in range(2)
    ]

    def thread_writer(k: int) -> None:
        for i in range(per):
            store.str_replace("log.md", "END", f"t{k}-{i}\nEND")
            store.insert("log.md", 0, f"top-t{k}-{i}")

    threads = [threading.Thread(target=thread_writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()

    async def run_writer(k: int) -> None:
        steps: list[object] = []
        for i in range(per):
            steps.append(
                call("memory_str_replace", path="log.md", old_str="END", new_str=f"r{k}-{i}\nEND")
            )
            steps.append(
                call("memory_insert", path="log.md", insert_line=0, insert_text=f"top-r{k}-{i}")
            )
        model = ScriptedModel([*steps, "done"])  # type: ignore[list-item]
        result = await Runner.run(Agent(name="w", model=model, plugins=[memory]), "write")
        assert not any(r.is_error for r in results(result.entries))

    await asyncio.gather(*(run_writer(k) for k in range(10)))
    for t in threads:
        t.join()
    for p in procs:
        assert await asyncio.to_thread(p.wait) == 0
    lines = (root / "log.md").read_text(encoding="utf-8").splitlines()
    writers = (
        [f"p{k}" for k in range(2)] + [f"t{k}" for k in range(8)] + [f"r{k}" for k in range(10)]
    )
    expected = {f"{w}-{i}" for w in writers for i in range(per)}
    expected |= {f"top-{w}-{i}" for w in writers for i in range(per)}
    assert set(lines) - {"END"} == expected
    assert len(lines) == len(expected) + 1 and lines[-1] == "END"
