"""The long run behind scripts/leak-run (run that, not this): a `fanout run` worker built with
AddressSanitizer (LeakSanitizer at its exit) under continuous load from `fanout broker` and
`fanout apns-sim`, stopped with SIGTERM; judged by its leak report, its exit and its resident memory.

The load, for the whole run at --rate events/s through kcat -P: updates of a fixed set of activities
whose tokens were registered first (major and progress-only), broadcast updates to channels created
on the simulator (their storage policy looked up by the worker), push-to-start starts and ends cycling
through a fixed pool of keys, records that are not valid events (dead-lettered), and token churn: now
and then the simulator is told an activity's token is unregistered (410, a feedback record) and the
activity gets a new token on activity-tokens. The simulator answers a share of pushes with 500, 429
and stream resets. Every set is bounded, so what the worker tracks stops growing after the warm-up.

Standard library plus scripts/bench.py's process, HTTP and Kafka helpers. Samples VmRSS every
--sample-seconds into LEAK_DIR/samples.csv; the report goes to stdout and LEAK_DIR/report.json.
Exit 0 when the worker exited 0 without a sanitizer report and its RSS stayed within the bound,
1 otherwise, 2 when the run could not be set up.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CouldNotRun, KafkaOffsets, Processes, http_get, memory_kib, wait_for_line  # noqa: E402

APP = "com.example.leakrun"
TEAM, KID = "TEAM000001", "KEY0000001"  # what `fanout apns-sim --generate-test-key` issues
PARTITIONS = 4
TOPICS = [f"activity-updates:{PARTITIONS}", f"activity-tokens:{PARTITIONS}", f"fanout-state:{PARTITIONS}", "broadcast-updates:2",
          "activity-updates-dlq:1", "broadcast-updates-dlq:1", "activity-token-feedback:1"]
ACTIVITIES, CHANNELS, LIFECYCLE_KEYS = 2_000, 4, 200
# RSS at the end of the load may exceed RSS at the end of the warm-up by this much, no more.
GROWTH_FRACTION, GROWTH_SLACK_MIB = 0.10, 16


def log(text):
    sys.stderr.write(f"leak-run: {text}\n")
    sys.stderr.flush()


def token(index, generation=0):
    return f"{generation:08x}{index:056x}"


class Load:
    """Writes each slice's share of the mix into three kcat producers."""

    def __init__(self, procs, directory, bootstrap, control_url, channels, seed):
        def kcat(topic):
            # kcat -P holds stdin's records back far longer than librdkafka's default linger: a 10 ms one.
            return procs.start(f"kcat {topic}", ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "linger.ms=10"],
                               os.path.join(directory, f"kcat-{topic}.log"), stdin=subprocess.PIPE)
        self.updates, self.broadcasts, self.tokens = kcat("activity-updates"), kcat("broadcast-updates"), kcat("activity-tokens")
        self.control_url, self.channels = control_url, channels
        self.random = random.Random(seed)
        self.generation = [0] * ACTIVITIES
        self.progress = [0] * ACTIVITIES
        self.channel_minute = [0] * len(channels)
        self.lifecycle = {}  # pool key index → (run number, events sent in that run)
        self.counts = dict(updates=0, broadcasts=0, starts=0, ends=0, invalid=0, token_changes=0)
        self.serial = 0

    def register_all(self, bootstrap):
        """Every activity's token, through a kcat of its own: a kcat -P fed through a pipe keeps the last
        lines it read until more arrive or the pipe closes."""
        now = int(time.time())
        lines = "".join(self.token_line(i, now) for i in range(ACTIVITIES))
        done = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", "activity-tokens", "-K", "\t"], input=lines.encode(),
                              stderr=subprocess.PIPE, timeout=60)
        if done.returncode != 0:
            raise CouldNotRun(f"kcat could not produce the tokens: {done.stderr.decode(errors='replace')[-500:]}")

    def token_line(self, index, now):
        record = {"token": token(index, self.generation[index]), "app": APP, "environment": "production", "at": now}
        return f"a-{index}\t{json.dumps(record, separators=(',', ':'))}\n"

    def event(self, key, kind, now, **fields):
        self.serial += 1
        record = {"v": 1, "id": f"e-{self.serial}", "app": APP, "event": kind, "timestamp": now, **fields}
        return f"{key}\t{json.dumps(record, separators=(',', ':'))}\n"

    def slice(self, count, now):
        updates, broadcasts = [], []
        for _ in range(count):
            roll = self.random.random()
            if roll < 0.80:
                index = self.random.randrange(ACTIVITIES)
                self.progress[index] = (self.progress[index] + self.random.randint(1, 7)) % 100
                major = self.random.random() < 0.3
                updates.append(self.event(f"a-{index}", "update", now, activity=f"a-{index}",
                                          content_state={"phase": "running", "progress": self.progress[index] / 100},
                                          **({"importance": "major"} if major else {})))
                self.counts["updates"] += 1
            elif roll < 0.87:
                slot = self.random.randrange(len(self.channels))
                self.channel_minute[slot] = (self.channel_minute[slot] + 1) % 90
                broadcasts.append(self.event(self.channels[slot], "update", now, channel=self.channels[slot],
                                             content_state={"score": f"{slot}-{self.channel_minute[slot] % 5}",
                                                            "minute": self.channel_minute[slot]}))
                self.counts["broadcasts"] += 1
            elif roll < 0.97:
                updates.append(self.lifecycle_event(now))
            else:
                key = f"a-{self.random.randrange(ACTIVITIES)}"
                bad = self.random.choice(['{"v":1,"id":', '{"v":1,"id":"x","event":"update","nope":1}', "[1,2]",
                                          '{"v":2,"id":"y","event":"update","activity":"%s","timestamp":1}' % key])
                updates.append(f"{key}\t{bad}\n")
                self.counts["invalid"] += 1
        self.write(self.updates, updates)
        self.write(self.broadcasts, broadcasts)

    def lifecycle_event(self, now):
        """Pool keys go start → a few updates → end, then start again under the same key (a new activity)."""
        index = self.random.randrange(LIFECYCLE_KEYS)
        run, sent = self.lifecycle.get(index, (0, -1))
        key = f"life-{index}"
        if sent < 0:
            self.lifecycle[index] = (run, 0)
            self.counts["starts"] += 1
            # The started activity's update token, as the app uploads it once iOS issues it.
            record = {"token": token(200_000 + index, run), "app": APP, "environment": "production", "at": now}
            self.write(self.tokens, [f"{key}\t{json.dumps(record, separators=(',', ':'))}\n"])
            return self.event(key, "start", now, activity=key, token=token(100_000 + index, run),
                              attributes_type="JobAttributes", attributes={"name": key},
                              content_state={"phase": "queued", "progress": 0},
                              alert={"title": "Job started", "body": f"{key} run {run}"})
        if sent < 4:
            self.lifecycle[index] = (run, sent + 1)
            return self.event(key, "update", now, activity=key, content_state={"phase": "running", "progress": sent / 4})
        self.lifecycle[index] = (run + 1, -1)
        self.counts["ends"] += 1
        return self.event(key, "end", now, activity=key, content_state={"phase": "done", "progress": 1})

    def churn_token(self, now):
        """The device's token goes away (410 from now on); the app uploads a new one shortly after."""
        index = self.random.randrange(ACTIVITIES)
        old = token(index, self.generation[index])
        request = urllib.request.Request(f"{self.control_url}/tokens/{old}", method="PUT",
                                         data=json.dumps({"state": "unregistered"}).encode())
        urllib.request.urlopen(request, timeout=5).read()
        self.generation[index] += 1
        self.write(self.tokens, [self.token_line(index, now)])
        self.counts["token_changes"] += 1

    @staticmethod
    def write(producer, lines):
        if lines:
            producer.stdin.write("".join(lines).encode())
            producer.stdin.flush()

    def close(self):
        for producer in (self.updates, self.broadcasts, self.tokens):
            producer.stdin.close()
            producer.wait(30)


