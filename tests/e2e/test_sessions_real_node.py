"""A notebook session that really runs, end to end: a member starts a CPU session from the
portal's default JupyterLab image in Chromium; the real Celery worker makes its home volume
(bound by the devcluster's local-path provisioner), token Secret and Job on the devcluster's
real node; the watcher sees its server ready; the member opens JupyterLab through the portal's
proxy and runs code in a kernel over the proxied websocket, writing a file to the home volume.
The session then sits idle: the culling check (run here, its clock moved on past the team's
limits; the server's activity is what the server reports) warns the owner, which the page
shows, and then stops it. Resumed, the next run mounts the same volume and reads the file
back. A teammate gets 403 at the proxy and a member of another team 404.

The portal is served by uvicorn, as the demo serves it: the proxy is in its ASGI application.
"""

import datetime

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect

from interactive import culling
from interactive.models import InteractiveSession, SessionPolicy
from monitoring.models import Notification
from tenants.models import Membership
from tests import factories
from tests.integration import conftest as integration
from tests.integration.conftest import wait_for
from tests.integration.gpujobs import fixtures
from tests.integration.servers import demo_server

# The integration suite's fixtures: PostgreSQL, a Celery worker, the watcher, the devcluster.
postgres_database = integration.postgres_database
celery_worker_process = integration.celery_worker_process
watcher_process = fixtures.watcher_process
running_services = fixtures.running_services
k8s = integration.k8s
core = integration.core
portal_kubeconfig = fixtures.portal_kubeconfig
gpu_cluster = fixtures.gpu_cluster
make_gpu_team = fixtures.make_gpu_team

pytestmark = [pytest.mark.e2e, pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]

State = InteractiveSession.State
LIVE_TIMEOUT_MS = 180_000

# Runs in the JupyterLab page: starts a kernel through the proxy (the REST API) and runs
# ``code`` in it over the kernel's websocket (the proxy's websocket), returning what it printed.
RUN_IN_A_KERNEL = """
async ([base, code]) => {
  const made = await fetch(base + "api/kernels", {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({name: "python3"}),
  });
  if (!made.ok) throw new Error("kernel not started: " + made.status);
  const kernel = await made.json();
  const socket = new WebSocket(
    `ws://${location.host}${base}api/kernels/${kernel.id}/channels`);
  const id = crypto.randomUUID();
  return await new Promise((resolve, reject) => {
    let printed = "";
    socket.onerror = () => reject(new Error("the kernel's websocket failed"));
    socket.onopen = () => socket.send(JSON.stringify({
      header: {msg_id: id, username: "", session: crypto.randomUUID(),
               msg_type: "execute_request", version: "5.3", date: new Date().toISOString()},
      parent_header: {}, metadata: {}, buffers: [], channel: "shell",
      content: {code, silent: false, store_history: true, user_expressions: {},
                allow_stdin: false, stop_on_error: true},
    }));
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.parent_header.msg_id !== id) return;
      if (message.msg_type === "stream") printed += message.content.text;
      if (message.msg_type === "error") reject(new Error(message.content.evalue));
      if (message.msg_type === "status" && message.content.execution_state === "idle") {
        socket.close();
        resolve(printed);
      }
    };
  });
}
"""


@pytest.fixture
def portal(postgres_database, tmp_path):
    with demo_server(postgres_database, tmp_path) as base:
        yield base


@pytest.fixture
def sign_in_at(browser):
    """``sign_in_at(base, user)``: a page of a new browser context signed in to the portal at
    ``base`` as ``user``, with the session cookie a sign-in sets (the tests' fast password
    hasher is not the served portal's)."""
    contexts = []

    def sign_in(base: str, user):
        context = browser.new_context(base_url=base, locale="en-US")
        context.set_default_timeout(60_000)
        contexts.append(context)
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base}])
        page = context.new_page()
        page.goto("/")
        expect(page.get_by_test_id("username")).to_have_text(user.username)
        return page

    yield sign_in
    for context in contexts:
        context.close()


def session_running(session_id: int) -> InteractiveSession:
    wait_for(
        lambda: InteractiveSession.objects.filter(
            pk=session_id, state=State.RUNNING, server_address__gt=""
        ).exists(),
        timeout=180,
        what=f"session #{session_id} running",
    )
    return InteractiveSession.objects.get(pk=session_id)


