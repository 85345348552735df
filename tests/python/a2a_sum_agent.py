"""An A2A agent built with the official Python SDK (`a2a-sdk` 1.3.0, its v1.0 server API with
v0.3 compatibility on the same JSON-RPC endpoint): a message with a data part {"a": .., "b": ..}
starts a task that goes working, waits DELAY_S, then completes with an artifact holding
{"sum": a + b}; a streamed message sees each of these events. `GET /count` answers how many messages it was sent and their ids, so a test can
check that a caller sent a message once.

tests/tests/t43_a2a_client.rs starts it as `python a2a_sum_agent.py PORT DELAY_S` and waits for
its card at /.well-known/agent-card.json.
"""

import asyncio
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)

PORT = int(sys.argv[1])
DELAY_S = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
RECEIVED = []


class SumExecutor(AgentExecutor):
    """Adds the message's `a` and `b`, after a while."""

    async def execute(self, context: RequestContext, event_queue) -> None:
        message = context.message
        RECEIVED.append(message.message_id)
        await event_queue.enqueue_event(
            new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED)
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        await asyncio.sleep(DELAY_S)
        data = (get_data_parts(message.parts) or [{}])[0]
        total = data.get("a", 0) + data.get("b", 0)
        await updater.add_artifact([new_data_part({"sum": total})], name="sum")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def count(_request):
    return JSONResponse({"messages": len(RECEIVED), "ids": RECEIVED})


def main():
    card = AgentCard(
        name="sum agent",
        description="adds a and b",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"http://127.0.0.1:{PORT}/rpc",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id="sum", name="Sum", description="adds a and b", tags=["math"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=SumExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card)
    routes += create_jsonrpc_routes(handler, "/rpc", enable_v0_3_compat=True)
    routes.append(Route("/count", count, methods=["GET"]))
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=PORT, log_level="warning")


if __name__ == "__main__":
    main()