def create_channels(fanout, sim, key_file, directory):
    """`fanout channels create` on the simulator's management API, half without storage, half most-recent."""
    channels = []
    for index in range(CHANNELS):
        storage = "none" if index % 2 == 0 else "most-recent"
        done = subprocess.run([fanout, "channels", "create", "--app", APP, "--key-file", key_file, "--key-id", KID,
                               "--team-id", TEAM, "--base-url", sim["management-url"], "--ca-file", sim["ca-file"],
                               "--storage", storage], capture_output=True, text=True, timeout=60,
                              env=procs_environment(directory))
        created = re.search(r"created channel (\S+) ", done.stdout)
        if done.returncode != 0 or not created:
            raise CouldNotRun(f"fanout channels create failed ({done.returncode}): {done.stdout}{done.stderr}")
        channels.append(created.group(1))
    return channels


def procs_environment(directory):
    return dict(os.environ, ASAN_OPTIONS=helper_asan_options(directory))


def helper_asan_options(directory):
    # The broker, the simulator and the channel commands are not what is measured: no leak check.
    return f"detect_leaks=0:log_path={directory}/asan-helper"


def metric_sums(admin):
    """Each metric family's sum over its series, and the events consumed from the two event topics."""
    sums = {"events": 0.0}
    for line in http_get(admin + "/metrics").decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            name = key.split("{", 1)[0]
            try:
                sums[name] = sums.get(name, 0.0) + float(value)
            except ValueError:
                continue
            if name == "fanout_events_consumed_total" and re.search(r'topic="(activity|broadcast)-updates"', key):
                sums["events"] += float(value)
    return sums


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fanout", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--transport", default="nghttp2", choices=["nghttp2", "curl"])
    parser.add_argument("--sample-seconds", type=float, default=5)
    parser.add_argument("--suppressions", required=True)
    options = parser.parse_args()
    directory = options.dir
    procs = Processes(directory)
    try:
        return run(options, procs, directory)
    except CouldNotRun as error:
        log(f"could not run: {error}")
        return 2
    finally:
        procs.stop_all()


