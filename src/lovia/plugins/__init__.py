"""Plugins: reusable capabilities (tools, instructions, view injectors, hooks, guardrails)."""

from .base import Plugin, PluginInstance, ViewInjector

__all__ = ["Plugin", "PluginInstance", "ViewInjector"]
