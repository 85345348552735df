"""Access control with the official conductor-python 2.0.0 client, unchanged.

BATON_URL names a server started with `--auth`; BATON_ADMIN_KEY the administrator's key file it
wrote (`admin-key.json`). tests/tests/t94_access.rs starts one and runs this file.

The administrator makes applications and keys through the client's OrkesAuthorizationClient;
each client authenticates with AuthenticationSettings (POST /api/token, then X-Authorization).
A worker-only key runs its tasks through a TaskHandler and is refused everything else; an
operator's key starts the workflow; a key made inactive is refused on its next request.
"""

import json
import os
import time
import urllib.error
import urllib.request
import uuid

import pytest

from conductor.client.automator.task_handler import TaskHandler
from conductor.client.configuration.configuration import Configuration
from conductor.client.configuration.settings.authentication_settings import AuthenticationSettings
from conductor.client.http.api.task_resource_api import TaskResourceApi
from conductor.client.http.api_client import ApiClient
from conductor.client.http.models.create_or_update_application_request import (
    CreateOrUpdateApplicationRequest,
)
from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.subject_ref import SubjectRef
from conductor.client.http.models.target_ref import TargetRef, TargetType
from conductor.client.http.models.task_def import TaskDef
from conductor.client.http.models.workflow_def import WorkflowDef
from conductor.client.http.models.workflow_task import WorkflowTask
from conductor.client.http.rest import AuthorizationException
from conductor.client.orkes.models.access_type import AccessType
from conductor.client.orkes_clients import OrkesClients
from conductor.client.worker.worker_task import worker_task

DEADLINE_S = 60


@worker_task(task_definition_name="acc_double", poll_interval_millis=50)
def double(n: int) -> dict:
    return {"n": n * 2}


def base_url():
    url = os.environ.get("BATON_URL")
    assert url, "BATON_URL must name a Baton server started with --auth"
    return url.rstrip("/")


def configuration(key_id, key_secret):
    return Configuration(
        server_api_url=base_url() + "/api",
        authentication_settings=AuthenticationSettings(key_id=key_id, key_secret=key_secret),
    )