def run(options, procs, directory):
    helper_env = {"ASAN_OPTIONS": helper_asan_options(directory)}
    broker_log = os.path.join(directory, "broker.log")
    broker = procs.start("fanout broker", [options.fanout, "broker"] + [a for t in TOPICS for a in ("--topic", t)],
                         broker_log, env=helper_env)
    bootstrap = wait_for_line(broker_log, r"bootstrap: (\S+)", broker, 60, "fanout broker").group(1)
    sim_log = os.path.join(directory, "apns-sim.log")
    simulator = procs.start("fanout apns-sim", [options.fanout, "apns-sim", "--app", APP, "--generate-test-key",
                                                os.path.join(directory, "keys"), "--fail-500", "0.01",
                                                "--fail-429", "0.01", "--reset", "0.005"], sim_log, env=helper_env)
    wait_for_line(sim_log, r"provider-token-file: (\S+)", simulator, 60, "fanout apns-sim")
    with open(sim_log) as f:
        sim = dict(re.findall(r"^\s+([a-z-]+): (\S+)$", f.read(), re.M))
    key_file = os.path.abspath(sim["private-key-file"])
    channels = create_channels(options.fanout, sim, key_file, directory)
    log(f"broker {bootstrap}, simulator {sim['device-url']}, {CHANNELS} channels created")

    load = Load(procs, directory, bootstrap, sim["control-url"], channels, seed=14)
    load.register_all(bootstrap)
    config = {"kafka": {"bootstrap_servers": bootstrap},
              "apps": [{"bundle_id": APP, "team_id": TEAM, "key_id": KID, "key_path": key_file}],
              "apns": {"base_url": sim["device-url"], "management_base_url": sim["management-url"],
                       "ca_file": sim["ca-file"], "transport": options.transport},
              "admin": {"port": 0}}
    config_path = os.path.join(directory, "worker.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=1)
    worker_log = os.path.join(directory, "worker.log")
    # A small quarantine: ASan holds freed memory back (256 MiB by default) before reusing it, which
    # would read as growth here; 16 MiB still catches a use of memory freed moments before.
    worker_env = {"ASAN_OPTIONS": f"detect_leaks=1:quarantine_size_mb=16:log_path={directory}/asan-worker",
                  "LSAN_OPTIONS": f"suppressions={options.suppressions}:print_suppressions=0"}
    worker = procs.start("fanout run", [options.fanout, "run", "--config", config_path], worker_log, env=worker_env)
    port = wait_for_line(worker_log, r'"admin server listening".*?"port":(\d+)', worker, 120, "fanout run").group(1)
    admin = f"http://127.0.0.1:{port}"
    wait_for_line(worker_log, r'"partitions assigned"', worker, 120, "fanout run (group join)")
    deadline = time.time() + 120
    while metric_sums(admin).get("fanout_token_registry_size", 0) < ACTIVITIES:
        if time.time() > deadline or worker.poll() is not None:
            raise CouldNotRun(f"the worker did not read the {ACTIVITIES} tokens within 120 s; see {worker_log}")
        time.sleep(0.5)
    log(f"worker {worker.pid} ready ({options.transport}); {options.rate} events/s for {options.minutes:g} min")

    samples_path = os.path.join(directory, "samples.csv")
    samples = []  # (seconds since the load began, RSS KiB, events consumed)
    started = time.time()
    duration = options.minutes * 60
    next_sample = next_churn = next_progress = started
    sent = 0
    with open(samples_path, "w") as out:
        out.write("seconds,rss_kib,events_consumed,pushes_accepted\n")
        while True:
            now = time.time()
            if now - started >= duration:
                break
            if worker.poll() is not None:
                raise CouldNotRun(f"fanout run exited with {worker.returncode} under load; see {worker_log}")
            due = int((now - started) * options.rate) - sent
            if due > 0:
                load.slice(due, int(now))
                sent += due
            if now >= next_churn:
                load.churn_token(int(now))
                next_churn = now + 2
            if now >= next_sample:
                rss, _ = memory_kib(worker.pid)
                sums = metric_sums(admin)
                accepted = json.loads(http_get(sim["control-url"] + "/stats"))["accepted"]
                samples.append((now - started, rss, sums["events"], accepted))
                out.write("%.1f,%d,%d,%d\n" % samples[-1])
                out.flush()
                next_sample = now + options.sample_seconds
            if now >= next_progress:
                if samples:
                    log(f"{(now - started) / 60:4.1f} min: {sent} events produced, {samples[-1][2]:.0f} consumed, "
                        f"RSS {samples[-1][1] / 1024:.0f} MiB")
                next_progress = now + 60
            time.sleep(0.02)
    load.close()

    # Drained: everything produced consumed and committed (the worker keeps its partitions meanwhile).
    offsets = KafkaOffsets(bootstrap)
    try:
        topics = {"activity-updates": PARTITIONS, "broadcast-updates": 2}
        ends = {topic: [high for _, high in offsets.watermarks(topic, count)] for topic, count in topics.items()}
        deadline = time.time() + 120
        drained = False
        while time.time() < deadline and not drained:
            drained = True
            for topic, count in topics.items():
                committed = offsets.committed(topic, count, timeout_ms=2000)
                drained = drained and committed is not None and all(c >= e for c, e in zip(committed, ends[topic]))
            time.sleep(1)
    finally:
        offsets.close()
    end_rss, end_hwm = memory_kib(worker.pid)
    final = metric_sums(admin)
    stopped = time.time()
    code = procs.stop(worker, timeout=60)
    stop_seconds = time.time() - stopped
    return verdict(options, directory, worker.pid, code, stop_seconds, samples, end_rss, end_hwm, final, load.counts,
                   sent, drained)


def verdict(options, directory, pid, code, stop_seconds, samples, end_rss, end_hwm, final, counts, sent, drained):
    warm = max(60.0, options.minutes * 60 / 4)
    warm_samples = [rss for seconds, rss, _, _ in samples if seconds <= warm]
    warm_rss = warm_samples[-1] if warm_samples else samples[0][1]
    bound = warm_rss * (1 + GROWTH_FRACTION) + GROWTH_SLACK_MIB * 1024
    report_path = os.path.join(directory, f"asan-worker.{pid}")
    report = open(report_path, errors="replace").read() if os.path.exists(report_path) else ""
    direct = re.findall(r"Direct leak of (\d+) byte", report)
    indirect = re.findall(r"Indirect leak of (\d+) byte", report)
    result = {
        "minutes": options.minutes, "rate": options.rate, "transport": options.transport,
        "events_produced": sent, "mix": counts, "drained": drained,
        "events_consumed": final["events"],
        "pushes_accepted": samples[-1][3] if samples else 0,
        "rss_mib": {"first": samples[0][1] / 1024, "end_of_warmup": warm_rss / 1024, "end_of_load": end_rss / 1024,
                    "peak": end_hwm / 1024, "bound": bound / 1024, "warmup_seconds": warm},
        "exit_code": code, "stop_seconds": round(stop_seconds, 1),
        "leaks": {"direct_bytes": sum(map(int, direct)), "direct": len(direct),
                  "indirect_bytes": sum(map(int, indirect)), "indirect": len(indirect)},
        "sanitizer_report": report_path if report else None,
    }
    problems = []
    if code != 0:
        problems.append(f"the worker exited {code} after SIGTERM (0 expected)")
    if report:
        problems.append(f"the worker's sanitizer report is not empty: {report_path}")
    if end_rss > bound:
        problems.append(f"RSS grew from {warm_rss / 1024:.0f} MiB (after {warm:.0f} s) to {end_rss / 1024:.0f} MiB, "
                        f"over the bound of {bound / 1024:.0f} MiB ({GROWTH_FRACTION:.0%} + {GROWTH_SLACK_MIB} MiB)")
    if not drained:
        problems.append("the worker had not committed everything produced 120 s after the load ended")
    if result["events_consumed"] < sent:
        problems.append(f"the worker consumed {result['events_consumed']:.0f} of {sent} events")
    result["problems"] = problems
    with open(os.path.join(directory, "report.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    if report:
        sys.stderr.write(report)
    for problem in problems:
        log(f"FAIL: {problem}")
    if not problems:
        log(f"PASS: {sent} events in {options.minutes:g} min; RSS {warm_rss / 1024:.0f} MiB after the warm-up, "
            f"{end_rss / 1024:.0f} MiB at the end (bound {bound / 1024:.0f}); no leak reported; exit 0")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
