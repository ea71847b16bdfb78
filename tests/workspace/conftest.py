"""The agent's workspace (gpt_2rank loaded in a real embedded FalkorDB), shared with these tests."""

from tests.agent.conftest import agent_home, agent_settings

__all__ = ["agent_home", "agent_settings"]
