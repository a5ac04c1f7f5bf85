"""ai_service with tools (ToolArg context, return-direct, services as tools), RAG and guardrails."""

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Protocol

import pytest

from chatclient import AssistantMessage, ChatClient, Media, ToolCall
from chatclient.errors import InputGuardrailError, OutputGuardrailError
from chatclient.guardrails import InputGuardrail, OutputGuardrail
from chatclient.memory import MessageWindowChatMemory
from chatclient.rag import Document, HashingEmbeddingModel, SimpleVectorStore
from chatclient.services import MemoryId, Result, ToolArg, ai_service, service_tool, user
from chatclient.testing import ScriptedChatModel
from chatclient.tools import ToolContext, tool


def call_tool(name: str, **arguments) -> AssistantMessage:
    return AssistantMessage(None, (ToolCall(f"call-{name}", name, json.dumps(arguments)),))


@tool
def weather(city: str, ctx: ToolContext) -> str:
    """Current weather of a city."""
    return f"{city}: 18C for {ctx.get('tenant', 'nobody')}"


@tool(return_direct=True)
def lookup_order(order_id: str) -> str:
    """The status of an order, returned to the caller as is."""
    return f"order {order_id} shipped"


class Agent(Protocol):
    def ask(self, question: str, tenant: ToolArg[str] = "acme") -> str: ...

    async def aask(self, question: str, tenant: ToolArg[str] = "acme") -> str: ...

    def stream(self, question: str, tenant: ToolArg[str] = "acme") -> Iterator[str]: ...

    def detailed(self, question: str) -> Result[str]: ...


def agent(*script, **kwargs):
    model = ScriptedChatModel(list(script))
    return ai_service(Agent, client=ChatClient.create(model), **kwargs), model


def test_tools_run_and_tool_args_reach_the_tool_context():
    svc, model = agent(call_tool("weather", city="Oslo"), "It is 18C in Oslo.", tools=[weather])
    assert svc.ask("Weather in Oslo?", tenant="globex") == "It is 18C in Oslo."
    tool_message = model.last_prompt.messages[-1]
    assert tool_message.responses[0].response_data == "Oslo: 18C for globex"
    assert [d.name for d in model.prompts[0].tools] == ["weather"]
    # the tool argument is never shown to the model
    assert "globex" not in json.dumps([m.text for m in model.prompts[0].messages])


def test_tools_in_async_and_streaming_methods():
    svc, model = agent(
        call_tool("weather", city="Rome"),
        "Rome is sunny.",
        call_tool("weather", city="Oslo"),
        ["Oslo ", "is cold."],
        tools=[weather],
    )
    assert asyncio.run(svc.aask("Rome?")) == "Rome is sunny."
    assert model.prompts[1].messages[-1].responses[0].response_data == "Rome: 18C for acme"
    assert "".join(svc.stream("Oslo?", tenant="t2")) == "Oslo is cold."
    assert model.prompts[3].messages[-1].responses[0].response_data == "Oslo: 18C for t2"


def test_result_lists_tool_executions():
    svc, _ = agent(call_tool("weather", city="Paris"), "Sunny.", tools=[weather])
    result = svc.detailed("Paris?")
    assert result.value == "Sunny."
    assert [(e.name, e.result, e.is_error) for e in result.tool_executions] == [
        ("weather", "Paris: 18C for nobody", False)
    ]


def test_return_direct_tool_result_is_the_answer():
    svc, model = agent(call_tool("lookup_order", order_id="A7"), tools=[lookup_order])
    assert svc.ask("Where is A7?") == "order A7 shipped"
    assert len(model.prompts) == 1  # the model was not asked again


class Expert(Protocol):
    @user("Answer as a geography expert: {{ question }}")
    def answer(self, question: str, user: MemoryId[str] = "default", tenant: ToolArg[str] = "none") -> str:
        """Ask the geography expert a question."""

    async def aanswer(self, question: str) -> str:
        """Ask the async geography expert: {{ question }}"""

    def stream(self, question: str) -> Iterator[str]: ...