def test_a_member_runs_a_notebook_that_is_culled_when_idle_and_keeps_its_files(
    real_node,
    storage,
    notebook_image,
    running_services,
    make_gpu_team,
    gpu_cluster,
    portal,
    sign_in_at,
    core,
):
    team = make_gpu_team(gpus=1, name="notebooks")
    SessionPolicy.objects.create(
        team=team.team, max_lifetime_hours=4, idle_minutes=4, warn_minutes=2
    )
    page = sign_in_at(portal, team.member)

    page.goto("/interactive/new/")
    page.get_by_label("Name", exact=True).fill("explore")
    page.get_by_role("button", name="Start session").click()
    expect(page.get_by_test_id("session-live")).to_be_visible()
    session = InteractiveSession.objects.get(owner=team.member)
    assert session.image == notebook_image
    expect(page.get_by_test_id("open-session")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    session = session_running(session.pk)
    assert session.node == real_node.name

    # JupyterLab through the proxy, and code run in a kernel over its websocket.
    notebook = page.context.new_page()
    notebook.goto(f"/sessions/{session.pk}/lab")
    expect(notebook).to_have_title("JupyterLab", timeout=LIVE_TIMEOUT_MS)
    printed = notebook.evaluate(
        RUN_IN_A_KERNEL,
        [
            session.path,
            "import pathlib\n"
            "pathlib.Path('/home/jovyan/results.txt').write_text('loss 0.12')\n"
            "print('written', pathlib.Path.home())",
        ],
    )
    assert printed.strip() == "written /home/jovyan"
    notebook.close()

    # A teammate and a member of another team, at the proxy.
    teammate = factories.UserFactory(username=f"tess-{team.namespace}")
    Membership.objects.create(team=team.team, user=teammate, role=Membership.Role.MEMBER)
    stranger = factories.UserFactory(username=f"sam-{team.namespace}")
    Membership.objects.create(team=factories.TeamFactory(), user=stranger, role="member")
    assert sign_in_at(portal, teammate).goto(f"/sessions/{session.pk}/lab").status == 403
    assert sign_in_at(portal, stranger).goto(f"/sessions/{session.pk}/lab").status == 404

    # Left alone: warned once the warning is due, then stopped.
    activity = culling.server_activity(session)
    assert activity is not None
    assert not activity.busy
    idle_since = activity.last_activity
    warned = culling.check_cluster(gpu_cluster, now=idle_since + datetime.timedelta(minutes=3))
    assert warned["warned"] == 1
    assert Notification.objects.filter(
        user=team.member, kind=Notification.Kind.IDLE_WARNING
    ).exists()
    page.reload()
    expect(page.get_by_test_id("session-idle-warning")).to_contain_text("will be stopped at")
    stopped = culling.check_cluster(gpu_cluster, now=idle_since + datetime.timedelta(minutes=6))
    assert stopped["stopped"] == 1
    expect(page.get_by_test_id("session-state")).to_have_text("stopped")
    expect(page.get_by_test_id("session-stopped")).to_contain_text("Stopped as idle")
    assert Notification.objects.filter(
        user=team.member, kind=Notification.Kind.IDLE_STOPPED
    ).exists()
    wait_for(
        lambda: (
            not core.list_namespaced_pod(
                team.namespace, label_selector=f"gpuportal.io/session-id={session.pk}"
            ).items
        ),
        timeout=120,
        what="the stopped run's pod gone",
    )

    # Resumed: the next run mounts the same home volume.
    page.get_by_test_id("resume-session").click()
    expect(page.get_by_test_id("open-session")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    session = session_running(session.pk)
    assert session.run == 2
    notebook = page.context.new_page()
    notebook.goto(f"/sessions/{session.pk}/lab")
    expect(notebook).to_have_title("JupyterLab", timeout=LIVE_TIMEOUT_MS)
    printed = notebook.evaluate(
        RUN_IN_A_KERNEL, [session.path, "print(open('/home/jovyan/results.txt').read())"]
    )
    assert printed.strip() == "loss 0.12"
