"""The official conductor-python 2.0.0 client against a running Baton server, unchanged.

BATON_URL (e.g. http://127.0.0.1:8080) names the server; tests/tests/t70_python_client.rs starts one
and runs this file with `.venv/bin/python -m pytest tests/python -q`.

Definitions go in through OrkesMetadataClient, workflows start through WorkflowExecutor, read back
through WorkflowClient, and the tasks are done by @worker_task functions run by a TaskHandler: the
same path a Conductor user's application takes. Bulk operations and searches go through the client's
own resource classes (WorkflowBulkResourceApi, TaskResourceApi, ApiClient with its models). A workflow
built with the client's own workflow classes (ConductorWorkflow and its tasks) runs unchanged.
"""

import os
import time
import uuid

import pytest

import pong

from conductor.client.automator.task_handler import TaskHandler
from conductor.client.http.api.task_resource_api import TaskResourceApi
from conductor.client.http.api.workflow_bulk_resource_api import WorkflowBulkResourceApi
from conductor.client.http.api_client import ApiClient
from conductor.client.configuration.configuration import Configuration
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.task_def import TaskDef
from conductor.client.http.models.task_result import TaskResult
from conductor.client.http.models.workflow_def import WorkflowDef
from conductor.client.http.models.workflow_task import WorkflowTask
from conductor.client.orkes_clients import OrkesClients
from conductor.client.worker.worker_task import worker_task
from conductor.client.workflow.conductor_workflow import ConductorWorkflow
from conductor.client.workflow.task.do_while_task import DoWhileTask
from conductor.client.workflow.task.dynamic_fork_task import DynamicForkTask
from conductor.client.workflow.task.fork_task import ForkTask
from conductor.client.workflow.task.http_task import HttpTask
from conductor.client.workflow.task.human_task import HumanTask
from conductor.client.workflow.task.inline import InlineTask
from conductor.client.workflow.task.join_task import JoinTask
from conductor.client.workflow.task.json_jq_task import JsonJQTask
from conductor.client.workflow.task.set_variable_task import SetVariableTask
from conductor.client.workflow.task.simple_task import SimpleTask
from conductor.client.workflow.task.sub_workflow_task import SubWorkflowTask
from conductor.client.workflow.task.switch_task import SwitchTask
from conductor.client.workflow.task.terminate_task import TerminateTask, WorkflowStatus
from conductor.client.workflow.task.wait_task import WaitForDurationTask

TERMINAL = {"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"}
DEADLINE_S = 60


@worker_task(task_definition_name="py_greet", poll_interval_millis=50)
def greet(name: str) -> dict:
    return {"greeting": f"Hello {name}"}


@worker_task(task_definition_name="py_shout", poll_interval_millis=50)
def shout(text: str) -> dict:
    return {"result": text.upper(), "length": len(text)}


@worker_task(task_definition_name="py_fail", poll_interval_millis=50)
def always_fails(reason: str) -> dict:
    raise RuntimeError(reason)


@pytest.fixture(scope="module")
def configuration():
    url = os.environ.get("BATON_URL")
    assert url, "BATON_URL must name a running Baton server (tests/tests/t70_python_client.rs sets it)"
    return Configuration(server_api_url=url.rstrip("/") + "/api")


@pytest.fixture(scope="module")
def clients(configuration):
    return OrkesClients(configuration=configuration)


