"""The Restate services the benchmark calls (Python SDK, served by hypercorn).

task.run   -> {"ok": true}                       (the one step)
flow.w1    -> calls task.run once, returns its result
flow.w2    -> calls task.run 3 times without awaiting (fork), then awaits all (join)
"""

import restate

task = restate.Service("task")


@task.handler()
async def run(ctx: restate.Context, i: int) -> dict:
    return {"ok": True}


flow = restate.Service("flow")


@flow.handler()
async def w1(ctx: restate.Context, i: int) -> dict:
    return await ctx.service_call(run, i)


@flow.handler()
async def w2(ctx: restate.Context, i: int) -> list:
    calls = [ctx.service_call(run, i * 3 + b) for b in range(3)]  # fork: 3 in flight
    await restate.gather(*calls)  # join
    return [await c for c in calls]


app = restate.app([task, flow])
