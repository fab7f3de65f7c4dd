#!/usr/bin/env python3
"""The Prometheus half of scripts/check-prometheus (python3 standard library only).

  check-prometheus.py workload DIR            write the run's token records, events and the secrets no label may carry
  check-prometheus.py wait-up URL SECONDS JOB...   wait until every job's target is up in /api/v1/targets
  check-prometheus.py check URL SECONDS DASHBOARD DIR   the checks (below) against a Prometheus scraping the run

`check` reads what a dashboard and the alerts need from deploy/ itself: every selector of every
panel query, of the dashboard's variables and of every rule Prometheus loaded (/api/v1/rules, so the
rules are read as Prometheus parsed them), with the labels the query groups by (`by (…)`, `on (…)`),
filters on (`{label=…}`), or prints of a series it passes through (an alert's `$labels.x`, a panel's
`{{x}}` legend). Each must match a series in
Prometheus (/api/v1/series) whose every instance carries those labels. Beside that: a few values that
must have moved, every rule evaluates without error, and no label looks per-token or per-activity.
"""
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request

APP = "com.example.exports"
PAUSED_APP = "com.example.paused"  # configured in the worker, unknown to the simulator: APNs refuses its topic
WORKER_JOB, SIMULATOR_JOB = "fanout-worker", "apns-sim"

# Series that exist only once something happens that this run does not cause; for these the check
# asks that a scraped target declares the family (/api/v1/metadata) instead of a series.
NOT_PROVOKED = {
    "fanout_produce_failures_total": "a dead-letter or feedback produce failing (a topic missing or not writable, brokers down)",
}

# Values that must have moved once the workload is through: PromQL that must return a sample.
MUST_HAVE = [
    ('sum(fanout_events_consumed_total{topic="activity-updates"}) > 0', "events read from activity-updates"),
    ('sum(fanout_events_consumed_total{topic="broadcast-updates"}) > 0', "events read from broadcast-updates"),
    ('sum(fanout_apns_sends_total{lane="activity",outcome="delivered"}) > 0', "activity sends APNs accepted"),
    ('sum(fanout_apns_sends_total{lane="broadcast",outcome="delivered"}) > 0', "broadcast sends APNs accepted"),
    ('sum(fanout_apns_latency_seconds_count{lane="activity"}) > 0', "APNs latencies observed"),
    ('sum(fanout_offset_commits_total{result="ok"}) > 0', "offset commits Kafka acknowledged"),
    ('sum(fanout_committed_offset{topic="activity-updates"}) > 0', "a committed offset past 0"),
    ('sum(fanout_dead_letters_total{topic="activity-updates",reason="no-token"}) > 0', "a no-token dead letter"),
    ('sum(fanout_dead_letters_total{topic="broadcast-updates",reason="channel-not-registered"}) > 0',
     "a channel-not-registered dead letter"),
    (f'sum(fanout_broadcast_channel_not_registered_total{{app="{APP}"}}) > 0', "a broadcast to a channel APNs does not know"),
    (f'sum(fanout_token_feedback_records_total{{app="{APP}",reason="Unregistered"}}) > 0', "a token feedback record (410)"),
    ('sum(fanout_apns_errors_total{lane="activity",status="410"}) > 0', "an APNs error counted"),
    (f'max(fanout_app_blocked{{app="{PAUSED_APP}"}}) == 1', "an app paused by a configuration error"),
    (f'sum(fanout_app_config_errors_total{{app="{PAUSED_APP}"}}) > 0', "its configuration error counted"),
    ('sum(fanout_jwt_refreshes_total) > 0', "a provider JWT minted"),
    ('fanout_resident_memory_bytes > 0', "resident memory sampled"),
    ('sum(apns_sim_pushes_accepted_total) > 0', "pushes the simulator accepted"),
    ('sum(apns_sim_responses_total{status="410",reason="Unregistered"}) > 0', "the simulator's 410 answers"),
    ('count(fanout:dead_letters:rate5m) > 0', "the recording rules evaluated"),
]

FORBIDDEN_LABEL_NAMES = {"token", "device_token", "push_token", "activity", "activity_id", "activity_key", "key", "channel",
                         "channel_id", "id", "event_id", "target", "jwt", "device"}