@pytest.fixture(scope="module")
def registered(clients):
    metadata = clients.get_metadata_client()
    for name, retries in (("py_greet", 0), ("py_shout", 0), ("py_fail", 1)):
        metadata.register_task_def(
            TaskDef(
                name=name,
                description=name,
                retry_count=retries,
                retry_logic="FIXED",
                retry_delay_seconds=0,
                timeout_seconds=60,
                response_timeout_seconds=30,
                timeout_policy="TIME_OUT_WF",
                owner_email="test@harness.com",
            )
        )
    assert metadata.get_task_def("py_greet").name == "py_greet"

    greet_wf = WorkflowDef(
        name="py_greet_wf",
        version=1,
        description="greet then shout",
        schema_version=2,
        owner_email="test@harness.com",
        input_parameters=["name"],
        tasks=[
            WorkflowTask(
                name="py_greet",
                task_reference_name="greet_ref",
                type="SIMPLE",
                input_parameters={"name": "${workflow.input.name}"},
            ),
            WorkflowTask(
                name="py_shout",
                task_reference_name="shout_ref",
                type="SIMPLE",
                input_parameters={"text": "${greet_ref.output.greeting}"},
            ),
        ],
        output_parameters={
            "result": "${shout_ref.output.result}",
            "length": "${shout_ref.output.length}",
        },
    )
    fail_wf = WorkflowDef(
        name="py_fail_wf",
        version=1,
        description="a task that always fails",
        schema_version=2,
        owner_email="test@harness.com",
        tasks=[
            WorkflowTask(
                name="py_fail",
                task_reference_name="fail_ref",
                type="SIMPLE",
                input_parameters={"reason": "${workflow.input.reason}"},
            )
        ],
    )
    metadata.register_workflow_def(greet_wf, overwrite=True)
    metadata.register_workflow_def(fail_wf, overwrite=True)
    stored = metadata.get_workflow_def("py_greet_wf", version=1)
    assert [t.task_reference_name for t in stored.tasks] == ["greet_ref", "shout_ref"]
    return True


@pytest.fixture(scope="module")
def workers(configuration, registered):
    handler = TaskHandler(configuration=configuration, scan_for_annotated_workers=True, monitor_processes=False)
    handler.start_processes()
    try:
        yield handler
    finally:
        handler.stop_processes()


def wait_terminal(workflow_client, workflow_id):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        wf = workflow_client.get_workflow(workflow_id, include_tasks=True)
        if wf.status in TERMINAL:
            return wf
        assert time.monotonic() < deadline, f"workflow {workflow_id} still {wf.status} after {DEADLINE_S}s"
        time.sleep(0.1)


def test_workers_complete_a_workflow_started_by_the_client(clients, workers):
    executor = clients.get_workflow_executor()
    workflow_client = clients.get_workflow_client()
    name = f"baton-{uuid.uuid4().hex[:8]}"
    correlation = f"py-{uuid.uuid4().hex}"
    workflow_id = executor.start_workflow(
        StartWorkflowRequest(name="py_greet_wf", version=1, correlation_id=correlation, input={"name": name})
    )
    assert isinstance(workflow_id, str) and workflow_id

    wf = wait_terminal(workflow_client, workflow_id)
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    expected = f"HELLO {name.upper()}"
    assert wf.output["result"] == expected
    assert wf.output["length"] == len(f"Hello {name}")
    assert wf.correlation_id == correlation
    refs = [t.reference_task_name for t in wf.tasks]
    assert refs == ["greet_ref", "shout_ref"]
    assert all(t.status == "COMPLETED" for t in wf.tasks)
    assert wf.tasks[0].output_data == {"greeting": f"Hello {name}"}
    assert wf.tasks[1].input_data["text"] == f"Hello {name}"

    # The same workflow read through the executor.
    again = executor.get_workflow(workflow_id, include_tasks=False)
    assert again.status == "COMPLETED"
    assert again.output["result"] == expected


def test_a_failing_worker_fails_the_workflow_after_its_retry(clients, workers):
    executor = clients.get_workflow_executor()
    workflow_client = clients.get_workflow_client()
    reason = f"worker says no {uuid.uuid4().hex[:6]}"
    workflow_id = executor.start_workflow(
        StartWorkflowRequest(name="py_fail_wf", version=1, input={"reason": reason})
    )
    wf = wait_terminal(workflow_client, workflow_id)
    assert wf.status == "FAILED"
    attempts = [t for t in wf.tasks if t.reference_task_name == "fail_ref"]
    # retry_count 1: the first attempt and one retry, both FAILED with the worker's exception message.
    assert [t.status for t in attempts] == ["FAILED", "FAILED"]
    assert all(reason in (t.reason_for_incompletion or "") for t in attempts)
    assert attempts[1].retried_task_id == attempts[0].task_id


def test_execute_answers_once_the_workflow_finished(clients, workers):
    """WorkflowExecutor.execute_workflow: POST /api/workflow/execute/{name}/{version} waits for the
    workers to finish the workflow and answers the finished run."""
    executor = clients.get_workflow_executor()
    name = f"exec-{uuid.uuid4().hex[:8]}"
    request_id = str(uuid.uuid4())
    run = executor.execute_workflow(
        StartWorkflowRequest(name="py_greet_wf", version=1, input={"name": name}),
        wait_until_task_ref=None,
        wait_for_seconds=int(DEADLINE_S),
        request_id=request_id,
    )
    assert run.status == "COMPLETED", run
    assert run.workflow_id
    assert run.request_id == request_id
    assert run.output["result"] == f"HELLO {name.upper()}"
    assert [t.reference_task_name for t in run.tasks] == ["greet_ref", "shout_ref"]


