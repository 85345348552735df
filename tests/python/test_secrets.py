"""Secrets and grants on definitions with the official conductor-python 2.0.0 client, unchanged.

BATON_URL names a server started with `--auth` and `--secrets-key-file`; BATON_ADMIN_KEY the
administrator's key file; BATON_SECRET_VALUE the value to store (the caller then looks for it
in the node's files). tests/tests/t94_access.rs starts one and runs this file.

The administrator stores a secret through the client's SecretClient; a workflow's HTTP task
names it in a header and the called server receives the value, while the workflow as the API
answers it holds only the placeholder. Applications holding grants alone create the task
types and read the secrets their grants name, and nothing else.
"""

import json
import os
import time
import uuid

import pytest

from conductor.client.http.models.start_workflow_request import StartWorkflowRequest
from conductor.client.http.models.subject_ref import SubjectRef
from conductor.client.http.models.target_ref import TargetRef, TargetType
from conductor.client.http.models.task_def import TaskDef
from conductor.client.http.models.workflow_def import WorkflowDef
from conductor.client.http.models.workflow_task import WorkflowTask
from conductor.client.http.rest import ApiException
from conductor.client.orkes.models.access_type import AccessType
from conductor.client.orkes_clients import OrkesClients

import pong
from test_access import admin, application, raw, refused  # noqa: F401 (admin: a fixture)

DEADLINE_S = 60


def admin_token():
    with open(os.environ["BATON_ADMIN_KEY"]) as f:
        key = json.load(f)
    status, answer = raw("POST", "/api/token", {"keyId": key["keyId"], "keySecret": key["keySecret"]})
    assert status == 200, answer
    return answer["token"]


@pytest.fixture(scope="module")
def recorder():
    with pong.serving() as url:
        yield url


def test_an_http_task_sends_a_secret_its_workflow_never_holds(admin, recorder):
    value = os.environ["BATON_SECRET_VALUE"]
    secrets = admin.get_secret_client()
    secrets.put_secret("sec_api_token", value)
    assert secrets.secret_exists("sec_api_token") is True
    assert "sec_api_token" in secrets.list_all_secret_names()
    with pytest.raises(ApiException) as raised:
        secrets.get_secret("sec_api_token")
    assert raised.value.status == 405 and value not in str(raised.value.body)

    admin.get_metadata_client().register_workflow_def(
        WorkflowDef(
            name="sec_call",
            version=1,
            schema_version=2,
            tasks=[
                WorkflowTask(
                    name="call",
                    task_reference_name="call_ref",
                    type="HTTP",
                    input_parameters={
                        "http_request": {
                            "uri": f"{recorder}/hook",
                            "method": "GET",
                            "headers": {"Authorization": "Bearer ${workflow.secrets.sec_api_token}"},
                        }
                    },
                )
            ],
        ),
        overwrite=True,
    )
    workflows = admin.get_workflow_client()
    workflow_id = admin.get_workflow_executor().start_workflow(StartWorkflowRequest(name="sec_call", version=1))
    deadline = time.monotonic() + DEADLINE_S
    while (wf := workflows.get_workflow(workflow_id, include_tasks=True)).status == "RUNNING":
        assert time.monotonic() < deadline, f"{workflow_id} still running"
        time.sleep(0.1)
    assert wf.status == "COMPLETED", wf.reason_for_incompletion
    assert pong.Pong.authorizations[-1] == f"Bearer {value}"
    headers = wf.tasks[0].input_data["http_request"]["headers"]
    assert headers == {"Authorization": "Bearer ${workflow.secrets.sec_api_token}"}
    status, answered = raw("GET", f"/api/workflow/{workflow_id}", headers={"X-Authorization": admin_token()})
    assert status == 200 and value not in json.dumps(answered)

    secrets.delete_secret("sec_api_token")
    assert secrets.secret_exists("sec_api_token") is False
    again = admin.get_workflow_executor().start_workflow(StartWorkflowRequest(name="sec_call", version=1))
    while (wf := workflows.get_workflow(again, include_tasks=True)).status == "RUNNING":
        assert time.monotonic() < deadline, f"{again} still running"
        time.sleep(0.1)
    assert wf.status == "FAILED"
    assert "no secret named" in wf.tasks[0].reason_for_incompletion, wf.tasks[0].reason_for_incompletion


def test_grants_on_definitions_and_secrets_open_what_they_name(admin):
    authorization = admin.get_authorization_client()
    app_id, granted = application(admin, f"sec-definer-{uuid.uuid4().hex[:6]}")
    subject = SubjectRef("USER", f"app:{app_id}")
    task_types = TargetRef(TargetType.TASK_DEF, "sec_billing_*")
    authorization.grant_permissions(subject, task_types, [AccessType.CREATE, AccessType.READ])
    authorization.grant_permissions(subject, TargetRef(TargetType.SECRET_NAME, "sec_billing_*"), [AccessType.READ])
    admin.get_secret_client().put_secret("sec_billing_key", "b")
    admin.get_secret_client().put_secret("sec_payroll_key", "p")
    admin.get_metadata_client().register_task_def(TaskDef(name="sec_payroll_pay"))

    as_granted = OrkesClients(configuration=granted)
    metadata = as_granted.get_metadata_client()
    metadata.register_task_def(TaskDef(name="sec_billing_charge", retry_count=1))
    assert metadata.get_task_def("sec_billing_charge").retry_count == 1
    # CREATE is not UPDATE: the type exists now.
    assert refused(lambda: metadata.register_task_def(TaskDef(name="sec_billing_charge", retry_count=2))) == 403
    assert refused(lambda: metadata.register_task_def(TaskDef(name="sec_payroll_new"))) == 403
    assert refused(lambda: metadata.get_task_def("sec_payroll_pay")) == 403
    assert refused(lambda: metadata.unregister_task_def("sec_billing_charge")) == 403
    assert [d.name for d in metadata.get_all_task_defs()] == ["sec_billing_charge"]
    secrets = as_granted.get_secret_client()
    assert secrets.list_all_secret_names() == {"sec_billing_key"}
    assert secrets.secret_exists("sec_billing_key") is True
    assert refused(lambda: secrets.secret_exists("sec_payroll_key")) == 403
    assert refused(lambda: secrets.put_secret("sec_billing_key", "x")) == 403