PER_TARGET_VALUE = [
    (re.compile(r"[0-9a-fA-F]{32,}"), "a run of 32+ hex digits (a push token)"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{8,}\."), "a JWT"),
    (re.compile(r"^(?=.*[0-9+/=])[A-Za-z0-9+/]{20,}={0,2}$"), "a long base64 string (a channel id)"),
]
MAX_VALUES_PER_LABEL = 64


def fail(message):
    sys.exit(f"check-prometheus: FAILED: {message}")


def say(message):
    print(f"check-prometheus: {message}", flush=True)


# MARK: workload

def workload(directory):
    """Token records (key TAB value), events for both lanes, and the secrets file (one a line)."""
    now = int(time.time())
    tokens = {f"promcheck-export-{i}": f"{0xa0 + i:02x}" * 32 for i in range(1, 6)}
    tokens["promcheck-gone"] = "0b" * 32            # the simulator answers 410 Unregistered for it
    tokens["promcheck-paused"] = "0c" * 32          # its app's topic is refused: a configuration error
    with open(os.path.join(directory, "tokens.txt"), "w") as out:
        for key, token in tokens.items():
            app = PAUSED_APP if key == "promcheck-paused" else APP
            out.write(f"{key}\t" + json.dumps({"token": token, "app": app, "environment": "production", "at": now - 60}) + "\n")
    events = []

    def event(key, n, kind="update", app=APP, **state):
        events.append({"v": 1, "id": f"{key}-{n}", "app": app, "activity": key, "event": kind, "timestamp": now - 30 + n,
                       "content_state": {"phase": f"step {n}", **state}})

    for i in range(1, 6):
        for n in range(1, 4):
            event(f"promcheck-export-{i}", n, progress=n / 4)
    event("promcheck-export-1", 4, kind="end", progress=1.0)
    event("promcheck-gone", 1)
    event("promcheck-paused", 1, app=PAUSED_APP)
    event("promcheck-no-token", 1)                  # no token ever arrives: dead-lettered no-token after token_wait
    with open(os.path.join(directory, "activity.jsonl"), "w") as out:
        out.writelines(json.dumps(e) + "\n" for e in events)
    with open(os.path.join(directory, "secrets.txt"), "w") as out:
        out.writelines(f"{value}\n" for value in list(tokens) + list(tokens.values()) + ["promcheck-no-token"])


def broadcasts(directory, channel, unknown_channel):
    """Broadcast updates for a channel the simulator has and for one it never created."""
    now = int(time.time())
    with open(os.path.join(directory, "broadcast.jsonl"), "w") as out:
        for n, target in enumerate([channel, channel, unknown_channel], start=1):
            out.write(json.dumps({"v": 1, "id": f"promcheck-b{n}", "app": APP, "channel": target, "event": "update",
                                  "timestamp": now - 10 + n, "content_state": {"score": f"{n}-0"}}) + "\n")
    with open(os.path.join(directory, "secrets.txt"), "a") as out:
        out.write(f"{channel}\n{unknown_channel}\n")


# MARK: Prometheus's HTTP API

class Prometheus:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def get(self, path, **params):
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=5) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
            fail(f"Prometheus answered {error.code} to {path} {params}: {body.get('error', body)}")
        if body.get("status") != "success":
            fail(f"Prometheus answered {path} {params} with {body}")
        return body["data"]

    def query(self, expr):
        return self.get("/api/v1/query", query=expr)["result"]

    def series(self, selector):
        return self.get("/api/v1/series", **{"match[]": selector})


def wait_up(url, seconds, jobs):
    prometheus = Prometheus(url)
    deadline = time.monotonic() + seconds
    while True:
        try:
            targets = prometheus.get("/api/v1/targets", state="active")["activeTargets"]
        except (OSError, SystemExit):
            targets = []
        health = {t["labels"].get("job"): (t["health"], t.get("lastError", ""), t["scrapeUrl"]) for t in targets}
        if all(health.get(job, ("",))[0] == "up" for job in jobs):
            for job in jobs:
                say(f"target {job} is up ({health[job][2]})")
            return
        if time.monotonic() > deadline:
            fail(f"targets not up within {seconds} s: " + "; ".join(
                f"{job}: {health.get(job, ('missing', 'not in /api/v1/targets', ''))[0]} {health.get(job, ('', '', ''))[1]}" for job in jobs))
        time.sleep(0.5)


# MARK: what the dashboard and the rules read

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan", "atan2"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
TOKEN = re.compile(r"""(?P<ws>\s+)|(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  |(?P<number>(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?:(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?)
  |(?P<var>\$\{?\w+\}?)|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)|(?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(),@])""", re.X)
MATCHER = re.compile(r"""\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*,?""")


def tokens(expr):
    """(kind, text) tokens; a `{…}` label-matcher list and a `[…]` range are one token each."""
    out, i = [], 0
    while i < len(expr):
        if expr[i] in "{[":
            close, j, quote = "}" if expr[i] == "{" else "]", i + 1, None
            while j < len(expr) and (quote or expr[j] != close):
                if quote:
                    if expr[j] == "\\" and quote != "`":
                        j += 1
                    elif expr[j] == quote:
                        quote = None
                elif expr[j] in "\"'`":
                    quote = expr[j]
                j += 1
            out.append(("matchers" if close == "}" else "range", expr[i + 1:j]))
            i = j + 1
            continue
        m = TOKEN.match(expr, i)
        if not m:
            raise ValueError(f"cannot read {expr[i:i + 20]!r} in {expr!r}")
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
        i = m.end()
    return out


