"""Image, transcription and speech models as tools, so an agent can draw, listen and speak.

    from chatclient.tools import image_tool, speech_tool, transcription_tool

    client.prompt("Draw a logo for a bakery, then describe it").tools(image_tool(images)).call()
    client.prompt("What does the customer want in calls/1042.mp3?").tools(
        transcription_tool(ears, directory="calls")).call()

``image_tool`` and ``speech_tool`` answer with ``ToolResult(text, media=...)``: the images or the
audio reach the model as media in the tool result (Anthropic ``tool_result`` blocks, Responses
``input_image``/``input_file``, Chat Completions a following user message), and the caller finds
them in the conversation. ``transcription_tool`` reads audio files the model names, only from
``directory`` (the working directory by default) and only files with an audio extension, and
answers with the transcript's text. The developer's defaults (``size=``, ``voice=``,
``language=``...) go to every call; the model chooses only the prompt, text or file (and the
language of a recording).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatclient.tools.callback import FunctionToolCallback
from chatclient.tools.results import ToolResult

if TYPE_CHECKING:
    from chatclient.models.audio import SpeechModel, TranscriptionModel
    from chatclient.models.images import ImageModel

__all__ = ["AUDIO_EXTENSIONS", "image_tool", "speech_tool", "transcription_tool"]

AUDIO_EXTENSIONS = frozenset({".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".oga", ".ogg", ".wav", ".webm"})
"""The files ``transcription_tool`` opens (the formats OpenAI transcription takes)."""


def image_tool(
    model: ImageModel, *, name: str = "generate_image", description: str | None = None, **defaults: Any
) -> FunctionToolCallback:
    """A tool that draws images with ``model``: the model gives the prompt, ``defaults`` (``size``,
    ``quality``, ``n``...) are the developer's. The result carries the images as media."""
    if not callable(getattr(model, "generate", None)):
        raise TypeError(f"image_tool needs an ImageModel (with generate()), got {type(model).__name__}")

    def generate_image(prompt: str) -> ToolResult:
        """Draw an image.

        Args:
            prompt: What the image shows, in detail (subject, style, colours, composition).
        """
        response = model.generate(prompt, **defaults)
        media = tuple(image.to_media() for image in response.images)
        kinds = ", ".join(sorted({m.mime_type for m in media}))
        text = f"Generated {len(media)} image(s) ({kinds}), attached."
        revised = [image.revised_prompt for image in response.images if image.revised_prompt]
        if revised:
            text += f" The image model drew: {revised[0]}"
        return ToolResult(text, media)

    return FunctionToolCallback(
        generate_image,
        name=name,
        description=description or "Draw an image from a text description; the image is attached to the result.",
    )


def speech_tool(
    model: SpeechModel, *, name: str = "speak", description: str | None = None, **defaults: Any
) -> FunctionToolCallback:
    """A tool that reads a text aloud with ``model``: the model gives the text, ``defaults``
    (``voice``, ``format``, ``instructions``...) are the developer's. The result carries the audio."""
    if not callable(getattr(model, "speak", None)):
        raise TypeError(f"speech_tool needs a SpeechModel (with speak()), got {type(model).__name__}")

    def speak(text: str) -> ToolResult:
        """Read a text aloud.

        Args:
            text: The exact words to say.
        """
        speech = model.speak(text, **defaults)
        return ToolResult(f"Spoke {len(text)} characters as {speech.mime_type}, attached.", (speech.to_media(),))

    return FunctionToolCallback(
        speak, name=name, description=description or "Read a text aloud; the audio is attached to the result."
    )


def transcription_tool(
    model: TranscriptionModel,
    *,
    directory: str | os.PathLike[str] | None = None,
    name: str = "transcribe_audio",
    description: str | None = None,
    **defaults: Any,
) -> FunctionToolCallback:
    """A tool that transcribes an audio file with ``model``. The model names the file, relative to
    ``directory`` (default: the working directory, resolved now); a path that leaves it (``..``, a
    link out), a missing file or one without an audio extension is refused with an error the model
    reads. ``defaults`` (``language``, ``prompt``...) go to every call."""
    if not callable(getattr(model, "transcribe", None)):
        raise TypeError(f"transcription_tool needs a TranscriptionModel (with transcribe()), got {type(model).__name__}")
    root = Path(directory if directory is not None else os.getcwd()).resolve()
    if not root.is_dir():
        raise ValueError(f"transcription_tool's directory {str(root)!r} is not a directory")

    def transcribe_audio(file: str, language: str | None = None) -> str:
        """Transcribe a recording to text.

        Args:
            file: The audio file's path, relative to the recordings folder (e.g. "calls/1042.mp3").
            language: The spoken language as an ISO-639-1 code (e.g. "en") if known.
        """
        path = (root / file).resolve()
        if not path.is_relative_to(root):
            raise ValueError(f"{file!r} is outside the recordings folder; name a file inside it")
        if path.suffix.lower() not in AUDIO_EXTENSIONS:
            raise ValueError(f"{file!r} is not an audio file ({', '.join(sorted(AUDIO_EXTENSIONS))})")
        if not path.is_file():
            raise ValueError(f"there is no recording {file!r}")
        options = dict(defaults)
        if language:
            options["language"] = language
        return model.transcribe(path, **options).text

    return FunctionToolCallback(
        transcribe_audio,
        name=name,
        description=description or "Transcribe a recorded audio file (speech to text) and return the transcript.",
    )
