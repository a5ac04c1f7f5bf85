"""ReReadingAdvisor (Re2): ask the model to read the question twice before answering."""

from __future__ import annotations

from chatclient.advisor import AdvisorChain, BaseAdvisor
from chatclient.messages import UserMessage
from chatclient.request import ChatClientRequest
from chatclient.templates import TemplateRenderer, default_renderer

DEFAULT_TEMPLATE = "{{ re2_input_query }}\nRead the question again: {{ re2_input_query }}\n"


class ReReadingAdvisor(BaseAdvisor):
    """Rewrites the last user message as the question, then a line asking to read it again.

    Re-reading (Xu et al., 2023, "Re2") improves reasoning of many models. The template receives the
    user text as ``re2_input_query``; the text is passed as data, so braces in it are never rendered.
    """

    def __init__(
        self, *, template: str = DEFAULT_TEMPLATE, order: int = 0, renderer: TemplateRenderer | None = None
    ) -> None:
        if not template or "re2_input_query" not in template:
            raise ValueError("template must use the placeholder re2_input_query")
        self.template = template
        self.order = order
        self.renderer = renderer or default_renderer()

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        query = request.prompt.user_message.text
        rendered = self.renderer.render(self.template, {"re2_input_query": query})
        prompt = request.prompt.augment_user_message(
            lambda u: UserMessage(rendered, media=u.media, metadata=u.metadata)
        )
        return request.mutate(prompt=prompt)