def raw(method, path, body=None, headers=None):
    """One request without the client: its status and JSON body."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base_url() + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.fixture(scope="module")
def admin():
    with open(os.environ["BATON_ADMIN_KEY"]) as f:
        key = json.load(f)
    return OrkesClients(configuration=configuration(key["keyId"], key["keySecret"]))


def application(admin, name, role=None):
    """A new application with `role` and one key: (application id, its configuration)."""
    authorization = admin.get_authorization_client()
    app = authorization.create_application(CreateOrUpdateApplicationRequest(name=name))
    app_id = app.id if hasattr(app, "id") else app["id"]
    if role:
        authorization.add_role_to_application_user(app_id, role)
    key = authorization.create_access_key(app_id)
    return app_id, configuration(key.id, key.secret)


@pytest.fixture(scope="module")
def registered(admin):
    metadata = admin.get_metadata_client()
    metadata.register_task_def(TaskDef(name="acc_double", retry_count=0, timeout_seconds=60, response_timeout_seconds=30))
    metadata.register_workflow_def(
        WorkflowDef(
            name="acc_wf",
            version=1,
            schema_version=2,
            tasks=[
                WorkflowTask(
                    name="acc_double",
                    task_reference_name="double_ref",
                    type="SIMPLE",
                    input_parameters={"n": "${workflow.input.n}"},
                )
            ],
            output_parameters={"n": "${double_ref.output.n}"},
        ),
        overwrite=True,
    )
    return True


def refused(call):
    """The status of the AuthorizationException `call` raises."""
    with pytest.raises(AuthorizationException) as raised:
        call()
    return raised.value.status


def test_without_a_token_or_with_a_wrong_secret_the_node_answers_401(admin):
    status, body = raw("GET", "/api/metadata/taskdefs")
    assert status == 401 and body["error"] == "INVALID_TOKEN", body
    status, body = raw("GET", "/api/metadata/taskdefs", headers={"X-Authorization": "not.a.token"})
    assert status == 401 and body["error"] == "INVALID_TOKEN", body
    status, _ = raw("POST", "/api/token", {"keyId": "nobody", "keySecret": "nothing"})
    assert status == 401
    status, health = raw("GET", "/health")
    assert status == 200 and health["healthy"], health


def test_a_worker_key_runs_its_tasks_and_nothing_else(admin, registered):
    # No role: a grant to execute the task types named acc_* (Orkes' way of naming an
    # application as a subject: the user app:ID).
    worker_id, worker = application(admin, f"acc-workers-{uuid.uuid4().hex[:6]}")
    authorization = admin.get_authorization_client()
    task_types = TargetRef(TargetType.TASK_DEF, "acc_*")
    authorization.grant_permissions(SubjectRef("USER", f"app:{worker_id}"), task_types, [AccessType.EXECUTE])
    holders = authorization.get_permissions(task_types)
    assert [s.id for s in holders["EXECUTE"]] == [f"app:{worker_id}"]
    _, operator = application(admin, f"acc-operator-{uuid.uuid4().hex[:6]}", "WORKFLOW_MANAGER")
    handler = TaskHandler(configuration=worker, scan_for_annotated_workers=True, monitor_processes=False)
    handler.start_processes()
    try:
        clients = OrkesClients(configuration=operator)
        workflow_id = clients.get_workflow_executor().start_workflow(
            StartWorkflowRequest(name="acc_wf", version=1, input={"n": 21})
        )
        deadline = time.monotonic() + DEADLINE_S
        while (wf := clients.get_workflow_client().get_workflow(workflow_id, include_tasks=False)).status == "RUNNING":
            assert time.monotonic() < deadline, f"{workflow_id} still running"
            time.sleep(0.1)
        assert wf.status == "COMPLETED", wf.reason_for_incompletion
        assert wf.output == {"n": 42}
    finally:
        handler.stop_processes()

    tasks = TaskResourceApi(ApiClient(configuration=worker))
    assert refused(lambda: tasks.poll("other_type", workerid="w")) == 403
    assert getattr(tasks.poll("acc_double", workerid="w"), "task_id", None) is None  # allowed; none queued
    as_worker = OrkesClients(configuration=worker)
    metadata = as_worker.get_metadata_client()
    assert refused(lambda: metadata.register_task_def(TaskDef(name="acc_nope"))) == 403
    assert refused(lambda: metadata.get_task_def("acc_double")) == 403
    assert refused(lambda: as_worker.get_workflow_client().get_workflow(workflow_id)) == 403
    api = ApiClient(configuration=worker)
    assert refused(lambda: api.call_api("/admin/cluster", "GET", response_type="object")) == 403
    assert refused(lambda: api.call_api("/applications", "GET", response_type="object")) == 403
    # The operator starts and reads workflows, and defines nothing.
    as_operator = OrkesClients(configuration=operator).get_metadata_client()
    assert refused(lambda: as_operator.register_task_def(TaskDef(name="acc_nope"))) == 403


def test_an_inactive_key_is_refused_on_its_next_request(admin, registered):
    app_id, reader = application(admin, f"acc-reader-{uuid.uuid4().hex[:6]}", "READ_ONLY")
    metadata = OrkesClients(configuration=reader).get_metadata_client()
    assert metadata.get_task_def("acc_double").name == "acc_double"
    authorization = admin.get_authorization_client()
    key_id = reader.authentication_settings.key_id
    toggled = authorization.toggle_access_key_status(app_id, key_id)
    assert toggled.status == "INACTIVE"
    assert refused(lambda: metadata.get_task_def("acc_double")) == 401
    keys = authorization.get_access_keys(app_id)
    assert [(k.id, k.status) for k in keys] == [(key_id, "INACTIVE")]
    assert "secret" not in json.dumps([{"id": k.id} for k in keys])
