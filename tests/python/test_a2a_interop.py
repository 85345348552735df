"""The official Python A2A SDK (`a2a-sdk`, the version pinned in tests/tests/t42_a2a.rs) against a
running Baton node, unchanged.

BATON_URL names the node; tests/tests/t42_a2a.rs starts one and runs this file with
`.venv/bin/python -m pytest tests/python/test_a2a_interop.py -q` (BATON_A2A_REQUIRED=1: the SDK
must be importable). The test registers its own workflow of system tasks, marked as a skill in
its metadata, through Conductor's REST API; then the SDK's card resolver reads the agent card and
its client sends messages (streaming and not, in the protocol's v1.0 and, through the SDK's
compatibility transport, v0.3), reads and cancels tasks.
"""

import asyncio
import json
import os
import urllib.request
import uuid

import pytest

REQUIRED = os.environ.get("BATON_A2A_REQUIRED") == "1"
try:
    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_part
    from a2a.types.a2a_pb2 import (
        AgentCard,
        CancelTaskRequest,
        GetTaskRequest,
        Message,
        Role,
        SendMessageRequest,
        TaskState,
    )
    from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
except ImportError:
    if REQUIRED:
        raise
    pytest.skip("a2a-sdk is not installed", allow_module_level=True)

BASE = os.environ.get("BATON_URL", "http://127.0.0.1:8080").rstrip("/")
SKILL = "py_sum"
WORKFLOW = "a2a_py_sum"
TIMEOUT_S = 30

SUM_WORKFLOW = {
    "name": WORKFLOW,
    "version": 1,
    "schemaVersion": 2,
    "description": "adds a and b (system tasks only)",
    "metadata": {"a2a": {"skill": {"id": SKILL, "name": "Python sum", "tags": ["math"]}}},
    "tasks": [
        {
            "name": "add",
            "taskReferenceName": "add",
            "type": "JSON_JQ_TRANSFORM",
            "inputParameters": {
                "a": "${workflow.input.a}",
                "b": "${workflow.input.b}",
                "queryExpression": "{sum: (.a + .b)}",
            },
        }
    ],
    "outputParameters": {"sum": "${add.output.result.sum}"},
}


def conductor(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        BASE + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return response.read()


@pytest.fixture(scope="module", autouse=True)
def skill_workflow():
    conductor("PUT", "/api/metadata/workflow", [SUM_WORKFLOW])


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, TIMEOUT_S))


async def card():
    async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        return await A2ACardResolver(http, BASE).get_agent_card()


def message(part):
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[part])
    msg.metadata.update({"skill": SKILL})
    return msg


async def send(agent_card, part, streaming):
    """Sends a message with the SDK's client; answers every event it yields."""
    async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = ClientFactory(config).create(agent_card)
        request = SendMessageRequest(message=message(part))
        events = [event async for event in client.send_message(request)]
        task_id = events[0].task.id
        task = await client.get_task(GetTaskRequest(id=task_id))
        return events, task


def output_of(task):
    assert len(task.artifacts) == 1, task
    return get_data_parts(task.artifacts[0].parts)[0]


def test_the_card_lists_the_skill():
    agent = run(card())
    assert agent.name == "Baton"
    assert agent.capabilities.streaming
    assert SKILL in [s.id for s in agent.skills]
    interface = agent.supported_interfaces[0]
    assert interface.protocol_binding == "JSONRPC"
    assert interface.url == BASE + "/a2a"


def test_a_streamed_message_completes_its_task():
    events, task = run(send(run(card()), new_data_part({"a": 2, "b": 40}), streaming=True))
    assert events[0].HasField("task"), events
    final = events[-1]
    assert final.HasField("status_update"), events
    assert final.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert get_data_parts(artifacts[0].parts)[0] == {"sum": 42}
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert output_of(task) == {"sum": 42}


def test_a_sent_message_answers_the_completed_task():
    part = new_text_part(json.dumps({"a": 1, "b": 2}))
    events, task = run(send(run(card()), part, streaming=False))
    assert len(events) == 1 and events[0].HasField("task"), events
    answered = events[0].task
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert output_of(answered) == {"sum": 3}
    assert task.id == answered.id and task.context_id == answered.context_id
    assert output_of(task) == {"sum": 3}


def test_the_v03_transport_speaks_to_the_same_agent():
    legacy = AgentCard()
    legacy.CopyFrom(run(card()))
    legacy.supported_interfaces[0].protocol_version = "0.3.0"
    events, task = run(send(legacy, new_data_part({"a": 5, "b": 5}), streaming=False))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, events
    assert output_of(task) == {"sum": 10}


def test_errors_are_the_protocols():
    async def check():
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            client = ClientFactory(ClientConfig(httpx_client=http)).create(await card())
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
            config = ClientConfig(streaming=False, httpx_client=http)
            blocking = ClientFactory(config).create(await card())
            request = SendMessageRequest(message=message(new_data_part({"a": 1, "b": 1})))
            done = [e async for e in blocking.send_message(request)][0].task
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=done.id))

    run(check())
