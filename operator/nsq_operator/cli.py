"""``nsq-operator``: run the operator (one replica; its state lives in the objects' status,
so a restarted operator picks up where the last one stopped)."""
from __future__ import annotations

import argparse
import os
import sys

import kopf

from nsq_protocol.version import own_program_version

from .constants import DEFAULT_IMAGE
from . import metrics
from .handlers import build_registry
from .log_format import configure_logging
from .models.network import FALLBACK_LABELS, LABELS_ENV, NAMESPACE_ENV, OperatorPod, parse_labels
from .runtime import Intervals, Runtime


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nsq-operator", description="Runs NsqCluster, NsqTopic and NsqChannel objects.")
    p.add_argument("--version", action="version", version=own_program_version("nsq-operator"))
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", action="append", default=[], help="watch this namespace (repeatable)")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (the default)")
    p.add_argument("--liveness", default="http://0.0.0.0:8080/healthz", help="liveness endpoint URL ('' for none)")
    p.add_argument("--metrics-address", default="0.0.0.0:8081",
                   help="host:port of the operator's Prometheus /metrics (rollout phases; '' for none)")
    p.add_argument("--status-interval", type=float, default=Intervals.cluster_status,
                   help="seconds between cluster status refreshes")
    p.add_argument("--drift-interval", type=float, default=Intervals.topology,
                   help="seconds between topic/channel drift checks")
    p.add_argument("--rollout-interval", type=float, default=Intervals.rollout,
                   help="seconds between two steps of a rolling upgrade or scale-down")
    p.add_argument("--ready-timeout", type=float, default=Intervals.ready_timeout,
                   help="seconds a replaced pod may take to be Ready before the roll stops Degraded")
    p.add_argument("--watch-timeout", type=_positive_seconds, default=Intervals.watch,
                   help="seconds after which the apiserver ends each watch and the operator opens it again; "
                        "a watch that brings nothing, not even a bookmark, for a minute longer is taken for dead")
    p.add_argument("--default-image", default=DEFAULT_IMAGE,
                   help="the image of an NsqCluster whose spec names none (the chart passes the operator's own)")
    p.add_argument("--operator-namespace", default=os.environ.get(NAMESPACE_ENV, ""),
                   help=f"the namespace the operator runs in (default: ${NAMESPACE_ENV}, which the chart sets from "
                        f"the downward API); each NsqCluster's NetworkPolicy admits the operator from it")
    p.add_argument("--operator-labels", default=os.environ.get(LABELS_ENV, ""), type=_labels,
                   help=f"key=value,... labels the operator's pod carries (default: ${LABELS_ENV}, which the "
                        f"chart sets to its pod's selector labels); each NetworkPolicy admits a pod with them")
    p.add_argument("--verbose", "-v", action="store_true")
    return p


def _labels(text: str) -> dict[str, str]:
    try:
        return parse_labels(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_seconds(text: str) -> int:
    try:
        seconds = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if seconds < 1:
        raise argparse.ArgumentTypeError(f"{seconds} is not a positive number of seconds")
    return seconds


def operator_pod(args: argparse.Namespace) -> OperatorPod | None:
    """Where the operator runs, when it is told (in a pod); None outside a cluster."""
    if not args.operator_namespace:
        return None
    labels = args.operator_labels if isinstance(args.operator_labels, dict) else _labels(args.operator_labels)
    return OperatorPod(args.operator_namespace, labels or dict(FALLBACK_LABELS))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging(args.verbose)
    intervals = Intervals(cluster_status=args.status_interval, topology=args.drift_interval,
                          rollout=args.rollout_interval, ready_timeout=args.ready_timeout,
                          watch=args.watch_timeout)
    runtime = Runtime(intervals=intervals, default_image=args.default_image, operator_pod=operator_pod(args))
    if args.metrics_address:
        metrics.serve(args.metrics_address, metrics.RolloutCollector(runtime))
    kopf.run(registry=build_registry(intervals), memo=kopf.Memo(runtime=runtime),
             standalone=True, clusterwide=not args.namespace, namespaces=args.namespace,
             liveness_endpoint=args.liveness or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
