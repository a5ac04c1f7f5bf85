"""``QuestionAnswerAdvisor``: naive RAG — search a vector store with the user's text and put the
matching documents into the user message as context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chatclient.advisor import BaseAdvisor
from chatclient.events import DocumentsRetrieved
from chatclient.models.base import ChatResponse
from chatclient.rag._llm import check_template, render
from chatclient.rag.documents import join_texts
from chatclient.rag.filters import as_expression
from chatclient.rag.search import SearchRequest
from chatclient.rag.stores.base import asearch
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys

if TYPE_CHECKING:
    from chatclient.advisor import AdvisorChain
    from chatclient.rag.documents import Document
    from chatclient.rag.filters import Expression
    from chatclient.rag.stores.base import VectorStore

DEFAULT_TEMPLATE = """\
Context:
{{ question_answer_context }}

Question: {{ query }}

Answer the question in one or two sentences, using only the context above."""
"""The user message the advisor sends: the retrieved text, then the question, then one short instruction.

Written for small instruction models as much as large ones (``benchmarks/local_model.py``): on
SmolLM2-135M the previous template (question first, context between rules, "if the context does
not contain the answer, say you cannot answer") answered 1 of 3 questions whose answer was in the
context (the other two: "as a chatbot I don't have the capability..."); this one answered 3 of 3,
and adding a "say you don't know" sentence to it brought that back down to 1 of 3."""


class QuestionAnswerAdvisor(BaseAdvisor):
    """Retrieves documents for the user's text and appends them to the user message.

    * the query is the (already rendered) text of the last user message;
    * ``search_request`` gives ``top_k``, the threshold and the default filter; a non-blank
      ``ContextKeys.FILTER_EXPRESSION`` (text or expression) in the request context replaces that filter;
    * ``template`` (jinja2) must use ``query`` and ``question_answer_context``; retrieved text is
      inserted as data — a document containing ``{{ x }}`` reaches the model verbatim;
    * the documents are put in the request/response context and the response metadata under
      ``ContextKeys.RETRIEVED_DOCUMENTS``.
    """

    def __init__(
        self,
        vector_store: VectorStore,
        search_request: SearchRequest | None = None,
        template: str = DEFAULT_TEMPLATE,
        order: int = 0,
    ) -> None:
        if vector_store is None:
            raise ValueError("vector_store cannot be None")
        if search_request is not None and not isinstance(search_request, SearchRequest):
            raise TypeError("search_request must be a SearchRequest")
        self.vector_store = vector_store
        self.search_request = search_request or SearchRequest()
        self.template = check_template(template, ("query", "question_answer_context"))
        self.order = order

    def _filter(self, context: Any) -> Expression | None:
        value = context.get(ContextKeys.FILTER_EXPRESSION)
        if value is None or (isinstance(value, str) and not value.strip()):
            return self.search_request.filter_expression
        return as_expression(value)

    def _search_request(self, request: ChatClientRequest) -> SearchRequest:
        return self.search_request.copy(
            query=request.prompt.user_message.text, filter_expression=self._filter(request.context)
        )

    def _augment(self, request: ChatClientRequest, documents: Sequence[Document]) -> ChatClientRequest:
        docs = list(documents)
        user_text = request.prompt.user_message.text
        text = render(self.template, {"query": user_text, "question_answer_context": join_texts(docs)})
        prompt = request.prompt.augment_user_message(lambda u: type(u)(text, media=u.media, metadata=u.metadata))
        request.emit(DocumentsRetrieved(tuple(docs), self.name))
        return request.mutate(prompt=prompt, context={ContextKeys.RETRIEVED_DOCUMENTS: docs})

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        return self._augment(request, self.vector_store.similarity_search(self._search_request(request)))

    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        return self._augment(request, await asearch(self.vector_store, self._search_request(request)))

    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        return with_context_metadata(response, ContextKeys.RETRIEVED_DOCUMENTS)


def with_context_metadata(response: ChatClientResponse, key: str) -> ChatClientResponse:
    """Copy ``context[key]`` into the chat response's metadata (creating an empty response if needed)."""
    if key not in response.context:
        return response
    chat_response = response.chat_response or ChatResponse()
    return response.mutate(chat_response=chat_response.with_metadata(**{key: response.context[key]}))
