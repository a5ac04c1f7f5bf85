"""One error hierarchy for the whole library.

Caller mistakes (bad arguments) are plain ``ValueError``/``TypeError``; everything that goes wrong
while talking to a model, rendering a template, converting output or running tools is a
``ChatClientError``. No message here ever contains an API key: providers pass only status codes
and body excerpts, which they scrub.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ChatClientError(Exception):
    """Base class of every error raised by chatclient."""


class TemplateError(ChatClientError):
    """A template could not be rendered; ``missing`` lists every undefined variable."""

    def __init__(self, message: str, missing: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.missing: tuple[str, ...] = tuple(missing)


class AdvisorChainError(ChatClientError):
    """The advisor chain was misused: an exhausted chain, or an advisor that cannot serve a mode."""


class OutputConversionError(ChatClientError):
    """Model output could not be converted to the requested type."""

    def __init__(self, message: str, text: str | None = None, target: object = None) -> None:
        super().__init__(message)
        self.text = text
        self.target = target


class RefusalError(OutputConversionError):
    """The model declined to answer (OpenAI ``message.refusal``), so there is no output to convert.

    ``refusal`` is the model's own explanation; it is also on ``AssistantMessage.refusal``. Catching
    ``OutputConversionError`` catches this too, so ``entity()`` callers need no new ``except``.
    """

    def __init__(self, refusal: str, message: str | None = None, target: object = None) -> None:
        super().__init__(
            message or f"the model refused to answer: {refusal[:300]}; rephrase the request or handle the refusal",
            text=None,
            target=target,
        )
        self.refusal = refusal


class FilterExpressionError(ChatClientError):
    """A filter expression is malformed; ``position`` is the 0-based offset of the problem."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message if position is None else f"{message} (at position {position})")
        self.position = position


class VectorStoreError(ChatClientError):
    """A vector store's engine (PostgreSQL + pgvector, Chroma, Redis) is missing a piece or refused
    an operation; ``store`` names the store class. The message says what to install or change."""

    def __init__(self, message: str, store: str | None = None) -> None:
        super().__init__(message)
        self.store = store


class WebSearchError(ChatClientError):
    """A web search engine could not be reached or answered something unusable (an HTTP error, a
    body that is not the expected JSON, an answer over the size cap); ``status`` is the HTTP status
    when there was one. The message never contains the engine's API key."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ChatMemoryError(ChatClientError):
    """A chat memory store (PostgreSQL, Redis, SQLite) failed: it is down or unreachable, refused the
    credentials, timed out, or the database is locked or not writable. ``store`` names the store
    (``"PostgreSQL"``, ``"Redis"``, ``"SQLite"``); the message names the operation and what to check,
    never a password. The driver's exception is the ``__cause__``."""

    def __init__(self, message: str, store: str = "") -> None:
        super().__init__(message)
        self.store = store


class ChatMemoryTimeoutError(ChatMemoryError, TimeoutError):
    """A chat memory store did not answer in time, stayed locked, or no pooled connection became free.

    It is also a ``TimeoutError``, so code that catches that keeps working."""


class DocumentReadError(ChatClientError):
    """A document (PDF, HTML, a file under a directory) could not be read: malformed, too large or too slow.

    ``source`` names the file (or ``"<text>"``) when known; the message says which limit to raise
    or what to fix.
    """

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source


class ModelError(ChatClientError):
    """A model call failed."""


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status (or reported one mid-stream).

    ``body`` is a scrubbed excerpt of the error body. ``code`` and ``type`` are the provider's own
    error code and error type when its body carried them (OpenAI ``error.code`` / ``error.type``,
    Anthropic ``error.type`` such as ``"overloaded_error"``); ``request_id`` comes from the
    ``x-request-id`` / ``request-id`` response header: quote it when contacting the provider.
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        body: str | None = None,
        *,
        code: str | None = None,
        type: str | None = None,  # the provider's own name for it
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.code = code
        self.type = type
        self.request_id = request_id


