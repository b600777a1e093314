"""Package-level guarantees: public API, import cost, extras."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import lovia


def test_all_is_sorted_complete_and_importable() -> None:
    assert lovia.__all__ == sorted(lovia.__all__)
    for name in lovia.__all__:
        assert hasattr(lovia, name), name
    public = {n for n in vars(lovia) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(lovia, n)).__name__ == "module"}
    assert public - modules - set(lovia.__all__) == set()


def test_import_lovia_pulls_no_heavy_extras() -> None:
    code = "import sys, json; import lovia; print(json.dumps(sorted(m for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    forbidden = {
        "opentelemetry.sdk",
        "asyncpg",
        "mcp",
        "sqlite3",
        "genai_prices",
        "redis",
        "lovia.stores.sqlite",
        "lovia.stores.postgres",
        "lovia.providers.openai_chat",
    }
    assert loaded & forbidden == set()


LAZY_PACKAGES = {
    "lovia": {"MCP", "Memory", "Anthropic", "Compaction", "ContextStrategy", "recall_tool_result"},
    "lovia.providers": {"OpenAIChat", "Anthropic", "RetryPolicy", "StreamLimits", "resolve_model"},
    "lovia.telemetry": {"configure", "Telemetry", "load_spans", "SQLiteSpanExporter"},
    "lovia.view": {"recall_tool_result"},
    "lovia.web": {"create_app", "WebConfig"},
}


def test_dir_lists_lazy_names_without_importing_them() -> None:
    """Tab completion and ``dir()`` see every export; listing them loads nothing heavy."""
    code = (
        "import sys, json, importlib\n"
        f"packages = {sorted(LAZY_PACKAGES)!r}\n"
        "listed = {p: dir(importlib.import_module(p)) for p in packages}\n"
        "print(json.dumps({'dir': listed, 'loaded': sorted(sys.modules)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    for package, names in LAZY_PACKAGES.items():
        assert names <= set(seen["dir"][package]), package
        assert seen["dir"][package] == sorted(seen["dir"][package])
    assert set(lovia.__all__) <= set(dir(lovia))
    loaded = set(seen["loaded"])
    for lazy in ("lovia.plugins.mcp", "lovia.providers.anthropic", "lovia.telemetry.sdk"):
        assert lazy not in loaded
    assert "lovia.web._app" not in loaded and "starlette" not in loaded


def test_a_lazy_name_loads_once_and_unknown_names_still_fail() -> None:
    import lovia.providers
    import lovia.telemetry
    import lovia.view

    first = lovia.providers.StreamLimits
    assert lovia.providers.StreamLimits is first
    assert vars(lovia.providers)["StreamLimits"] is first  # cached: no second lookup
    assert lovia.view.recall_tool_result is lovia.view.recall_tool()
    assert lovia.recall_tool_result is lovia.view.recall_tool_result
    for module in (lovia, lovia.providers, lovia.telemetry, lovia.view):
        with pytest.raises(AttributeError, match="no_such_name"):
            module.no_such_name  # noqa: B018


def test_every_package_defers_imports_through_the_one_helper() -> None:
    """No package hand-rolls a module ``__getattr__``: lovia._lazy.lazy_exports is the one."""
    import ast
    from pathlib import Path

    src = Path(lovia.__file__).parent
    hand_rolled = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__")
    ]
    assert hand_rolled == []


def test_provider_and_context_strategy_are_exported() -> None:
    from lovia.model import Provider
    from lovia.providers.base import Provider as FromBase
    from lovia.view.base import ContextStrategy

    assert lovia.Provider is Provider is FromBase
    assert lovia.ContextStrategy is ContextStrategy


def test_as_tool_uses_the_builder_agent_tool_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lovia.agent`` does not import ``lovia.agent_tool`` (it sits above it): importing
    lovia registers the builder, and without it ``as_tool()`` says what to do."""
    import lovia.agent
    import lovia.agent_tool
    from lovia import Agent
    from lovia.errors import UserError
    from lovia.testing import ScriptedModel

    assert [lovia.agent_tool.agent_tool] == lovia.agent._TOOL_MAKER  # pyright: ignore[reportPrivateUsage]
    agent = Agent(name="billing desk", description="Bills.", model=ScriptedModel([]))
    made = agent.as_tool(max_depth=2)
    assert (made.name, made.description) == ("billing_desk", "Bills.")
    monkeypatch.setattr(lovia.agent, "_TOOL_MAKER", [])
    with pytest.raises(UserError, match=r"needs lovia\.agent_tool") as caught:
        agent.as_tool()
    assert caught.value.hint == "Import lovia (import lovia) before calling as_tool()."
