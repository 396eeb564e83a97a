"""`python -m devcluster {build,keycloak-build,image,up,down,status,env,mint,install-portal,
backfill,update-gomod}`.

Only `up` and `env` print to stdout, and only `export` lines, so `eval "$(python -m devcluster
up)"` works; progress and diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path

from devcluster import (
    backfill,
    builder,
    cluster,
    credentials,
    gateway_api,
    images,
    keycloak,
    portal_install,
    real_node,
    versions,
)
from devcluster.gpu_models import KNOWN_MODELS
from devcluster.settings import (
    INSTANCE_PORT_STEP,
    MAX_INSTANCE,
    Settings,
    check_instance,
    current,
)


def _node_options(args: argparse.Namespace) -> cluster.NodeOptions:
    defaults = cluster.NodeOptions.from_env(current().instance)
    return cluster.NodeOptions(
        gpu_nodes=defaults.gpu_nodes if args.gpu_nodes is None else args.gpu_nodes,
        cpu_nodes=defaults.cpu_nodes if args.cpu_nodes is None else args.cpu_nodes,
        gpu_model=args.gpu_model or defaults.gpu_model,
        gpus_per_node=defaults.gpus_per_node if args.gpus_per_node is None else args.gpus_per_node,
        second_gpu_nodes=(
            defaults.second_gpu_nodes if args.second_gpu_nodes is None else args.second_gpu_nodes
        ),
        second_gpu_model=args.second_gpu_model or defaults.second_gpu_model,
        sharing=args.sharing,
    )


def _explicit_node_options(args: argparse.Namespace) -> bool:
    return args.sharing or any(
        value is not None
        for value in (
            args.gpu_nodes,
            args.cpu_nodes,
            args.gpu_model,
            args.gpus_per_node,
            args.second_gpu_nodes,
            args.second_gpu_model,
        )
    )


def cmd_build(args: argparse.Namespace) -> int:
    if args.check:
        built = builder.cluster_built() if args.cluster else builder.nothing_to_build()
        print(f"{builder.bin_dir()}: {'built' if built else 'not built'}", file=sys.stderr)
        return 0 if built else 1
    print(builder.build(force=args.force), file=sys.stderr)
    return 0


def cmd_keycloak_build(args: argparse.Namespace) -> int:
    print(keycloak.build(force=args.force), file=sys.stderr)
    return 0


def cmd_image(args: argparse.Namespace) -> int:
    missing = images.missing_tools()
    if missing:
        print(f"image: not installed: {', '.join(missing)} (scripts/bootstrap.sh)", file=sys.stderr)
        return 1
    context = Path(args.context).resolve()
    if args.notebook:
        built = images.build_notebook(context / "deploy" / "notebook")
    else:
        built = images.build_portal(context)
    print(built, file=sys.stderr)
    if args.load:
        settings = current()
        if not real_node.running(settings):
            print(
                "image: the real node is not running (`python -m devcluster up --real-node`)",
                file=sys.stderr,
            )
            return 1
        real_node.load_image(settings, built)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    if args.no_kueue:
        os.environ["DEVCLUSTER_KUEUE"] = "0"
    if args.no_gateway_api:
        os.environ["DEVCLUSTER_GATEWAY_API"] = "0"
    settings, _ = cluster.up(
        _node_options(args),
        reconcile_nodes_when_reused=_explicit_node_options(args),
        fresh=args.fresh,
    )
    if args.real_node or args.gateway or args.storage:
        cluster.start_real_node(settings)
    if args.gateway:
        cluster.start_gateway(settings)
    if args.storage:
        cluster.start_storage(settings)
    print("\n".join(cluster.env_lines(settings)))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    stopped = cluster.down(purge=args.purge)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    settings = current()
    states = cluster.component_states(settings)
    print(f"instance:  {settings.instance}")
    print(f"state dir: {settings.state_dir}")
    print(f"binaries:  {builder.bin_dir()} ({'built' if builder.is_built() else 'not built'})")
    for tool in builder.TOOL_BUILDS:
        built = "built" if builder.tool_built(tool) else "not built"
        print(f"{tool.name + ':':<10} {builder.binary(tool.name)} ({built})")
    for name, (pid, healthy) in states.items():
        health = "healthy" if healthy else "UNHEALTHY"
        state = "not running" if pid is None else f"pid {pid}, {health}"
        print(f"  {name:<24} {state}")
    all_healthy = all(healthy for _, healthy in states.values())
    if all_healthy:
        print(f"apiserver:  {settings.apiserver_url}")
        print(f"prometheus: {settings.prometheus_url}")
        print(f"dcgm:       {settings.dcgm_url}/metrics")
        if settings.kueue:
            print(
                f"kueue:      webhooks {settings.kueue_webhook_url}, visibility API "
                f"127.0.0.1:{settings.kueue_visibility_port} (via the apiserver)"
            )
        served = gateway_api.serves_http_routes(cluster.admin_api_client(settings))
        if served:
            print(
                f"gateway api: CRDs {versions.GATEWAY_API_VERSION} (no controller: routes are "
                "stored, no traffic is served)"
            )
        else:
            print("gateway api: not installed")
        core = cluster.client.CoreV1Api(cluster.admin_api_client(settings))
        for node in core.list_node().items:
            gpus = (node.status.allocatable or {}).get("nvidia.com/gpu", "0")
            model = (node.metadata.labels or {}).get("nvidia.com/gpu.product", "")
            print(f"  node {node.metadata.name:<24} nvidia.com/gpu={gpus} {model}".rstrip())
    return 0 if all_healthy else 1


def cmd_env(args: argparse.Namespace) -> int:
    settings = current()
    if args.planned:
        # The running cluster's, or those of the cluster `up` would start now.
        if not cluster.is_healthy(settings):
            settings = Settings.from_env()
        print("\n".join(cluster.env_lines(settings)))
        return 0
    if not cluster.is_healthy(settings):
        print("devcluster is not running (start it with: python -m devcluster up)", file=sys.stderr)
        return 1
    print("\n".join(cluster.env_lines(settings)))
    return 0


def cmd_mint(args: argparse.Namespace) -> int:
    print(credentials.mint(args.user, args.group or [], output=args.output))
    return 0


def cmd_install_portal(args: argparse.Namespace) -> int:
    if args.credentials_only:
        print(portal_install.credentials_only(output=args.output))
        return 0
    print(portal_install.install(output=args.output))
    return 0


def _parse_time(value: str) -> int:
    if value.isdigit():
        return int(value)
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())


def cmd_backfill(args: argparse.Namespace) -> int:
    options = {}
    if args.end is not None:
        options["end"] = _parse_time(args.end)
    spec = backfill.BackfillSpec(
        days=args.days,
        gpus=args.gpus,
        namespaces=tuple(args.namespace or ["research"]),
        step_seconds=args.step,
        gpus_per_pod=args.gpus_per_pod,
        gpu_model=args.gpu_model,
        metrics=tuple(args.metric or ["DCGM_FI_DEV_GPU_UTIL"]),
        **options,
    )
    result = backfill.backfill(spec, restart_prometheus=not args.no_restart, writer=args.writer)
    print(
        f"backfilled {result.samples} samples from {spec.start_timestamp} to "
        f"{spec.end_timestamp} into {len(result.blocks)} block(s)",
        file=sys.stderr,
    )
    return 0


def cmd_update_gomod(args: argparse.Namespace) -> int:
    builder.update_gomods()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster",
        description="A local Kubernetes control plane with simulated GPU nodes, Prometheus and "
        "a DCGM simulator. See devcluster/README.md.",
    )
    parser.add_argument(
        "--instance",
        type=_instance,
        metavar="N",
        help="which of several clusters side by side (1-"
        f"{MAX_INSTANCE}; default 1, env DEVCLUSTER_INSTANCE): instance N listens on instance "
        f"1's ports plus {INSTANCE_PORT_STEP}x(N-1) and keeps its state in "
        "/tmp/gpuportal-devcluster-N",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="build the pinned binaries into the cache")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    build.add_argument(
        "--check",
        action="store_true",
        help="build nothing: exit 0 when everything is cached for the pins, 1 when a build "
        "has work to do",
    )
    build.add_argument(
        "--cluster",
        action="store_true",
        help="with --check: only what `up` builds (the cluster's binaries), not the tests' tools "
        "(Helm, containerd, Traefik, local-path-provisioner), which are built by `build` or on "
        "first use",
    )
    build.set_defaults(handler=cmd_build)

    kc_build = commands.add_parser(
        "keycloak-build",
        help="fetch and build the pinned Keycloak (the single sign-on tests' provider) into the "
        "cache",
    )
    kc_build.add_argument("--force", action="store_true", help="rebuild even if cached")
    kc_build.set_defaults(handler=cmd_keycloak_build)

    image = commands.add_parser(
        "image",
        help=f"build the portal's image ({images.PORTAL_IMAGE}) with buildah on a Debian base "
        "made by mmdebstrap; no Docker daemon, no registry",
    )
    image.add_argument("--context", default=".", help="the project's directory (default: .)")
    image.add_argument(
        "--notebook",
        action="store_true",
        help=f"the portal's default notebook image instead ({images.NOTEBOOK_IMAGE}, from "
        "deploy/notebook/)",
    )
    image.add_argument(
        "--load",
        action="store_true",
        help="then load it into the real node's containerd (`up --real-node`), where pods run "
        "it with imagePullPolicy Never",
    )
    image.set_defaults(handler=cmd_image)

    up = commands.add_parser("up", help="start (or reuse) the cluster; prints export lines")
    up.add_argument("--gpu-nodes", type=int, help="GPU nodes (default 4, env DEVCLUSTER_GPU_NODES)")
    up.add_argument("--cpu-nodes", type=int, help="CPU-only nodes (default 2)")
    up.add_argument(
        "--gpu-model",
        metavar="PRODUCT",
        help="nvidia.com/gpu.product of the GPU nodes (default "
        f"NVIDIA-A100-SXM4-80GB; known: {', '.join(KNOWN_MODELS)})",
    )
    up.add_argument("--gpus-per-node", type=int, help="allocatable nvidia.com/gpu (default 8)")
    up.add_argument(
        "--second-gpu-nodes",
        type=int,
        help="GPU nodes of the second model (default 2, env DEVCLUSTER_SECOND_GPU_NODES)",
    )
    up.add_argument(
        "--second-gpu-model",
        metavar="PRODUCT",
        help="nvidia.com/gpu.product of the second GPU nodes (default NVIDIA-H100-80GB-HBM3)",
    )
    up.add_argument(
        "--no-kueue",
        action="store_true",
        help="when starting, leave Kueue out (env DEVCLUSTER_KUEUE=0); a running cluster is "
        "reused as it is",
    )
    up.add_argument(
        "--no-gateway-api",
        action="store_true",
        help="when starting, leave the Gateway API's CRDs out (env DEVCLUSTER_GATEWAY_API=0): "
        "services then split traffic by replica counts; a running cluster is reused as it is",
    )
    up.add_argument(
        "--fresh",
        action="store_true",
        help="when starting, first discard earlier runs' objects, metrics and pod logs (etcd, "
        "Prometheus and pod-log data; the CA and credentials stay); a running cluster is reused "
        "as it is",
    )
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also start a node that runs real containers (kubelet, containerd, kube-proxy; "
        "devcluster/real_node.py), labelled and tainted gpuportal.io/real-node",
    )
    up.add_argument(
        "--gateway",
        action="store_true",
        help="also start the real node and the gateway serving HTTPRoutes attached to "
        "gateway-system/devcluster on 127.0.0.1:27080 (Traefik; devcluster/gateway.py)",
    )
    up.add_argument(
        "--storage",
        action="store_true",
        help="also start the real node and a storage provisioner (local-path-provisioner; "
        "devcluster/storage.py) with the default StorageClass local-path: claims get a "
        "directory on the real node",
    )
    up.add_argument(
        "--sharing",
        action="store_true",
        help="also add the GPU sharing nodes: gpu-node-mig-0 (MIG, 14 x nvidia.com/mig-1g.10gb), "
        "gpu-node-shared-0 (time-slicing, 8 x nvidia.com/gpu.shared) and gpu-node-sharable-0 "
        "(2 whole GPUs to repartition through its nvidia.com/mig.config label)",
    )
    up.set_defaults(handler=cmd_up)

    down = commands.add_parser("down", help="stop everything")
    down.add_argument(
        "--purge",
        action="store_true",
        help="also delete the state directory (etcd data, CA, Prometheus data)",
    )
    down.set_defaults(handler=cmd_down)

    commands.add_parser("status", help="show components and nodes").set_defaults(handler=cmd_status)
    env = commands.add_parser("env", help="print the export lines again")
    env.add_argument(
        "--planned",
        action="store_true",
        help="also when the cluster is not up (yet): the lines of the cluster `up` would start",
    )
    env.set_defaults(handler=cmd_env)

    mint = commands.add_parser("mint", help="mint a client-certificate kubeconfig for a user")
    mint.add_argument("user")
    mint.add_argument("--group", action="append", help="a group (O=); repeatable")
    mint.add_argument("--output", type=Path, help="where to write the kubeconfig")
    mint.set_defaults(handler=cmd_mint)

    install_portal = commands.add_parser(
        "install-portal",
        help="apply deploy/ (the portal's RBAC, team roles, confinement) and print the path of "
        "a kubeconfig for the portal's ServiceAccount",
    )
    install_portal.add_argument("--output", type=Path, help="where to write the kubeconfig")
    install_portal.add_argument(
        "--credentials-only",
        action="store_true",
        help="only the kubeconfig, also before the cluster is up or built (the CA is made if "
        "there is none); deploy/ is applied by a later install-portal",
    )
    install_portal.set_defaults(handler=cmd_install_portal)

    fill = commands.add_parser("backfill", help="load deterministic DCGM history into Prometheus")
    fill.add_argument("--days", type=float, default=7.0)
    fill.add_argument("--gpus", type=int, default=256)
    fill.add_argument(
        "--namespace",
        action="append",
        help="namespace(s) holding the GPUs; repeatable (default research)",
    )
    fill.add_argument("--step", type=int, default=60, help="seconds between samples")
    fill.add_argument("--end", help="end of the window: unix seconds or ISO 8601 (default now)")
    fill.add_argument("--gpus-per-pod", type=int, default=8)
    fill.add_argument("--gpu-model", default=backfill.DEFAULT_GPU_MODEL)
    fill.add_argument(
        "--metric",
        action="append",
        help="metric to backfill; repeatable (default DCGM_FI_DEV_GPU_UTIL)",
    )
    fill.add_argument(
        "--writer",
        choices=backfill.WRITERS,
        default="promtool",
        help="what writes the blocks: promtool from OpenMetrics text, or tsdb, the Go block "
        "writer (built on first use; for days of thousands of GPUs)",
    )
    fill.add_argument(
        "--no-restart",
        action="store_true",
        help="do not restart Prometheus; it loads the blocks within a minute",
    )
    fill.set_defaults(handler=cmd_backfill)

    gomod = commands.add_parser(
        "update-gomod", help="maintainers: regenerate the kube go.mod replaces and tidy"
    )
    gomod.set_defaults(handler=cmd_update_gomod)
    return parser


def _instance(value: str) -> int:
    try:
        number = int(value)
        check_instance(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"an instance is 1 to {MAX_INSTANCE}, not {value!r}"
        ) from None
    return number


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.instance is not None:
        # Everything below (and the processes it starts) reads the instance from here.
        os.environ["DEVCLUSTER_INSTANCE"] = str(args.instance)
    try:
        return args.handler(args)
    except (RuntimeError, TimeoutError) as error:
        print(f"devcluster: {error}", file=sys.stderr)
        return 1