def test_service_method_as_a_tool_of_another_service():
    expert_model = ScriptedChatModel(["Canberra"])
    expert = ai_service(Expert, client=ChatClient.create(expert_model), memory=MessageWindowChatMemory())
    router, router_model = agent(
        call_tool("answer", question="Capital of Australia?"), "The expert says Canberra.", tools=[expert.answer]
    )
    assert router.ask("What is the capital of Australia?", tenant="acme") == "The expert says Canberra."
    assert expert_model.last_prompt.user_message.text == "Answer as a geography expert: Capital of Australia?"
    offered = router_model.prompts[0].tools[0]
    assert offered.name == "answer" and offered.description.startswith("Ask the geography expert")
    assert list(offered.input_schema["properties"]) == ["question"]  # no memory id, no tool argument
    assert router_model.prompts[1].messages[-1].responses[0].response_data == "Canberra"


def test_service_tool_fills_tool_args_from_the_context_and_async_methods():
    seen = []

    @tool
    def probe(ctx: ToolContext) -> str:
        """Read the tenant."""
        seen.append(ctx.get("tenant"))
        return "ok"

    expert_model = ScriptedChatModel([call_tool("probe"), "done"])
    expert = ai_service(Expert, client=ChatClient.create(expert_model), tools=[probe], memory=MessageWindowChatMemory())
    callback = service_tool(expert.answer, name="geo", description="Geography questions.")
    assert callback.definition.name == "geo" and callback.definition.description == "Geography questions."
    assert callback.call('{"question": "q"}', ToolContext({"tenant": "initech"})) == "done"
    assert seen == ["initech"]
    other = ai_service(
        Expert, client=ChatClient.create(ScriptedChatModel(["async!"])), memory=MessageWindowChatMemory()
    )
    async_tool = service_tool(other.aanswer)
    assert asyncio.run(async_tool.acall('{"question": "q"}')) == "async!"


def test_service_tool_rejects_streams_and_non_service_methods():
    expert = ai_service(Expert, client=ChatClient.create(ScriptedChatModel([])), memory=MessageWindowChatMemory())
    with pytest.raises(TypeError, match="streams its answer"):
        service_tool(expert.stream)
    with pytest.raises(TypeError, match="method of a service"):
        service_tool(weather)

    class Looker(Protocol):
        def look(self, image: Media) -> str: ...

    looker = ai_service(Looker, client=ChatClient.create(ScriptedChatModel([])))
    with pytest.raises(TypeError, match="'image' has no default and a model cannot give it"):
        service_tool(looker.look)


# -- RAG -------------------------------------------------------------------------------------------


class Docs:
    """A DocumentRetriever over a real in-memory vector store."""

    def __init__(self) -> None:
        self.store = SimpleVectorStore(HashingEmbeddingModel(dimensions=64))
        self.store.add([Document("The Eiffel Tower is in Paris.", id="d1"), Document("Bananas are yellow.", id="d2")])

    def retrieve(self, query):
        return self.store.similarity_search(query.text)[:1]


class Qa(Protocol):
    def answer(self, question: str) -> Result[str]: ...

    async def aanswer(self, question: str) -> Result[str]: ...


def test_retriever_augments_the_user_message_and_fills_sources():
    model = ScriptedChatModel(["Paris.", "Paris again."])
    svc = ai_service(Qa, client=ChatClient.create(model), retriever=Docs())
    result = svc.answer("Where is the Eiffel Tower?")
    assert result.value == "Paris." and [d.id for d in result.sources] == ["d1"]
    assert "The Eiffel Tower is in Paris." in model.last_prompt.user_message.text
    aresult = asyncio.run(svc.aanswer("Where is the Eiffel Tower?"))
    assert [d.id for d in aresult.sources] == ["d1"]


def test_vector_store_as_retriever_and_question_answer_advisor_fill_sources():
    from advisors import QuestionAnswerAdvisor
    from chatclient.rag import SearchRequest

    store = Docs().store
    model = ScriptedChatModel(["yellow", "yellow again"])
    svc = ai_service(Qa, client=ChatClient.create(model), retriever=store)
    assert "d2" in [d.id for d in svc.answer("What colour are bananas?").sources]
    svc2 = ai_service(
        Qa, client=ChatClient.create(model), advisors=[QuestionAnswerAdvisor(store, SearchRequest(top_k=1))]
    )
    assert [d.id for d in svc2.answer("What colour are bananas?").sources] == ["d2"]


# -- guardrails (wiring; the guardrails themselves are tested in test_guardrails.py) -----------------


