"""Every example script runs (offline, on the scripted/function models) and prints what it promises.

Each script is run as a user would run it — ``python examples/<name>.py`` in a subprocess, with the
real-model environment variables removed so the offline model is used — and its output is checked
for the facts the example demonstrates, not just for a zero exit code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
# quickstart.py runs the embedded llama.cpp model; it has its own test with the real model.
NOT_HERE = {"quickstart.py", "_support.py"}
REAL_MODEL_VARS = ("OPENAI_API_KEY", "CHATCLIENT_BASE_URL", "CHATCLIENT_MODEL")


def run_example(name: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in REAL_MODEL_VARS}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    # Without the real-model variables every example says it runs on the offline model.
    assert "(offline, from chatclient.testing;" in result.stdout
    return result.stdout


def check_fluent_call(out: str) -> None:
    assert "answer: Recursion is when a function solves a problem" in out
    assert "finish reason: stop" in out
    assert re.search(r"usage: [1-9]\d* prompt \+ [1-9]\d* completion tokens", out)
    assert "pirate: Arr" in out
    assert "sent system: You are a patient teacher. Answer in one sentence." in out
    assert "sent user: Explain recursion to a beginner." in out


def check_streaming(out: str) -> None:
    assert "deltas: 'One' ', two' ', three' ', four' ', five.'" in out
    assert "aggregated 4 chunks: 'Lisbon is the capital of Portugal.' (finish reason stop)" in out
    partials = [line for line in out.splitlines() if line.startswith("partial:")]
    assert len(partials) >= 3, partials
    assert partials[0] == "partial: name='Lis' country=None population=None"
    assert partials[-1] == "partial: name='Lisbon' country='Portugal' population=545000"


def check_async_concurrent(out: str) -> None:
    assert "50 concurrent calls" in out
    assert "50 answers match their question" in out
    assert "first answers: ['Lisbon has 6 letters.', 'Oslo has 4 letters.', 'Quito has 5 letters.']" in out
    assert "streamed: Reykjavik has 9 letters." in out


def check_custom_advisor(out: str) -> None:
    for mode in ("call", "stream", "acall", "astream"):
        assert re.search(rf"^\s*{mode}: 'It is a fine day.' dated=True timed=True$", out, re.MULTILINE), mode
    # The date line was appended to the existing system message, not put in place of it.
    assert f"system message sent: You are a concise assistant. | Today is {date.today().isoformat()}." in out


def check_default_advisors(out: str) -> None:
    assert "1: You can reset it from the login page" in out
    assert "advisor order: ['outer-log:before', 'inner-log:before', 'inner-log:after', 'outer-log:after']" in out
    assert "conversation id in the context: ada" in out
    assert "Read the question again: How many r's are in 'strawberry'?" in out
    assert "3: I can't respond to that because it touches on sensitive content." in out
    assert "system sent: You are ACME's weekend support assistant. | script left: 0" in out


def check_entity_extraction(out: str) -> None:
    assert "person: name='Maria Silva' age=31 city='Lisbon'" in out
    assert "Person(name='João', age=27, city='Porto')" in out
    assert "sentiment: Sentiment.POSITIVE" in out
    assert "validated: name='Maria Silva' age=31 city='Lisbon' after 2 model calls" in out
    assert "at $.age: 'thirty-one' is not of type 'integer'" in out


def check_tools(out: str) -> None:
    # The two calls of one turn run concurrently, so their log lines may come in either order.
    assert "[tool] get_weather('Lisbon') for tenant acme" in out
    assert "[tool] get_weather('Oslo') for tenant acme" in out
    assert "answer: Lisbon is sunny at 21 °C, while Oslo has light snow at 4.5 °C" in out
    assert '"city":"Oslo","temp_c":4.5,"conditions":"light snow"' in out
    assert "direct answer: Ticket #4711 opened. (finish reason return_direct)" in out


def check_memory_sqlite(out: str) -> None:
    lines = out.splitlines()
    restart = lines.index("-- restart: a new repository and client on the same file --")
    before, after = "\n".join(lines[:restart]), "\n".join(lines[restart:])
    assert "< Your name is Ada." in before
    assert "< I don't know your name yet." in before  # bob's conversation is separate
    assert "< Your name is Ada." in after  # remembered across the restart, from the file
    assert "stored for ada: 6 messages; conversations: ['ada', 'bob']" in after


def check_rag_markdown(out: str) -> None:
    assert "indexed 6 sections from 3 files in kettle/" in out
    answers = [line for line in out.splitlines() if line.startswith("A: ")]
    assert len(answers) == 3
    assert "descale the kettle every four weeks" in answers[0]
    assert "Green tea tastes best at 80 degrees" in answers[1]
    assert "two-year warranty" in answers[2]
    assert "sources: ['Descaling'" in out
    assert "filtered: According to the manual: Our support team answers by phone" in out
    assert "from files: ['warranty.md']" in out


def check_safeguard(out: str) -> None:
    assert "allowed: Paris is the capital of France." in out
    assert "refused: Sorry, I can't help with that." in out
    screened = next(line for line in out.splitlines() if line.startswith("screened stream:"))
    assert "hunter2" not in screened and "sensitive content" in screened
    assert "model calls: 3 (the refused request never reached the model)" in out


def check_guardrails(out: str) -> None:
    assert "model saw: Mail me at [EMAIL] or call [PHONE]." in out
    assert "ada@example.com" not in out.split("model saw:", 1)[1].splitlines()[0]
    assert "blocked: PromptInjectionGuardrail: possible prompt injection (instruction_override, prompt_leak)" in out
    assert "person: name='Ada Lovelace' age=36" in out
    assert "reprompt: Your previous answer was rejected" in out and "at $.age:" in out
    assert "streamed: ['Ada Lovelace ', 'wrote the first program.']" in out  # the long attempt never streamed
    assert "model calls: 5 (the blocked request never reached the model)" in out


def check_observability(out: str) -> None:
    assert "answer: It is 14:05 in Tokyo." in out
    tree = out.split("spans:\n", 1)[1]
    assert tree.startswith("chat scripted  (input_tokens=")
    assert "\n  advisor ToolCallAdvisor\n" in tree
    assert tree.count("      advisor ChatModelAdvisor") == 2  # two model turns inside the tool loop
    assert "\n    execute_tool get_time  (name=get_time)\n" in tree  # the tool ran between them
    assert "metric gen_ai.client.token.usage input: count=1" in out
    assert "metric gen_ai.client.operation.duration" in out


def check_ai_service(out: str) -> None:
    assert "chat: Hello Ada, welcome to Acme Books!" in out
    assert "history sent: ['Hi, I am Ada.', 'Hello Ada, welcome to Acme Books!', 'What is my name?']" in out
    assert "invoice: number='INV-2024-117' total=249.9 currency='EUR'" in out
    assert "urgency: Urgency.HIGH" in out
    assert "stream: We are  | sorry to hear  | that." in out
    assert "[tool] order_status('A-42') for customer ada" in out
    assert "track: Your order A-42 shipped yesterday and arrives Friday." in out
    assert """tools run: [('order_status', '{"order_id": "A-42"}')] finish reason: stop""" in out


def check_mcp_tools(out: str) -> None:
    assert "server: shop | protocol" in out
    assert "tools: ['order_status']" in out
    # The result came back over MCP from the server subprocess, not from the script.
    assert '[mcp tool] order_status({"order_id": "A-42"}) -> shipped on Monday, arriving Thursday' in out
    assert "resource: policy://returns -> Items can be returned within 30 days with the receipt." in out
    assert "prompt messages: ['Write a firm complaint about order A-42, which is late.']" in out


def check_production(out: str) -> None:
    assert "approval asked: refund_order" in out and '"amount": 80' in out
    assert "tool: refund_order -> Denied: refunds over 50 EUR need a manager" in out  # the tool never ran
    assert "first turn offered: ['search_tools']" in out  # not the 40 tools
    assert "answered by: gpt-4o-mini" in out and "primary breaker: open" in out
    assert re.search(r"request cost: \$0\.0000\d\d for \d+ tokens", out)
    assert "primary called again: False" in out
    took = float(re.search(r"5 calls at 20/s took ([0-9.]+) s", out).group(1))  # type: ignore[union-attr]
    assert 0.15 <= took < 1.5


def check_evaluation(out: str) -> None:
    # the judge's typed verdict, then the plain checks
    assert "relevancy: passed=True score=0.95 reasoning='It names Paris, which answers the question.'" in out
    assert "regex: the answer matches /\\b\\d+ degrees\\b/ (at '100 degrees')" in out
    assert "json schema: 1 schema problem(s): at $: 'city' is a required property" in out
    # two runs compared: v2 fixed two cases and broke one
    assert re.search(r"^spider\s+FAIL\s+0\.00", out, re.MULTILINE)
    assert "v2: 4/5 passed (80%)" in out and "2 better, 1 worse, 2 unchanged" in out
    assert "better: ['planet', 'light'] worse: ['spider']" in out
    written = re.search(r"reports written: \['report.html', 'report.json'\] in (\S+)", out)
    assert written is not None, out
    assert (Path(written.group(1)) / "report.html").is_file()  # the printed folder is where they are


def check_vector_stores(out: str) -> None:
    # the same filtered searches on every store that runs here, with the same results
    assert "stores: memory, sqlite, chroma" in out
    assert out.count("(all stores agree)") == 3 and "stores differ" not in out
    assert "-> ['k-boil', 'k-scale', 'k-dry']" in out  # the kettle passages only, best first
    assert "year >= 2022 AND NOT (product == 'kettle')\n   -> ['t-level']" in out
    assert "-> ['t-level', 'k-boil', 't-crumb']" in out  # t-old is discontinued, k-scale/k-dry years not listed
    assert "A: From the FAQ: Descale the kettle every four weeks with citric acid." in out


def check_agents_workflow(out: str) -> None:
    assert "plan: Day 1: walk the old town in the sun. Day 2: the jazz night at the harbour. Day 3: the maritime" in out
    assert "final score: 0.9" in out
    # the research block ran its two agents, then the critic/reviser loop ran until the score was good
    assert re.search(
        r"- research .*\n    - weather .*\n    - events .*\n  - writer .*\n  - loop .*\n"
        r"    - critic .*\n    - reviser .*\n    - critic ",
        out,
    )
    assert re.search(r"HTML report: \d+ characters, 9 agent nodes", out)
    assert "  started trip\n  started research" in out and "  finished trip" in out


def check_agents_human_recovery(out: str) -> None:
    assert "supervisor chose: ['lookup_order', 'refund']" in out
    assert "refund note: refunded 19.90 EUR for B-42" in out
    assert "waiting for a person: Send this reply? Dear customer, your order B-42 was lost" in out
    assert "after resume: sent (yes, approved by Ada): Dear customer" in out
    assert "writer replayed, not called again: True" in out
    assert "first run failed: AgentExecutionError - agent 'billing > mail_invoice' failed: ConnectionError" in out
    assert "calls: ['make_invoice', 'mail_invoice', 'mail_invoice']" in out


def check_agents_a2a(out: str) -> None:
    assert "card: french_team - Translates English sentences into French" in out
    assert "skills: ['french_team', 'sign']" in out
    assert "remote answer: Les loutres dorment. (translation 1)" in out  # through the HTTP server
    assert "same conversation: Elles se tiennent la main. (translation 2)" in out  # the context id kept state
    assert "streamed: Elles se tiennent la main. (translation 1)" in out
    assert "remote question: In which city?" in out
    assert "after the answer: booked a translator in Lyon" in out


def check_bulk_extract(out: str) -> None:
    assert "first run: 5 of 6 documents, 1 failed" in out
    assert "failed: grace.txt: grace.txt: the model did not answer in time" in out
    assert re.search(r"tokens used: [1-9]\d*", out)
    assert "re-run: 6 of 6 documents, 0 failed" in out
    assert "re-run extracted again: ['grace.txt']" in out  # the other five came from the checkpoint
    assert "ada.txt: Ada Lovelace (London)" in out and "tim.txt: Tim Berners-Lee (Geneva)" in out
    assert "another function on the same checkpoint: BatchError" in out


def check_transcribe_extract(out: str) -> None:
    assert "transcript: Hi, this is Dana Whitfield. My order A-10432 arrived" in out
    # The stand-in server read a real multipart upload: the fields and the WAV file.
    assert "uploaded: model=gpt-4o-mini-transcribe, response_format=json, language=en," in out
    assert re.search(r"file=audio/(x-)?wav, 32044 bytes", out)
    assert "ticket: customer='Dana Whitfield' order_id='A-10432' issue='screen cracked on arrival' wants_refund=True" in out


CHECKS: dict[str, Callable[[str], None]] = {
    "transcribe_extract.py": check_transcribe_extract,
    "bulk_extract.py": check_bulk_extract,
    "agents_a2a.py": check_agents_a2a,
    "agents_workflow.py": check_agents_workflow,
    "agents_human_recovery.py": check_agents_human_recovery,
    "vector_stores.py": check_vector_stores,
    "evaluation.py": check_evaluation,
    "ai_service.py": check_ai_service,
    "fluent_call.py": check_fluent_call,
    "streaming.py": check_streaming,
    "async_concurrent.py": check_async_concurrent,
    "custom_advisor.py": check_custom_advisor,
    "default_advisors.py": check_default_advisors,
    "entity_extraction.py": check_entity_extraction,
    "tools.py": check_tools,
    "mcp_tools.py": check_mcp_tools,
    "memory_sqlite.py": check_memory_sqlite,
    "rag_markdown.py": check_rag_markdown,
    "safeguard.py": check_safeguard,
    "guardrails.py": check_guardrails,
    "observability.py": check_observability,
    "production.py": check_production,
}


def test_every_example_has_a_check() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py")} - NOT_HERE
    assert scripts == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example(name: str) -> None:
    if name == "observability.py":
        pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    if name == "mcp_tools.py":
        pytest.importorskip("mcp", reason="the mcp extra is not installed")
    if name == "agents_a2a.py":
        pytest.importorskip("a2a", reason="the a2a extra is not installed")
    if name == "vector_stores.py":
        pytest.importorskip("chromadb", reason="the chroma extra is not installed")
    CHECKS[name](run_example(name))