class AuthenticationError(ModelHTTPError):
    """The provider rejected the credentials (401/403)."""


class RateLimitError(ModelHTTPError):
    """The provider throttled the call (429); ``retry_after`` is in seconds when it said so."""

    def __init__(
        self,
        message: str,
        status: int | None = 429,
        body: str | None = None,
        retry_after: float | None = None,
        *,
        code: str | None = None,
        type: str | None = None,  # the provider's own name for it
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body, code=code, type=type, request_id=request_id)
        self.retry_after = retry_after


class ModelTimeoutError(ModelError):
    """The provider did not answer in time."""


class ModelConnectionError(ModelError):
    """The connection to the provider failed or broke mid-response."""


class ModelResponseError(ModelError):
    """The provider's payload was malformed, incomplete, or larger/deeper than the configured bounds."""


class ModelRequestError(ModelError):
    """The request could not be sent as built (an invalid header value, URL or protocol).

    Never retried: sending the same request again cannot succeed. The message names what to fix
    and never quotes a header value.
    """


class ToolError(ChatClientError):
    """A tool could not be resolved or executed."""


class ToolExecutionError(ToolError):
    """A tool raised, or its arguments were invalid (raised only with ``raise_on_tool_error``)."""

    def __init__(self, message: str, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class UnknownToolError(ToolError):
    """The model asked for a tool that was not offered."""

    def __init__(self, message: str, tool_name: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class ToolLoopLimitError(ToolError):
    """The model kept asking for tools beyond ``max_iterations``."""


class ToolApprovalError(ToolError, ValueError):
    """A resumed approval does not match what was paused: a call that was not pending, a decision
    made on another name or other arguments, a missing decision, or stored state whose signature
    fails. Nothing ran; decide again on the calls as stored (``pending.calls``).
    """


class McpError(ChatClientError):
    """Talking to a Model Context Protocol server failed (``chatclient.mcp``).

    ``server`` names the server (its command or URL, never a header value); ``code`` is the
    JSON-RPC error code when the server sent one.
    """

    def __init__(self, message: str, *, server: str | None = None, code: int | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.code = code


class McpConnectionError(McpError):
    """An MCP server did not start, could not be reached, or went away mid-call.

    ``stderr`` holds the last lines the server wrote to its standard error (stdio servers), which
    usually say why it stopped.
    """

    def __init__(
        self, message: str, *, server: str | None = None, code: int | None = None, stderr: str = ""
    ) -> None:
        super().__init__(message, server=server, code=code)
        self.stderr = stderr


class McpAuthError(McpConnectionError):
    """OAuth for a remote MCP server failed: metadata discovery, client registration, the user's
    authorization, the token request, or the server refused the token (401/403). The message never
    holds a token or a client secret."""


class McpTimeoutError(McpError):
    """An MCP server did not answer in time (connecting, initialising or a call); ``timeout`` is in seconds."""

    def __init__(
        self, message: str, *, server: str | None = None, code: int | None = None, timeout: float | None = None
    ) -> None:
        super().__init__(message, server=server, code=code)
        self.timeout = timeout


class McpProtocolError(McpError):
    """An MCP server spoke a protocol version this client does not support, or sent something malformed."""


class McpServerError(McpError):
    """An MCP server answered a request with an error (unknown tool, invalid arguments, internal error)."""


class A2AError(ChatClientError):
    """A remote Agent-to-Agent (A2A) agent could not give an answer (``chatclient.a2a``).

    ``reason`` says why: the remote task's end state (``"failed"``, ``"rejected"``, ``"canceled"``,
    ``"auth-required"``), or ``"connection"``, ``"timeout"``, ``"protocol"`` (a malformed or unexpected
    answer), ``"too-large"`` (the answer passed the agent's size bounds). ``url`` is the agent's URL
    (never a header value); ``task_id`` / ``context_id`` name the remote task when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        url: str | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.url = url
        self.task_id = task_id
        self.context_id = context_id


class AiServiceDefinitionError(ChatClientError):
    """An interface given to ``ai_service`` cannot become a service; raised when the service is built.

    ``method`` and ``parameter`` name the declaration at fault (``None`` when not about one).
    """

    def __init__(self, message: str, method: str | None = None, parameter: str | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.parameter = parameter


class ToolLoopRepeatError(ToolLoopLimitError):
    """The model repeated the same tool call (same tool, same arguments) too often, or called one
    tool more often than its cap allows; ``tool_name`` names the tool, ``count`` the calls seen."""

    def __init__(self, message: str, tool_name: str | None = None, count: int = 0) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.count = count


class CircuitOpenError(ModelError):
    """A model's circuit breaker is open, so the call was not sent.

    ``model`` names the model (or models) skipped; ``retry_in`` is how many seconds remain until the
    breaker lets a probe call through.
    """

    def __init__(self, message: str, model: str | None = None, retry_in: float | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.retry_in = retry_in


class DeadlineExceededError(ChatClientError, TimeoutError):
    """A request ran longer than its ``max_duration(seconds)``: the whole chain (tool loop and
    re-asks included) is stopped. ``seconds`` is the limit that was set."""

    def __init__(self, seconds: float, where: str = "") -> None:
        at = f" ({where})" if where else ""
        super().__init__(
            f"the request exceeded its max_duration of {seconds:g} s{at}; raise max_duration(...) or "
            "make the request cheaper (fewer tools, a smaller model, a shorter answer)"
        )
        self.seconds = seconds


class BudgetExceededError(ChatClientError):
    """A token or cost budget would be exceeded by the next model call, so it was not made.

    ``usage`` is the ``Usage`` of the calls made so far under this budget, ``cost`` their cost (in the
    price table's currency, ``None`` without prices) and ``limit`` names the limit that stopped it.
    ``retry_after`` is the number of seconds until the refusing budget's period ends and it allows
    calls again (a shared ``Budget`` with a ``period``); ``None`` when waiting does not help (a
    per-request limit, a budget that never resets, a missing price).
    """

    def __init__(
        self,
        message: object,
        usage: object = None,
        *,
        cost: float | None = None,
        limit: str = "",
        retry_after: float | None = None,
    ) -> None:
        if not isinstance(message, str):  # BudgetExceededError(usage), as API.md writes it
            message, usage = f"the budget is spent (usage so far: {message})", message
        super().__init__(message)
        self.usage = usage
        self.cost = cost
        self.limit = limit
        self.retry_after = retry_after


class GuardrailError(ChatClientError):
    """A guardrail rejected a request or an answer; ``failures`` lists every failure, in guard order.

    Each failure is a ``chatclient.guardrails.GuardrailFailure`` with the guard's ``guardrail`` name,
    its ``message`` and the ``cause`` it gave (if any).
    """

    # Typed as Any: errors sit at the bottom of the layers and import nothing above them, not even for
    # types (each item is a chatclient.guardrails.GuardrailFailure).
    def __init__(self, message: str, failures: Iterable[Any] = ()) -> None:
        super().__init__(message)
        self.failures: tuple[Any, ...] = tuple(failures)


class InputGuardrailError(GuardrailError):
    """An input guardrail rejected the request (a ``failure`` or ``fatal`` result); the model was not called."""


class OutputGuardrailError(GuardrailError):
    """An output guardrail rejected the answer, or retries were exhausted, or a retry followed a rewrite."""


class EvaluationError(ChatClientError):
    """An evaluation could not be carried out: the judge's verdict stayed malformed after re-asking,
    an evaluator lacked an input it needs (a question, a reference answer), or a dataset is invalid."""


class CassetteError(ChatClientError):
    """A cassette file is unreadable, or a replay-only cassette has nothing recorded for a request."""


class CassetteMismatchError(CassetteError):
    """A request has no recorded match in the cassette; ``diff`` shows how it differs from the nearest one."""

    def __init__(self, message: str, diff: str = "") -> None:
        super().__init__(message)
        self.diff = diff


# --- round 3 -----------------------------------------------------------------------------------------


class UnsupportedFeatureError(ChatClientError):
    """The model or provider cannot do what the request asks (a hosted tool it does not run, token
    log-probabilities it does not report, ...). Raised while the request is built, before any HTTP call.

    ``feature`` names what was asked for, ``provider`` who was asked.
    """

    def __init__(self, message: str, *, feature: str = "", provider: str = "") -> None:
        super().__init__(message)
        self.feature = feature
        self.provider = provider


class ContextWindowExceededError(ChatClientError):
    """The prompt cannot fit the model's context window even after trimming: ``tokens`` is what the
    smallest prompt that could be sent would take, ``limit`` the input budget. No HTTP call was made."""

    def __init__(self, message: str, *, tokens: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.limit = limit


class AgentInputError(ChatClientError):
    """An agent's inputs are missing from the scope; ``missing`` names every absent key."""

    def __init__(self, agent_name: str, missing: Iterable[str], message: str | None = None) -> None:
        self.agent_name = agent_name
        self.missing: tuple[str, ...] = tuple(missing)
        super().__init__(
            message
            or f"agent {agent_name!r} is missing its inputs {', '.join(map(repr, self.missing))}: pass them to "
            "run(...) or have an earlier agent write them (output_key=...)"
        )


class AgentExecutionError(ChatClientError):
    """An agent inside a workflow failed; ``agent_name`` names it, ``path`` is the chain of workflow
    names from the root to it, and ``cause`` (also ``__cause__``) is the original error."""

    def __init__(
        self, agent_name: str, cause: BaseException, *, path: Iterable[str] = (), message: str | None = None
    ) -> None:
        self.agent_name = agent_name
        self.cause = cause
        self.path: tuple[str, ...] = tuple(path)
        where = " > ".join((*self.path, agent_name)) if self.path else agent_name
        super().__init__(message or f"agent {where!r} failed: {type(cause).__name__}: {cause}")


class UnknownAgentError(ChatClientError, LookupError):
    """No agent of that name is registered; ``name`` is the one asked for, ``known`` the registered names."""

    def __init__(self, name: str, known: Iterable[str], message: str | None = None) -> None:
        self.name = name
        self.known: tuple[str, ...] = tuple(known)
        listed = ", ".join(map(repr, self.known)) or "none"
        super().__init__(message or f"no agent named {name!r} is registered; registered agents: {listed}")


class PlannerError(ChatClientError):
    """A planner cannot go on: no sequence of agents reaches its goal, or its step limit ran out before
    the goal was reached (``chatclient.agents.patterns``)."""


class AgenticScopeError(ChatClientError):
    """An agentic scope could not be stored or restored: a value of an unregistered type, or scope JSON
    that is malformed, too large, too deep or names a type that is not registered."""


class RunClaimedError(AgenticScopeError):
    """A run (a scope id in a store) could not be claimed, so nothing ran.

    ``reason`` says why: ``"running"`` — another run or resume holds the claim and its lease is
    live; ``"resumed"`` — this suspension was already resumed (a replayed scope JSON or resume
    token); ``"lost"`` — this run's lease expired and another claimant took the run over, so this
    one stopped before recording more work. ``scope_id`` names the run.
    """

    def __init__(self, scope_id: str, reason: str, message: str) -> None:
        self.scope_id = scope_id
        self.reason = reason
        super().__init__(message)


class SkillError(ChatClientError):
    """A skill folder is unusable: no ``SKILL.md``, malformed front matter, or a missing name/description."""


class BatchError(ChatClientError):
    """A provider batch job failed as a whole (rejected input file, unknown ``custom_id`` in a result
    file, a checkpoint that belongs to another run)."""


class BatchTimeoutError(BatchError, TimeoutError):
    """``BatchJob.wait(timeout=...)`` ran out before the job finished; ``job_id`` names the job."""

    def __init__(self, job_id: str, timeout: float) -> None:
        super().__init__(
            f"batch job {job_id!r} did not finish within {timeout:g} s; it keeps running at the provider: "
            "call attach(job_id).wait() later, or cancel() it"
        )
        self.job_id = job_id
        self.timeout = timeout


class CheckpointError(BatchError):
    """A ``run_many`` checkpoint file cannot be read back (damaged, truncated, or not written by
    ``run_many``); ``path`` names the file. Nothing was run: move the file away to start over."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class SharedStateError(ChatClientError):
    """The shared store of a fleet-wide ``RateLimiter`` or ``Budget`` (Redis) failed; ``where`` is its
    host and port (never credentials)."""

    def __init__(self, message: str, *, where: str) -> None:
        super().__init__(message)
        self.where = where


class DurableSuspendedError(ChatClientError):
    """A durable (DBOS) agents run reached ``human_input`` without a responder; ``question`` and
    ``scope_json`` say where it stopped (resume it with ``workflow.resume`` outside DBOS)."""

    def __init__(self, question: str, scope_json: str) -> None:
        super().__init__(
            f"the durable run is waiting for a person ({question!r}); resume it with workflow.resume(scope, answer) "
            "outside DBOS, or give human_input a responder"
        )
        self.question = question
        self.scope_json = scope_json


class BatchItemError(BatchError):
    """One item of a provider batch has no answer: ``kind`` is ``"errored"`` (the provider's error is
    in the message), ``"expired"`` (the job's window ended first), ``"canceled"`` or ``"missing"``."""

    def __init__(self, message: str, *, kind: str, custom_id: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.custom_id = custom_id


class InvalidDecisionResponseError(ChatClientError):
    """A decision could not be read: none of the option labels is among the model's top tokens."""


class InvalidDecisionQuestionError(ChatClientError, ValueError):
    """A decision question or its input cannot be asked: fewer than two options, duplicate labels,
    more options than single-token labels, an input value that is not plain data (the message names
    the field), a threshold outside 0..1. Raised before any model call."""


__all__ = [
    "A2AError",
    "AdvisorChainError",
    "AgentExecutionError",
    "AgentInputError",
    "AgenticScopeError",
    "AiServiceDefinitionError",
    "AuthenticationError",
    "BatchError",
    "BatchItemError",
    "BatchTimeoutError",
    "BudgetExceededError",
    "CassetteError",
    "CassetteMismatchError",
    "ChatClientError",
    "ChatMemoryError",
    "ChatMemoryTimeoutError",
    "CheckpointError",
    "CircuitOpenError",
    "ContextWindowExceededError",
    "DeadlineExceededError",
    "DurableSuspendedError",
    "EvaluationError",
    "FilterExpressionError",
    "GuardrailError",
    "InputGuardrailError",
    "InvalidDecisionQuestionError",
    "InvalidDecisionResponseError",
    "McpAuthError",
    "McpConnectionError",
    "McpError",
    "McpProtocolError",
    "McpServerError",
    "McpTimeoutError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelTimeoutError",
    "OutputConversionError",
    "OutputGuardrailError",
    "PlannerError",
    "RateLimitError",
    "RefusalError",
    "RunClaimedError",
    "SharedStateError",
    "SkillError",
    "TemplateError",
    "ToolApprovalError",
    "ToolError",
    "ToolExecutionError",
    "ToolLoopLimitError",
    "ToolLoopRepeatError",
    "UnknownAgentError",
    "UnknownToolError",
    "UnsupportedFeatureError",
    "VectorStoreError",
    "WebSearchError",
]