def selectors(expr, annotation_labels=()):
    """Every vector selector of `expr`: (name, matchers [(label, op, value)], labels the query needs of it)."""
    toks = tokens(expr)
    match, stack = {}, []
    for i, (kind, text) in enumerate(toks):
        if text == "(":
            stack.append(i)
        elif text == ")":
            match[stack.pop()] = i
    spans = []  # (open, close, aggregation name or None, grouping labels or None)
    label_lists = set()
    on_lists = []  # (scope open, scope close, labels)

    def labels_at(open_index):
        label_lists.update(range(open_index, match[open_index] + 1))
        return [text for kind, text in toks[open_index + 1:match[open_index]] if kind == "ident"]

    for i, (kind, text) in enumerate(toks):
        if kind != "ident":
            continue
        nxt = toks[i + 1][1] if i + 1 < len(toks) else None
        if text in AGGREGATIONS and nxt in ("(", "by", "without"):
            grouping, j = None, i + 1
            if nxt in ("by", "without"):
                grouping = (nxt, labels_at(i + 2))
                j = match[i + 2] + 1
            close = match[j]
            if grouping is None and close + 1 < len(toks) and toks[close + 1][1] in ("by", "without"):
                grouping = (toks[close + 1][1], labels_at(close + 2))
            spans.append((j, close, text, grouping))
        elif text in ("on",) and nxt == "(":
            enclosing = [o for o in match if o < i < match[o]]
            scope = (max(enclosing), match[max(enclosing)]) if enclosing else (-1, len(toks))
            on_lists.append((*scope, labels_at(i + 1)))
        elif text in LABEL_LISTS and nxt == "(":
            labels_at(i + 1)
    found = []
    for i, (kind, text) in enumerate(toks):
        if kind != "ident" or i in label_lists or text.lower() in KEYWORDS or text in AGGREGATIONS:
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else (None, None)
        if nxt[1] == "(":
            continue  # a function
        matchers = MATCHER.findall(nxt[1]) if nxt[0] == "matchers" else []
        needed = {label for label, _, _ in matchers}
        passes_through = True
        for open_index, close, aggregation, grouping in spans:
            if open_index < i < close:
                if grouping and grouping[0] == "by":
                    needed.update(grouping[1])
                if aggregation not in ("topk", "bottomk"):
                    passes_through = False
        for open_index, close, labels in on_lists:
            if open_index < i < close:
                needed.update(labels)
        if passes_through:
            needed.update(annotation_labels)
        found.append((text, [(label, op, value[1:-1]) for label, op, value in matchers], needed))
    return found


GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$job": ".+", "$instance": ".+"}


def dashboard_reads(path):
    """(where, expression) of every panel query and of each label_values(selector, label) variable."""
    dashboard = json.load(open(path))
    reads = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets") or []:
            if target.get("expr", "").strip():
                # The legend prints labels of the result as an alert's annotations do.
                legend = tuple(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat") or ""))
                reads.append((f"dashboard panel {panel.get('title')!r} ({target.get('refId')})", target["expr"], legend))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        query = query.get("query", "") if isinstance(query, dict) else query or ""
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query)
        if m:
            reads.append((f"dashboard variable ${variable.get('name')}", m.group(1), (m.group(2),)))
        elif variable.get("type") == "query":
            fail(f"dashboard variable {variable.get('name')}: not a label_values(selector, label) query: {query!r}")
    substituted = []
    for where, expr, extra in reads:
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        substituted.append((where, expr, extra))
    return substituted


def rule_reads(prometheus):
    """(where, query, annotation labels) of every rule Prometheus loaded, and the rules' problems."""
    reads, problems, count = [], [], 0
    for group in prometheus.get("/api/v1/rules")["groups"]:
        for rule in group["rules"]:
            count += 1
            name = rule["name"]
            where = f"{'alert' if rule['type'] == 'alerting' else 'recording rule'} {name}"
            if rule.get("health") != "ok":
                problems.append(f"{where}: health {rule.get('health')!r} {rule.get('lastError', '')}")
            printed = set()
            for text in (rule.get("annotations") or {}).values():
                printed.update(re.findall(r"\$labels\.(\w+)", text))
            reads.append((where, rule["query"], tuple(sorted(printed))))
    return reads, problems, count


def selector_text(name, matchers):
    inner = ",".join(f'{label}{op}{json.dumps(value)}' for label, op, value in matchers)
    return f"{name}{{{inner}}}" if inner else name


# MARK: the checks

