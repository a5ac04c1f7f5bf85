"""A small DBOS application around a chatclient agents workflow, run as its own process by test_durable_dbos.

    python tests/integration/dbos_app.py DB_URL MODEL_URL WORKFLOW_ID SIDE_EFFECTS_FILE

It starts the run named WORKFLOW_ID (or, when DBOS finds it pending in DB_URL after a crash,
recovers it) and prints ``OUTPUT <json>`` when the run is done. The workflow: an agent writes an
outline (one model call), an ``@agent_function`` notes it in SIDE_EFFECTS_FILE, an agent writes the
report calling the tool ``stamp`` (which also appends to SIDE_EFFECTS_FILE) on the way, after a
person (a callback that appends to the file too) approved the call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dbos import DBOS, SetWorkflowID  # noqa: E402

from advisors import ApprovalDecision, ToolApprovalAdvisor  # noqa: E402
from chatclient import ChatClient  # noqa: E402
from chatclient.agents import agent, agent_function, sequence  # noqa: E402
from chatclient.durable.dbos import durable  # noqa: E402
from chatclient.models.openai import OpenAIChatModel  # noqa: E402
from chatclient.tools import tool  # noqa: E402


def main() -> None:
    db_url, model_url, workflow_id, side_effects = sys.argv[1:5]
    effects = Path(side_effects)

    def record(what: str) -> None:
        with effects.open("a", encoding="utf-8") as f:
            f.write(what + "\n")

    def approve(call: object) -> ApprovalDecision:
        record(f"approved {getattr(call, 'name', '?')}")  # a person was asked
        return ApprovalDecision.approve()

    @tool(description="Stamp the report as reviewed; returns the stamp.", requires_approval=True)
    def stamp(reviewer: str) -> str:
        record(f"tool stamp {reviewer}")
        return f"reviewed by {reviewer}"

    @agent_function(output_key="note")
    def save_note(outline: str) -> str:
        record(f"note {outline}")
        return "saved"

    model = OpenAIChatModel("gpt-test", api_key="sk-dbos-test-key", base_url=model_url, max_retries=0, timeout=120.0)
    client = ChatClient.create(model)
    workflow = sequence(
        agent(client, name="outline", user="Outline {{ topic }}", output_key="outline"),
        save_note,
        agent(
            client,
            name="write",
            user="Write from {{ outline }}",
            output_key="report",
            tools=[stamp],
            advisors=[ToolApprovalAdvisor(callback=approve)],
        ),
        name="report",
        output_key="final",
    )
    DBOS(config={"name": "chatclient_dbos_test", "system_database_url": db_url})
    run = durable(workflow, name="report_workflow")
    DBOS.launch()  # a run a crash left pending is recovered here, in the background
    status = DBOS.get_workflow_status(workflow_id)
    if status is None:
        with SetWorkflowID(workflow_id):
            output = run(topic="durable agents")
    else:
        output = DBOS.retrieve_workflow(workflow_id).get_result()
    print("OUTPUT " + json.dumps(output), flush=True)
    DBOS.destroy()


if __name__ == "__main__":
    main()
