"""The agent's workspace (gpt_2rank loaded in a real embedded FalkorDB) and one
with two H100 traces, shared with these tests."""

from tests.agent.conftest import agent_home, agent_settings, gpu_settings

__all__ = ["agent_home", "agent_settings", "gpu_settings"]
