#!/usr/bin/env python3
"""Writes deploy/grafana/argen-dashboard.json (Grafana 10+ dashboard model).

The JSON is committed; deploy/check.sh regenerates it and fails when the two
differ, then checks that every query names only metrics argen_server exports.
Edit this file, not the JSON:  python3 deploy/grafana/make_dashboard.py
"""
import json
import os
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
# Every query is filtered by the two dashboard variables.
SEL = 'namespace=~"$namespace", pod=~"$pod"'
RATE = "$__rate_interval"

_next_id = [0]


def _id():
    _next_id[0] += 1
    return _next_id[0]


def target(expr, legend, ref):
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}


def timeseries(title, description, grid, targets, unit, stack=False, min0=True):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
              "spanNulls": False}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    defaults = {"unit": unit, "custom": custom}
    if min0:
        defaults["min"] = 0
    return {
        "id": _id(), "type": "timeseries", "title": title, "description": description,
        "datasource": DS, "gridPos": grid,
        "targets": [target(e, l, chr(ord("A") + i)) for i, (e, l) in enumerate(targets)],
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom",
                               "calcs": ["mean", "max", "lastNotNull"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }


def stat(title, description, grid, expr, unit, thresholds=None):
    steps = thresholds or [{"color": "green", "value": None}]
    return {
        "id": _id(), "type": "stat", "title": title, "description": description,
        "datasource": DS, "gridPos": grid,
        "targets": [{"datasource": DS, "expr": expr, "refId": "A", "instant": True}],
        "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
                        "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "value", "graphMode": "area", "textMode": "auto"},
    }


def row(title, y):
    return {"id": _id(), "type": "row", "title": title, "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []}


def quantiles(metric, qs, by=""):
    out = []
    for q in qs:
        grouping = f"sum by (le{', ' + by if by else ''})"
        expr = f"histogram_quantile({q}, {grouping} (rate({metric}_bucket{{{SEL}}}[{RATE}])))"
        legend = f"p{int(q * 100)}" + (" {{" + by + "}}" if by else "")
        out.append((expr, legend))
    return out


def build():
    panels = []
    y = 0
    panels.append(row("Overview", y)); y += 1
    panels += [
        stat("Serving replicas", "Pods reporting argen_draining == 0 (not draining).",
             {"h": 4, "w": 4, "x": 0, "y": y},
             f"count(argen_draining{{{SEL}}} == 0) or vector(0)", "short",
             [{"color": "red", "value": None}, {"color": "green", "value": 1}]),
        stat("Images / s", "Images sent to clients, all selected pods.",
             {"h": 4, "w": 5, "x": 4, "y": y},
             f"sum(rate(argen_images_total{{{SEL}}}[{RATE}]))", "short"),
        stat("Image tokens / s", "Image tokens sampled, all selected pods.",
             {"h": 4, "w": 5, "x": 9, "y": y},
             f"sum(rate(argen_tokens_total{{{SEL}}}[{RATE}]))", "short"),
        stat("p99 image latency", "Acceptance to image sent, 99th percentile.",
             {"h": 4, "w": 5, "x": 14, "y": y},
             f"histogram_quantile(0.99, sum by (le) (rate(argen_image_latency_seconds_bucket{{{SEL}}}[{RATE}])))",
             "s", [{"color": "green", "value": None}, {"color": "orange", "value": 60},
                   {"color": "red", "value": 120}]),
        stat("Queued requests", "Requests waiting for admission, all selected pods.",
             {"h": 4, "w": 5, "x": 19, "y": y},
             f"sum(argen_queue_depth{{{SEL}}})", "short",
             [{"color": "green", "value": None}, {"color": "orange", "value": 8},
              {"color": "red", "value": 32}]),
    ]
    y += 4

    panels.append(row("Throughput", y)); y += 1
    panels += [
        timeseries("Images / s by pod", "rate(argen_images_total): images sent.",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   [(f"sum by (pod) (rate(argen_images_total{{{SEL}}}[{RATE}]))", "{{pod}}")],
                   "short", stack=True),
        timeseries("Image tokens / s by pod", "rate(argen_tokens_total): decode throughput.",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   [(f"sum by (pod) (rate(argen_tokens_total{{{SEL}}}[{RATE}]))", "{{pod}}")],
                   "short", stack=True),
    ]
    y += 8

    panels.append(row("Latency", y)); y += 1
    panels += [
        timeseries("Image latency percentiles",
                   "Acceptance to each image sent (argen_image_latency_seconds).",
                   {"h": 8, "w": 8, "x": 0, "y": y},
                   quantiles("argen_image_latency_seconds", [0.5, 0.9, 0.99]), "s"),
        timeseries("Request latency percentiles",
                   "Acceptance to the end of successful requests (argen_request_latency_seconds).",
                   {"h": 8, "w": 8, "x": 8, "y": y},
                   quantiles("argen_request_latency_seconds", [0.5, 0.9, 0.99]), "s"),
        timeseries("Queue wait percentiles",
                   "Acceptance to joining the running batch (argen_queue_wait_seconds).",
                   {"h": 8, "w": 8, "x": 16, "y": y},
                   quantiles("argen_queue_wait_seconds", [0.5, 0.9, 0.99]), "s"),
    ]
    y += 8
    panels += [
        timeseries("Time to first image percentiles",
                   "Acceptance to a request's first image (argen_time_to_first_image_seconds): "
                   "what a user waits before seeing anything.",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   quantiles("argen_time_to_first_image_seconds", [0.5, 0.9, 0.99]), "s"),
        timeseries("p99 image latency by policy",
                   "Acceptance to each image sent, 99th percentile per sparsity policy.",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   quantiles("argen_image_latency_seconds", [0.99], by="policy"), "s"),
    ]
    y += 8
    panels += [
        timeseries("Engine step time percentiles",
                   "One engine step: prefill of joiners + one token for every running image "
                   "(argen_decode_step_seconds).",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   quantiles("argen_decode_step_seconds", [0.5, 0.99]), "s"),
        timeseries("Engine step time p50 by pod", "Per pod: a slow GPU or a noisy neighbour shows here.",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   quantiles("argen_decode_step_seconds", [0.5], by="pod"), "s"),
    ]
    y += 8

    panels.append(row("Batch and KV cache", y)); y += 1
    panels += [
        timeseries("Running batch rows by pod",
                   "Rows admitted to the running batch (2 per image: guidance pairs). "
                   "The HPA targets its per-pod average.",
                   {"h": 8, "w": 8, "x": 0, "y": y},
                   [(f"sum by (pod) (argen_running_batch_rows{{{SEL}}})", "{{pod}}")], "short"),
        timeseries("Mean decode batch rows",
                   "Average rows in each engine step's decode batch "
                   "(argen_decode_step_rows sum / count).",
                   {"h": 8, "w": 8, "x": 8, "y": y},
                   [(f"sum by (pod) (rate(argen_decode_step_rows_sum{{{SEL}}}[{RATE}])) / "
                     f"sum by (pod) (rate(argen_decode_step_rows_count{{{SEL}}}[{RATE}]))", "{{pod}}")],
                   "short"),
        timeseries("KV budget use by pod",
                   "Reserved (admission accounting, exact needs of admitted requests: "
                   "argen_kv_cache_usage_ratio) and held KV bytes over kv_budget_bytes.",
                   {"h": 8, "w": 8, "x": 16, "y": y},
                   [(f"max by (pod) (argen_kv_cache_usage_ratio{{{SEL}}})", "reserved {{pod}}"),
                    (f"sum by (pod) (argen_kv_cache_used_bytes{{{SEL}}}) / "
                     f"sum by (pod) (argen_kv_cache_budget_bytes{{{SEL}}})", "held {{pod}}")],
                   "percentunit"),
    ]
    y += 8
    panels += [
        timeseries("KV bytes", "Held, reserved and budget, all selected pods.",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   [(f"sum(argen_kv_cache_used_bytes{{{SEL}}})", "held"),
                    (f"sum(argen_kv_cache_reserved_bytes{{{SEL}}})", "reserved"),
                    (f"sum(argen_kv_cache_budget_bytes{{{SEL}}})", "budget")], "bytes"),
        timeseries("Queue depth by pod", "Requests waiting for admission. The HPA targets its "
                   "per-pod average; a queue that grows while KV use is at the budget means "
                   "the replica is KV-bound.",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   [(f"sum by (pod) (argen_queue_depth{{{SEL}}})", "{{pod}}")], "short", stack=True),
    ]
    y += 8
    panels += [
        timeseries("Running requests by pod",
                   "Requests decoding in the running batch (argen_running_requests); rows are "
                   "2 per image of these.",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   [(f"sum by (pod) (argen_running_requests{{{SEL}}})", "{{pod}}")], "short", stack=True),
        timeseries("Process memory and CPU by pod",
                   "Resident memory (process_resident_memory_bytes) and CPU cores in use "
                   "(rate of process_cpu_seconds_total, right axis) of each server process.",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   [(f"sum by (pod) (process_resident_memory_bytes{{{SEL}}})", "RSS {{pod}}"),
                    (f"sum by (pod) (rate(process_cpu_seconds_total{{{SEL}}}[{RATE}]))", "CPU {{pod}}")],
                   "bytes"),
    ]
    y += 8

    panels.append(row("Requests by policy and status", y)); y += 1
    panels += [
        timeseries("Requests / s by sparsity policy",
                   "Finished requests (any status) by the policy they ran with.",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   [(f"sum by (policy) (rate(argen_requests_total{{{SEL}}}[{RATE}]))", "{{policy}}")],
                   "reqps", stack=True),
        timeseries("Requests / s by status",
                   "gRPC status of finished requests: RESOURCE_EXHAUSTED is a full queue, "
                   "UNAVAILABLE a draining replica, CANCELLED the client's choice.",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   [(f"sum by (status) (rate(argen_requests_total{{{SEL}}}[{RATE}]))", "{{status}}")],
                   "reqps", stack=True),
    ]
    y += 8
    panels += [
        timeseries("Error ratio by policy",
                   "Share of requests ending INTERNAL, UNKNOWN, DATA_LOSS or UNAVAILABLE (the "
                   "ArgenHighErrorRate alert fires above 5%; client cancellations and deadlines "
                   "are not errors).",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   [(f'sum by (policy) (rate(argen_requests_total{{{SEL}, status=~"INTERNAL|UNKNOWN|DATA_LOSS|UNAVAILABLE"}}[{RATE}])) / '
                     f"sum by (policy) (rate(argen_requests_total{{{SEL}}}[{RATE}]))", "{{policy}}")],
                   "percentunit"),
        timeseries("Draining pods", "1 while a pod drains on shutdown (rollouts, scale-in).",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   [(f"sum by (pod) (argen_draining{{{SEL}}})", "{{pod}}")], "short"),
    ]
    y += 8

    panels.append(row("Transports, request stages and previews", y)); y += 1
    panels += [
        timeseries("Requests / s by transport and status",
                   "Generation requests each front end read (gRPC, the HTTP API), by final gRPC status "
                   "(argen_transport_requests_total).",
                   {"h": 8, "w": 12, "x": 0, "y": y},
                   [(f"sum by (transport, status) (rate(argen_transport_requests_total{{{SEL}}}[{RATE}]))",
                     "{{transport}} {{status}}")],
                   "reqps", stack=True),
        timeseries("HTTP API responses / s by code",
                   "Every response of the HTTP API port (argen_http_responses_total): 429 is a full "
                   "queue, 503 loading or draining, 500 a server fault (ArgenHttpServerErrors).",
                   {"h": 8, "w": 12, "x": 12, "y": y},
                   [(f"sum by (code) (rate(argen_http_responses_total{{{SEL}}}[{RATE}]))", "{{code}}")],
                   "reqps", stack=True),
    ]
    y += 8
    panels += [
        timeseries("Prefill and VQ decode percentiles",
                   "Per request: the engine step that prefilled its prompts (argen_prefill_seconds) and "
                   "the VQ decode and image encoding of its images (argen_vq_decode_seconds).",
                   {"h": 8, "w": 8, "x": 0, "y": y},
                   [(e, "prefill " + l) for e, l in quantiles("argen_prefill_seconds", [0.5, 0.9])] +
                   [(e, "VQ decode " + l) for e, l in quantiles("argen_vq_decode_seconds", [0.5, 0.9])], "s"),
        timeseries("Time to first preview percentiles",
                   "Request read to its first preview (partial image) sent, for requests asking for "
                   "previews (argen_time_to_first_preview_seconds): when a user first sees rows.",
                   {"h": 8, "w": 8, "x": 8, "y": y},
                   quantiles("argen_time_to_first_preview_seconds", [0.5, 0.9, 0.99]), "s"),
        timeseries("Prompt tokens percentiles",
                   "Prompt tokens of each request's caption row (argen_prompt_tokens); long prompts "
                   "cost prefill time and KV.",
                   {"h": 8, "w": 8, "x": 16, "y": y},
                   quantiles("argen_prompt_tokens", [0.5, 0.99]), "short"),
    ]

    templating = [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
        {"name": "namespace", "label": "Namespace", "type": "query", "datasource": DS,
         "query": {"query": "label_values(argen_kv_cache_budget_bytes, namespace)", "refId": "ns"},
         "definition": "label_values(argen_kv_cache_budget_bytes, namespace)",
         "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "refresh": 2,
         "sort": 1, "hide": 0, "options": [], "regex": ""},
        {"name": "pod", "label": "Pod", "type": "query", "datasource": DS,
         "query": {"query": 'label_values(argen_kv_cache_budget_bytes{namespace=~"$namespace"}, pod)',
                   "refId": "pod"},
         "definition": 'label_values(argen_kv_cache_budget_bytes{namespace=~"$namespace"}, pod)',
         "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "refresh": 2,
         "sort": 1, "hide": 0, "options": [], "regex": ""},
    ]
    return {
        "uid": "argen-serving",
        "title": "argen serving",
        "description": "argen_server: throughput, latency percentiles, batch size, KV cache use, "
                       "queue depth and per-policy traffic (metrics: docs/serving.md; "
                       "reading it: docs/operations.md).",
        "tags": ["argen"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": templating},
        "panels": panels,
    }


def render():
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "argen-dashboard.json")
    if len(sys.argv) > 1 and sys.argv[1] == "--stdout":
        sys.stdout.write(render())
    else:
        with open(out, "w") as f:
            f.write(render())
        print(out)
