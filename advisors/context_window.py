"""``ContextWindowAdvisor`` (defined in ``chatclient.context_window``): fit the prompt under the context window."""

from chatclient.context_window import CONTEXT_WINDOW_ORDER, ContextWindowAdvisor

__all__ = ["CONTEXT_WINDOW_ORDER", "ContextWindowAdvisor"]