def wait_for(what, check):
    """Polls check() until it answers something truthy; fails after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"no {what} after {DEADLINE_S}s"
        time.sleep(0.1)


def test_bulk_operations_and_searches(clients, configuration, registered):
    """WorkflowBulkResourceApi pauses, resumes and terminates a list of workflows (a bad id is
    reported, not fatal); /workflow/search-v2 and /tasks/search(-v2) find them."""
    metadata = clients.get_metadata_client()
    metadata.register_task_def(TaskDef(name="py_idle", retry_count=0, timeout_seconds=60,
                                       response_timeout_seconds=30, owner_email="test@harness.com"))
    metadata.register_workflow_def(WorkflowDef(
        name="py_idle_wf", version=1, schema_version=2, owner_email="test@harness.com",
        tasks=[WorkflowTask(name="py_idle", task_reference_name="idle_ref", type="SIMPLE")],
    ), overwrite=True)
    executor = clients.get_workflow_executor()
    workflow_client = clients.get_workflow_client()
    correlation = f"bulk-{uuid.uuid4().hex}"
    ids = [executor.start_workflow(StartWorkflowRequest(name="py_idle_wf", version=1, correlation_id=correlation))
           for _ in range(2)]

    api_client = ApiClient(configuration)
    bulk = WorkflowBulkResourceApi(api_client)
    paused = bulk.pause_workflow(ids + ["not-a-workflow-id"])
    assert paused.bulk_successful_results == ids
    assert list(paused.bulk_error_results) == ["not-a-workflow-id"]
    assert all(workflow_client.get_workflow(i, include_tasks=False).status == "PAUSED" for i in ids)
    resumed = bulk.resume_workflow(ids)
    assert resumed.bulk_successful_results == ids and not resumed.bulk_error_results
    ended = bulk.terminate(ids, reason="bulk stop")
    assert ended.bulk_successful_results == ids
    for i in ids:
        wf = workflow_client.get_workflow(i, include_tasks=False)
        assert (wf.status, wf.reason_for_incompletion) == ("TERMINATED", "bulk stop")

    query = f"workflowType = 'py_idle_wf' AND correlationId = '{correlation}'"

    def search_v2():
        found = api_client.call_api("/workflow/search-v2", "GET", query_params=[("query", query)],
                                    response_type="SearchResultWorkflow", _return_http_data_only=True)
        return found if found.total_hits == 2 else None

    page = wait_for("two workflows in search-v2", search_v2)
    assert sorted(w.workflow_id for w in page.results) == sorted(ids)
    assert all(w.status == "TERMINATED" and w.workflow_name == "py_idle_wf" for w in page.results)

    tasks = TaskResourceApi(api_client)
    full = tasks.search_v21(query=f"workflowId = '{ids[0]}'")
    assert full.total_hits == 1
    assert (full.results[0].task_def_name, full.results[0].status) == ("py_idle", "CANCELED")
    rows = tasks.search1(query=f"taskType IN (py_idle) AND correlationId = '{correlation}'", free_text="*")
    assert rows.total_hits == 2
    assert sorted(r.workflow_id for r in rows.results) == sorted(ids)
    assert all(r.task_type == "py_idle" and r.status == "CANCELED" for r in rows.results)


def simple(task_def_name, reference, inputs):
    task = SimpleTask(task_def_name, reference)
    task.input_parameters.update(inputs)
    return task


@pytest.fixture(scope="module")
def pong_url():
    with pong.serving() as url:
        yield url


def builder_workflow(executor, pong_url):
    """Every kind of task the client's builder makes, in one workflow: the values flow from an
    INLINE script through jq, a value-param SWITCH, a fork beside a WAIT, a loop, a sub-workflow, a
    dynamic fork whose branches a script lists, a HUMAN task someone completes, and an HTTP call."""
    wf = ConductorWorkflow(executor=executor, name="py_builder_wf", version=1, description="the builder")
    wf.timeout_seconds(120)
    count = SetVariableTask("b_set")
    count.input_parameters.update({"seen": "${workflow.input.n}"})
    double = InlineTask("b_double", "(function () { return $.n * 2; })()", bindings={"n": "${workflow.input.n}"})
    shape = JsonJQTask("b_jq", "{doubled: .d, text: (.d | tostring)}")
    shape.input_parameters.update({"d": "${b_double.output.result}"})
    route = SwitchTask("b_switch", "${b_jq.output.result.text}")
    route.switch_case("42", [simple("py_greet", "b_greet", {"name": "${workflow.input.who}"})])
    route.default_case([TerminateTask("b_stop", WorkflowStatus.FAILED, "not 42")])
    fork = ForkTask("b_fork", [
        [simple("py_shout", "b_shout", {"text": "${b_greet.output.greeting}"})],
        [WaitForDurationTask("b_wait", 1)],
    ])
    loop = DoWhileTask("b_loop", "$.b_loop['iteration'] < 2", [simple("py_greet", "b_loop_greet", {"name": "loop"})])
    child = SubWorkflowTask("b_sub", "py_greet_wf", 1)
    child.input_parameters.update({"name": "${workflow.input.who}"})
    listing = InlineTask("b_list", (
        "(function () { return {tasks: [{name: 'py_shout', taskReferenceName: 'b_dyn_a', type: 'SIMPLE'},"
        " {name: 'py_shout', taskReferenceName: 'b_dyn_b', type: 'SIMPLE'}],"
        " inputs: {b_dyn_a: {text: 'a'}, b_dyn_b: {text: 'b'}}}; })()"))
    dynamic = DynamicForkTask("b_dyn", join_task=JoinTask("b_dyn_join"))
    dynamic.input_parameters.update({
        "dynamicTasks": "${b_list.output.result.tasks}",
        "dynamicTasksInputs": "${b_list.output.result.inputs}",
    })
    human = HumanTask("b_human", display_name="approve")
    call = HttpTask("b_http", {"uri": f"{pong_url}/ping", "method": "GET"})
    wf >> count >> double >> shape >> route >> fork >> loop >> child >> listing >> dynamic >> human >> call
    wf.output_parameters({
        "doubled": "${b_jq.output.result.doubled}",
        "shout": "${b_shout.output.result}",
        "child": "${b_sub.output.result}",
        # The client sends a by-reference update as {"result": output}.
        "approved": "${b_human.output.result.approved}",
        "pong": "${b_http.output.response.body.pong}",
    })
    return wf


def test_a_workflow_built_with_the_clients_classes_runs_unchanged(clients, workers, pong_url):
    executor = clients.get_workflow_executor()
    workflow_client = clients.get_workflow_client()
    wf = builder_workflow(executor, pong_url)
    wf.register(overwrite=True)
    who = f"builder-{uuid.uuid4().hex[:6]}"
    workflow_id = wf.start_workflow_with_input(workflow_input={"n": 21, "who": who})

    deadline = time.monotonic() + DEADLINE_S
    while True:
        run = workflow_client.get_workflow(workflow_id, include_tasks=True)
        human = [t for t in run.tasks if t.reference_task_name == "b_human"]
        if human and human[0].status == "IN_PROGRESS":
            break
        assert run.status == "RUNNING", f"{run.status}: {run.reason_for_incompletion}"
        assert time.monotonic() < deadline, f"the HUMAN task was not reached: {[t.reference_task_name for t in run.tasks]}"
        time.sleep(0.1)
    clients.get_task_client().update_task_by_ref_name(workflow_id, "b_human", "COMPLETED", {"approved": True})

    run = wait_terminal(workflow_client, workflow_id)
    assert run.status == "COMPLETED", run.reason_for_incompletion
    assert run.output == {
        "doubled": 42,
        "shout": f"HELLO {who.upper()}",
        "child": f"HELLO {who.upper()}",
        "approved": True,
        "pong": "/ping",
    }
    refs = [t.reference_task_name for t in run.tasks]
    for expected in ("b_loop_greet__1", "b_loop_greet__2", "b_dyn_a", "b_dyn_b", "b_wait", "join_b_fork"):
        assert expected in refs, f"{expected} not in {refs}"
    assert "b_stop" not in refs
    assert run.variables["seen"] == 21


def work_py_kid(task_client, status):
    """Polls the one py_kid task (no worker runs it) and reports `status`; answers its workflow."""
    task = wait_for("a py_kid task", lambda: task_client.poll_task("py_kid", worker_id="py-test"))
    result = TaskResult(
        workflow_instance_id=task.workflow_instance_id,
        task_id=task.task_id,
        status=status,
        output_data={"kid": status},
        reason_for_incompletion=None if status == "COMPLETED" else "kid said no",
    )
    task_client.update_task(result)
    return task.workflow_instance_id


def test_retry_with_resume_subworkflow_tasks_retries_the_same_child(clients, registered):
    """WorkflowClient.retry_workflow(id, resume_subworkflow_tasks=True): the failed child is
    retried in place and the parent completes with it; without the flag, a new child."""
    metadata = clients.get_metadata_client()
    metadata.register_task_def(
        TaskDef(name="py_kid", retry_count=0, response_timeout_seconds=30, owner_email="test@harness.com")
    )
    for name, tasks in (
        ("py_kid_wf", [WorkflowTask(name="py_kid", task_reference_name="kid_ref", type="SIMPLE")]),
        ("py_parent_wf", [
            WorkflowTask(
                name="py_kid_wf",
                task_reference_name="sub_ref",
                type="SUB_WORKFLOW",
                sub_workflow_param={"name": "py_kid_wf", "version": 1},
            )
        ]),
    ):
        metadata.register_workflow_def(
            WorkflowDef(name=name, version=1, schema_version=2, owner_email="test@harness.com", tasks=tasks),
            overwrite=True,
        )
    executor = clients.get_workflow_executor()
    workflow_client = clients.get_workflow_client()
    task_client = clients.get_task_client()
    for resume in (True, False):
        parent = executor.start_workflow(StartWorkflowRequest(name="py_parent_wf", version=1, input={}))
        child = work_py_kid(task_client, "FAILED")
        assert wait_terminal(workflow_client, parent).status == "FAILED"
        workflow_client.retry_workflow(parent, resume_subworkflow_tasks=resume)
        second = work_py_kid(task_client, "COMPLETED")
        wf = wait_terminal(workflow_client, parent)
        assert wf.status == "COMPLETED", wf.reason_for_incompletion
        subs = [t for t in wf.tasks if t.reference_task_name == "sub_ref"]
        if resume:
            assert second == child
            assert [t.sub_workflow_id for t in subs] == [child]
        else:
            assert second != child
            assert [t.sub_workflow_id for t in subs] == [child, second]


def test_schema_client_and_enforced_schemas(clients):
    from conductor.client.http.models.schema_def import SchemaDef, SchemaType
    from conductor.client.http.rest import ApiException

    schemas = clients.get_schema_client()
    order = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
    schemas.register_schema(SchemaDef(name="py_order", version=1, type=SchemaType.JSON, data=order))
    got = schemas.get_schema("py_order", 1)
    assert (got.name, got.version, got.data) == ("py_order", 1, order)
    assert "py_order" in [s.name for s in schemas.get_all_schemas()]

    metadata = clients.get_metadata_client()
    wf = WorkflowDef(
        name="py_schema_wf",
        version=1,
        schema_version=2,
        owner_email="test@harness.com",
        input_schema=SchemaDef(name="py_order", version=1, type=SchemaType.JSON),
        enforce_schema=True,
        # No worker polls this type, so the workflow is still running when it is terminated.
        tasks=[WorkflowTask(name="py_schema_unpolled", task_reference_name="g", type="SIMPLE")],
    )
    metadata.register_workflow_def(wf, overwrite=True)
    back = metadata.get_workflow_def("py_schema_wf", version=1)
    assert back.enforce_schema is True
    assert back.input_schema.name == "py_order"

    workflow_client = clients.get_workflow_client()
    with pytest.raises(ApiException) as refused:
        workflow_client.start_workflow(StartWorkflowRequest(name="py_schema_wf", version=1, input={"id": "x"}))
    assert refused.value.status == 400
    assert "py_order" in str(refused.value.body)
    workflow_id = workflow_client.start_workflow(StartWorkflowRequest(name="py_schema_wf", version=1, input={"id": 5}))
    workflow_client.terminate_workflow(workflow_id, reason="done")

    metadata.unregister_workflow_def("py_schema_wf", 1)
    schemas.delete_schema("py_order", 1)
    with pytest.raises(ApiException) as gone:
        schemas.get_schema("py_order", 1)
    assert gone.value.status == 404