def check(url, seconds, dashboard, directory):
    prometheus = Prometheus(url)
    deadline = time.monotonic() + seconds

    say("waiting for the workload's effects in Prometheus: " + ", ".join(what for _, what in MUST_HAVE))
    while True:
        missing = [(expr, what) for expr, what in MUST_HAVE if not prometheus.query(expr)]
        if not missing:
            break
        if time.monotonic() > deadline:
            fail("these never showed in Prometheus: " + "; ".join(f"{what} ({expr})" for expr, what in missing))
        time.sleep(1)
    say(f"all {len(MUST_HAVE)} workload effects are in Prometheus")

    rules, rule_problems, rule_count = rule_reads(prometheus)
    if rule_count == 0:
        fail("Prometheus loaded no rules (rule_files in the generated configuration)")
    if rule_problems:
        fail("rules that do not evaluate: " + "; ".join(rule_problems))
    say(f"{rule_count} rules loaded, every one evaluates (health ok)")

    reads = dashboard_reads(dashboard) + rules
    wanted = {}  # selector text → (name, labels needed, [where])
    for where, expr, extra in reads:
        found = selectors(expr, extra)
        if not found:
            fail(f"{where}: no series in {expr!r}")
        for name, matchers, needed in found:
            key = selector_text(name, matchers)
            entry = wanted.setdefault(key, (name, set(), []))
            entry[1].update(needed)
            entry[2].append(where)
    problems, notes = [], []
    for key, (name, needed, where) in sorted(wanted.items()):
        found = prometheus.series(key)
        if not found:
            if name in NOT_PROVOKED:
                if prometheus.get("/api/v1/metadata", metric=name):
                    notes.append(f"{name}: declared by the worker, no series until {NOT_PROVOKED[name]}")
                else:
                    problems.append(f"{key} (read by {where[0]}) is not even declared on a scraped target (/api/v1/metadata)")
                continue
            problems.append(f"no series {key}, read by {', '.join(sorted(set(where))[:3])}")
            continue
        for label in sorted(needed):
            lacking = [s for s in found if not s.get(label)]
            if lacking:
                problems.append(f"{len(lacking)} of {len(found)} series {key} lack the label {label!r}, which "
                                f"{', '.join(sorted(set(where))[:3])} group or filter by (e.g. {lacking[0]})")
    for note in notes:
        say(f"note: {note}")
    if problems:
        fail(f"{len(problems)} problem(s) with what the dashboard and the rules read:\n  " + "\n  ".join(problems))
    pairs = sum(len(needed - {"job", "instance"}) for _, needed, _ in wanted.values())
    say(f"{len(wanted)} distinct selectors from {len(reads)} dashboard queries, variables and rules have series"
        f" ({len(notes)} only declared, not provoked), with the {pairs} labels beside job and instance they group, filter or print by")

    every = prometheus.series(f'{{job=~"{WORKER_JOB}|{SIMULATOR_JOB}"}}')
    secrets = [line.strip() for line in open(os.path.join(directory, "secrets.txt")) if line.strip()]
    problems = per_target_labels(every, secrets)
    if problems:
        fail("labels that look per-token or per-activity:\n  " + "\n  ".join(problems))
    names = {s["__name__"] for s in every}
    say(f"{len(every)} series of {len(names)} names from both targets: no label is per-token or per-activity")


def per_target_labels(every, secrets):
    """What in these series' labels looks per-token or per-activity: names, value shapes, this run's own
    tokens, keys and channel ids, and labels with more values than a run of a few events can explain."""
    values, problems = {}, []
    for series in every:
        for label, value in series.items():
            if label in ("__name__", "job", "instance"):
                continue
            values.setdefault((series["__name__"], label), set()).add(value)
            if label.lower() in FORBIDDEN_LABEL_NAMES:
                problems.append(f"{series['__name__']} has a per-target label name {label!r}")
            for pattern, what in PER_TARGET_VALUE:
                if pattern.search(value):
                    problems.append(f"{series['__name__']}{{{label}={value!r}}} looks like {what}")
            for secret in secrets:
                if secret in value:
                    problems.append(f"{series['__name__']}{{{label}={value!r}}} carries {secret!r}, a token, activity key or channel id of this run")
    for (name, label), seen in values.items():
        if len(seen) > MAX_VALUES_PER_LABEL:
            problems.append(f"{name}'s label {label!r} took {len(seen)} values in a run of a few events")
    return sorted(set(problems))


def main(argv):
    if len(argv) >= 2 and argv[0] == "workload":
        return workload(argv[1])
    if len(argv) == 4 and argv[0] == "broadcasts":
        return broadcasts(argv[1], argv[2], argv[3])
    if len(argv) >= 4 and argv[0] == "wait-up":
        return wait_up(argv[1], float(argv[2]), argv[3:])
    if len(argv) == 5 and argv[0] == "check":
        return check(argv[1], float(argv[2]), argv[3], argv[4])
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