class NoSecrets(InputGuardrail):
    def validate(self, request):
        return self.fatal("no secrets, please") if "password" in request.text else self.success()


class Polite(OutputGuardrail):
    def validate(self, request):
        return self.success() if "please" in request.text else self.retry("be polite")


class Simple(Protocol):
    def ask(self, question: str) -> str: ...

    async def aask(self, question: str) -> str: ...

    def stream(self, question: str) -> Iterator[str]: ...


def test_input_guardrails_stop_the_request_before_the_model():
    model = ScriptedChatModel(["never"])
    svc = ai_service(Simple, client=ChatClient.create(model), input_guardrails=[NoSecrets()])
    with pytest.raises(InputGuardrailError) as info:
        svc.ask("my password is hunter2")
    assert info.value.failures[0].message == "no secrets, please"
    assert model.prompts == []
    with pytest.raises(InputGuardrailError):
        asyncio.run(svc.aask("password?"))


def test_output_guardrails_retry_in_every_mode():
    model = ScriptedChatModel(["no", "yes please", "no", "ok please", ["n", "o"], ["fine ", "please"]])
    svc = ai_service(Simple, client=ChatClient.create(model), output_guardrails=[Polite()])
    assert svc.ask("q") == "yes please"
    assert asyncio.run(svc.aask("q")) == "ok please"
    assert "".join(svc.stream("q")) == "fine please"
    assert len(model.prompts) == 6


def test_output_guardrail_retries_are_bounded():
    model = ScriptedChatModel(["no", "no", "still no"])
    svc = ai_service(Simple, client=ChatClient.create(model), output_guardrails=[Polite()], output_guardrail_retries=1)
    with pytest.raises(OutputGuardrailError):
        svc.ask("q")
    assert len(model.prompts) == 2


def test_blocked_input_is_not_stored_in_memory():
    class Remembering(Protocol):
        def ask(self, question: str, user: MemoryId[str]) -> str: ...

    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["hello"])
    svc = ai_service(Remembering, client=ChatClient.create(model), memory=memory, input_guardrails=[NoSecrets()])
    with pytest.raises(InputGuardrailError):
        svc.ask("the password is 1234", user="u")
    assert memory.get("u") == []
    assert svc.ask("hi", user="u") == "hello"
    assert [m.text for m in memory.get("u")] == ["hi", "hello"]


def test_tool_context_parameter_is_merged_into_the_tools_context():
    class WithContext(Protocol):
        def ask(self, question: str, ctx: ToolContext, tenant: ToolArg[str] = "acme") -> str: ...

    model = ScriptedChatModel([call_tool("weather", city="Bern"), "done", "plain"])
    svc = ai_service(WithContext, client=ChatClient.create(model), tools=[weather])
    assert svc.ask("Bern?", ToolContext({"tenant": "from-mapping", "user": "u1"}), tenant="from-arg") == "done"
    assert model.last_prompt.messages[-1].responses[0].response_data == "Bern: 18C for from-arg"
    with pytest.raises(TypeError, match="must be a mapping"):
        svc.ask("x", "not a mapping")
    # passed through when the method is a tool of another service
    callback = service_tool(svc.ask)
    assert list(callback.definition.input_schema["properties"]) == ["question"]
    assert callback.call('{"question": "q"}', ToolContext({"tenant": "t"})) == "plain"


def test_retrieval_and_input_guardrails_in_streams():
    class Streaming(Protocol):
        def stream(self, question: str) -> Iterator[str]: ...

        def astream(self, question: str) -> AsyncIterator[str]: ...

    model = ScriptedChatModel([["Par", "is."], ["Paris", " again."]])
    svc = ai_service(Streaming, client=ChatClient.create(model), retriever=Docs(), input_guardrails=[NoSecrets()])
    assert "".join(svc.stream("Where is the Eiffel Tower?")) == "Paris."
    assert "The Eiffel Tower is in Paris." in model.last_prompt.user_message.text

    async def run():
        return [t async for t in svc.astream("Where is the Eiffel Tower?")]

    assert "".join(asyncio.run(run())) == "Paris again."
    assert "The Eiffel Tower is in Paris." in model.last_prompt.user_message.text
    with pytest.raises(InputGuardrailError):
        list(svc.stream("password please"))
    assert len(model.prompts) == 2
