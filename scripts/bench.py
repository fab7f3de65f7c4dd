#!/usr/bin/env python3
"""The benchmark behind scripts/bench (run that, not this): Fanout's default configuration on
`fanout broker` + `fanout apns-sim`, four workloads next to the ceilings of the same parts.

Standard library only. Every process it starts is in its own session, listed in BENCH_DIR/pids
(scripts/bench's trap kills what is left if this process dies) and stopped in reverse order on exit.
Progress goes to stderr, the report to stdout and BENCH_DIR/report.txt (figures as JSON in
BENCH_DIR/results.json). Exit 0 when every workload ran, 1 when one could not run, 130 when interrupted.
"""
import argparse
import ctypes
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
import zlib

APP = "com.example.bench"  # Benchmarks/curl-ceiling.c sends to this app's topic
TEAM, KID = "TEAM000001", "KEY0000001"  # what `fanout apns-sim --generate-test-key` issues
SIDE_TOPICS = ["broadcast-updates:6", "activity-updates-dlq:3", "broadcast-updates-dlq:3", "activity-token-feedback:3"]
SAMPLE_SECONDS = 0.1
MIN_INTERVAL = 1.0     # engine.min_interval default
COMMIT_INTERVAL = 1.0  # kafka.commit_interval default
# Token records (≈160 bytes each) one mock partition keeps under its ≈5 MiB retention.
MOCK_TOKENS_PER_PARTITION = 31_000

SIZES = {
    # w1/w4: activities (one event each); w2: (activities, events each); w3_seconds: paced duration;
    # w3_partitions: workload 3's partitions (the mock broker finds a fetch's offset by walking the
    # partition's record batches from the oldest, so a paced topic of 48 partitions in small batches
    # costs it more CPU with every batch appended: Benchmarks/BENCH.md, workload 3); w3_seconds is bound
    # by the tokens 8 partitions keep under the mock's ≈5 MiB retention (≈31k each);
    # h2load/curl: ceiling requests; *_timeout: seconds to wait for a workload to finish; budget: seconds
    # for the whole run (workload 4 gets what is left of it)
    "quick": dict(w1=20_000, w2=(1_000, 20), w3_seconds=4, w4=50_000, h2load=100_000, curl=20_000,
                  partitions=48, w3_partitions=8, w1_timeout=30, w2_timeout=30, budget=85, w5=3_200),
    "full": dict(w1=200_000, w2=(10_000, 20), w3_seconds=10, w4=1_000_000, h2load=500_000, curl=100_000,
                 partitions=48, w3_partitions=8, w1_timeout=150, w2_timeout=90, budget=570, w5=16_000),
}


def log(text):
    sys.stderr.write(f"bench: {text}\n")
    sys.stderr.flush()


class CouldNotRun(Exception):
    """A workload could not be measured at all (a process did not start, data did not load)."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM: not an Exception, so no workload's error handling swallows it."""


# ---------------------------------------------------------------------------------------------
# Processes


class Processes:
    """Every child process, stopped in reverse start order (worker before simulator before broker)."""

    def __init__(self, directory):
        self.directory = directory
        self.children = []  # (name, Popen, log file)
        self.pid_file = os.path.join(directory, "pids")
        open(self.pid_file, "w").close()

    def start(self, name, argv, log_path, stdin=None, env=None):
        out = open(log_path, "wb")
        environment = dict(os.environ, TMPDIR=os.path.join(self.directory, "tmp"))
        environment.update(env or {})
        process = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, env=environment,
                                   start_new_session=True)
        self.children.append((name, process, out))
        with open(self.pid_file, "a") as pids:
            pids.write(f"{process.pid}\n")
        return process

    def stop(self, process, timeout=25.0):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code (None if it had to be killed)."""
        for index, (name, child, out) in enumerate(self.children):
            if child is not process:
                continue
            code = child.poll()
            if code is None:
                child.send_signal(signal.SIGTERM)
                try:
                    code = child.wait(timeout)
                except subprocess.TimeoutExpired:
                    log(f"{name} (pid {child.pid}) ignored SIGTERM for {timeout:.0f} s: killing it")
                    child.kill()
                    child.wait()
                    code = None
            out.close()
            del self.children[index]
            return code
        return process.poll()

    def stop_all(self):
        while self.children:
            self.stop(self.children[-1][1], timeout=25.0)


def wait_for_line(path, pattern, process, timeout, what):
    """The first match of `pattern` in the log at `path`; CouldNotRun if the process exits or time runs out."""
    deadline = time.time() + timeout
    regex = re.compile(pattern)
    while time.time() < deadline:
        try:
            with open(path, errors="replace") as f:
                match = regex.search(f.read())
            if match:
                return match
        except FileNotFoundError:
            pass
        if process.poll() is not None:
            raise CouldNotRun(f"{what} exited with {process.returncode} before it was ready; see {path}")
        time.sleep(0.05)
    raise CouldNotRun(f"{what} was not ready after {timeout:.0f} s; see {path}")


def http_get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read()


def http_post(url, timeout=5.0):
    request = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return answer.read()


def cpu_seconds(pid):
    """user + system CPU seconds of a live process (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def memory_kib(pid):
    """(VmRSS, VmHWM) in KiB from /proc/<pid>/status, or (None, None)."""
    rss = hwm = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


# ---------------------------------------------------------------------------------------------
# Committed offsets and watermarks, read from the broker through librdkafka (ctypes), not joining the group


class _TopicPartition(ctypes.Structure):
    _fields_ = [("topic", ctypes.c_char_p), ("partition", ctypes.c_int32), ("offset", ctypes.c_int64),
                ("metadata", ctypes.c_void_p), ("metadata_size", ctypes.c_size_t), ("opaque", ctypes.c_void_p),
                ("err", ctypes.c_int), ("_private", ctypes.c_void_p)]


class _TopicPartitionList(ctypes.Structure):
    _fields_ = [("cnt", ctypes.c_int), ("size", ctypes.c_int), ("elems", ctypes.POINTER(_TopicPartition))]


class KafkaOffsets:
    """A librdkafka consumer handle with `group.id` set that never subscribes: rd_kafka_committed asks the
    group coordinator (OffsetFetch) what the group has committed, without joining or disturbing it."""

    def __init__(self, bootstrap, group="fanout"):
        lib = ctypes.CDLL("librdkafka.so.1")
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_topic_partition_list_new.restype = ctypes.POINTER(_TopicPartitionList)
        lib.rd_kafka_topic_partition_list_new.argtypes = [ctypes.c_int]
        lib.rd_kafka_topic_partition_list_add.restype = ctypes.POINTER(_TopicPartition)
        lib.rd_kafka_topic_partition_list_add.argtypes = [ctypes.POINTER(_TopicPartitionList), ctypes.c_char_p, ctypes.c_int32]
        lib.rd_kafka_topic_partition_list_destroy.argtypes = [ctypes.POINTER(_TopicPartitionList)]
        lib.rd_kafka_committed.argtypes = [ctypes.c_void_p, ctypes.POINTER(_TopicPartitionList), ctypes.c_int]
        lib.rd_kafka_query_watermark_offsets.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
                                                         ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64), ctypes.c_int]
        lib.rd_kafka_err2str.restype = ctypes.c_char_p
        self.lib = lib
        conf = lib.rd_kafka_conf_new()
        error = ctypes.create_string_buffer(512)
        for key, value in [("bootstrap.servers", bootstrap), ("group.id", group), ("enable.auto.commit", "false"),
                           ("log_level", "3")]:
            if lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), error, 512) != 0:
                raise CouldNotRun(f"librdkafka configuration {key}: {error.value.decode()}")
        self.handle = lib.rd_kafka_new(1, conf, error, 512)  # RD_KAFKA_CONSUMER; takes conf on success
        if not self.handle:
            raise CouldNotRun(f"librdkafka consumer: {error.value.decode()}")
        self.lock = threading.Lock()

    def committed(self, topic, partitions, timeout_ms=3000):
        """Committed offset per partition (negative: nothing committed), or None when the broker did not answer."""
        with self.lock:
            lst = self.lib.rd_kafka_topic_partition_list_new(partitions)
            try:
                for partition in range(partitions):
                    self.lib.rd_kafka_topic_partition_list_add(lst, topic.encode(), partition)
                if self.lib.rd_kafka_committed(self.handle, lst, timeout_ms) != 0:
                    return None
                return [lst.contents.elems[i].offset for i in range(lst.contents.cnt)]
            finally:
                self.lib.rd_kafka_topic_partition_list_destroy(lst)

    def watermarks(self, topic, partitions, timeout_ms=5000):
        """(low, high) per partition."""
        low, high = ctypes.c_int64(), ctypes.c_int64()
        result = []
        with self.lock:
            for partition in range(partitions):
                code = self.lib.rd_kafka_query_watermark_offsets(self.handle, topic.encode(), partition,
                                                                 ctypes.byref(low), ctypes.byref(high), timeout_ms)
                if code != 0:
                    raise CouldNotRun(f"watermarks of {topic}/{partition}: {self.lib.rd_kafka_err2str(code).decode()}")
                result.append((low.value, high.value))
        return result

    def close(self):
        if self.handle:
            self.lib.rd_kafka_destroy(self.handle)
            self.handle = None


# ---------------------------------------------------------------------------------------------
# One workload's parts: broker, simulator, worker


class Stack:
    """A fresh `fanout broker` and `fanout apns-sim` (and later one `fanout run`) in `directory`."""

    def __init__(self, bench, name, partitions, delivery_log=False):
        self.bench = bench
        self.name = name
        self.worker = self.sim = self.broker = None
        self.offsets = None
        bench.stacks.append(self)  # closed by run_workload even when this constructor fails half-way
        self.partitions = partitions
        self.dir = os.path.join(bench.dir, name)
        os.makedirs(self.dir, exist_ok=True)
        procs, fanout = bench.procs, bench.fanout
        topics = [f"activity-updates:{partitions}", f"activity-tokens:{partitions}", f"fanout-state:{partitions}"] + SIDE_TOPICS
        broker_args = [fanout, "broker"] + [arg for topic in topics for arg in ("--topic", topic)]
        self.broker_log = os.path.join(self.dir, "broker.log")
        self.broker = procs.start("fanout broker", broker_args, self.broker_log)
        self.bootstrap = wait_for_line(self.broker_log, r"bootstrap: (\S+)", self.broker, 20, "fanout broker").group(1)
        sim_args = [fanout, "apns-sim", "--app", APP, "--generate-test-key", os.path.join(self.dir, "keys")]
        self.delivery_log = os.path.join(self.dir, "deliveries.jsonl") if delivery_log else None
        if self.delivery_log:
            sim_args += ["--delivery-log", self.delivery_log]
        self.sim_log = os.path.join(self.dir, "apns-sim.log")
        self.sim = procs.start("fanout apns-sim", sim_args, self.sim_log)
        wait_for_line(self.sim_log, r"provider-token-file: (\S+)", self.sim, 20, "fanout apns-sim")
        with open(self.sim_log) as f:
            text = f.read()
        self.device_url = re.search(r"device-url: (\S+)", text).group(1)
        self.control_url = re.search(r"control-url: (\S+)", text).group(1)
        self.ca_file = re.search(r"ca-file: (\S+)", text).group(1)
        self.key_file = os.path.abspath(re.search(r"private-key-file: (\S+)", text).group(1))
        with open(re.search(r"provider-token-file: (\S+)", text).group(1)) as f:
            self.jwt = f.read().strip()
        self.offsets = KafkaOffsets(self.bootstrap)
        self.worker = None
        self.worker_log = os.path.join(self.dir, "worker.log")
        self.admin = None

    # Simulator

    def accepted(self):
        return json.loads(http_get(self.control_url + "/stats"))["accepted"]

    def sim_stats(self):
        return json.loads(http_get(self.control_url + "/stats"))

    # Kafka

    def preload(self, topic, path, count):
        """kcat -P from a file of key<TAB>value lines; checks that the broker kept every record."""
        started = time.time()
        done = subprocess.run(["kcat", "-P", "-b", self.bootstrap, "-t", topic, "-K", "\t", "-l", path],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise CouldNotRun(f"kcat could not produce to {topic}: {done.stderr.decode(errors='replace')[-500:]}")
        marks = self.offsets.watermarks(topic, self.partitions)
        kept = sum(high - low for low, high in marks)
        deleted = sum(low for low, _ in marks)
        if kept != count or deleted:
            raise CouldNotRun(f"{topic} holds {kept} of {count} records ({deleted} deleted by the mock's ≈5 MiB per "
                              f"partition retention): use more partitions")
        log(f"{self.name}: {count} records on {topic} in {time.time() - started:.1f} s")

    def kcat_ceiling(self, topic, count, fetch_wait_ms=None):
        """records/s of one kcat consumer (no group) reading the whole topic from the start, timed from its first
        output to its last (its start-up, metadata and end-of-partition detection left out, as they are for the
        worker's figures); kcat flushes its output every ≈4,096 records, the resolution of this clock. By default
        with librdkafka's defaults, like the worker; `fetch_wait_ms` sets fetch.wait.max.ms."""
        extra = ["-X", f"fetch.wait.max.ms={fetch_wait_ms}"] if fetch_wait_ms else []
        process = subprocess.Popen(["kcat", "-C", "-b", self.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                                    "-f", "\\n"] + extra, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        records, first, last = 0, None, None
        descriptor = process.stdout.fileno()
        while True:
            chunk = os.read(descriptor, 1 << 16)
            if not chunk:
                break
            last = time.time()
            first = first or last
            records += chunk.count(b"\n")
        process.wait()
        if records != count:
            raise CouldNotRun(f"kcat read {records} of {count} records from {topic}")
        seconds = max(last - first, 1e-3)
        return records / seconds, seconds

    def mark_ends(self, topic="activity-updates"):
        """Takes the topic's high watermarks as the offsets `all_committed` waits for (after the last produce)."""
        self.ends = [high for _, high in self.offsets.watermarks(topic, self.partitions)]

    def all_committed(self, topic="activity-updates"):
        """True when the group has committed every partition up to the ends taken by `mark_ends`."""
        committed = self.offsets.committed(topic, self.partitions, timeout_ms=2000)
        return committed is not None and all(c >= end for c, end in zip(committed, self.ends))

    # Worker

    def start_worker(self, kafka_properties=None, count_allocations=False):
        """`fanout run` with the default configuration: only the broker, the app's key and the simulator set
        (and the admin port 0, a free one, so /metrics is reachable on a shared machine). `kafka_properties`
        (librdkafka properties) only for the diagnostic run that says so. With `count_allocations` (and
        scripts/bench's malloc counter built) the worker's heap allocations are counted, to be read after it
        stopped (`allocations()`)."""
        config = {
            "kafka": {"bootstrap_servers": self.bootstrap, **({"properties": kafka_properties} if kafka_properties else {})},
            "apps": [{"bundle_id": APP, "team_id": TEAM, "key_id": KID, "key_path": self.key_file}],
            "apns": {"base_url": self.device_url, "ca_file": self.ca_file},
            "admin": {"port": 0},
        }
        path = os.path.join(self.dir, "worker.json")
        with open(path, "w") as f:
            json.dump(config, f, indent=1)
        self.mark_ends()
        env = None
        self.allocation_report = None
        if count_allocations and self.bench.options.malloc_counter:
            self.allocation_report = os.path.join(self.dir, "worker.allocations")
            env = {"LD_PRELOAD": self.bench.options.malloc_counter, "MALLOC_COUNTER_REPORT": self.allocation_report}
        self.worker = self.bench.procs.start("fanout run", [self.bench.fanout, "run", "--config", path], self.worker_log, env=env)
        self.worker_started = time.time()
        port = wait_for_line(self.worker_log, r'"admin server listening".*?"port":(\d+)', self.worker, 30, "fanout run").group(1)
        self.admin = f"http://127.0.0.1:{port}"

    def metrics(self):
        """Sums of every metric family on the worker's /metrics, plus the labelled series themselves."""
        text = http_get(self.admin + "/metrics").decode()
        sums, series = {}, {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            name = key.split("{", 1)[0]
            try:
                number = float(value)
            except ValueError:
                continue
            sums[name] = sums.get(name, 0.0) + number
            series[key] = number
        return sums, series

    @staticmethod
    def bucket_bound(series, family, quantile):
        """The upper bound (s) of the histogram bucket holding `quantile` of `family`'s observations, all
        labels summed, as Prometheus' buckets allow no finer; None without observations."""
        buckets = {}
        for key, value in series.items():
            if key.startswith(family + "_bucket{"):
                bound = re.search(r'le="([^"]+)"', key).group(1)
                buckets[float(bound)] = buckets.get(float(bound), 0.0) + value
        total = buckets.get(float("inf"), 0.0)
        if total <= 0:
            return None
        return next(bound for bound, count in sorted(buckets.items()) if count >= quantile * total)

    def allocations(self):
        """Heap allocations the stopped worker made in its whole run (None when not counted)."""
        try:
            with open(self.allocation_report) as f:
                return int(f.read().strip())
        except (TypeError, OSError, ValueError):
            return None

    def worker_alive(self):
        return self.worker is not None and self.worker.poll() is None

    def wait_ready(self, tokens, timeout=60):
        """Until the worker owns its partitions and has read every token (each token partition caught up, so
        the engine sends): what a running worker looks like when new events arrive. Returns the seconds taken."""
        wait_for_line(self.worker_log, r'"partitions assigned"', self.worker, timeout, "fanout run (group join)")
        if not wait_until(lambda: self.metrics()[0].get("fanout_token_registry_size", 0) >= tokens, timeout, self,
                          "reading activity-tokens"):
            raise CouldNotRun(f"the worker had not read the {tokens} tokens {timeout} s after it started")
        # Every token read is not yet every partition caught up (the engine hears of it at the partition's end).
        if not wait_until(lambda: self.metrics()[0].get("fanout_partitions_catching_up", 1) == 0, timeout, self,
                          "catching up with activity-tokens"):
            raise CouldNotRun(f"the worker's partitions were still catching up {timeout} s after it started")
        return time.time() - self.worker_started

    def stop_worker(self):
        """SIGTERM; returns (exit code, seconds to stop, CPU seconds used, peak RSS KiB)."""
        cpu = cpu_seconds(self.worker.pid)
        _, hwm = memory_kib(self.worker.pid)
        started = time.time()
        code = self.bench.procs.stop(self.worker)
        return code, time.time() - started, cpu, hwm

    def close(self):
        if self.offsets:
            self.offsets.close()
        for process in (self.worker, self.sim, self.broker):
            if process is not None:
                self.bench.procs.stop(process)


class Sampler(threading.Thread):
    """Every SAMPLE_SECONDS: simulator accepted, worker metrics, worker memory, optionally 'all committed'."""

    def __init__(self, stack, committed=False, metrics=True, interval=SAMPLE_SECONDS):
        super().__init__(daemon=True)
        self.interval = interval
        self.stack, self.watch_commits, self.watch_metrics = stack, committed, metrics
        self.samples = []  # dicts with t, accepted, consumed, decided, delivered, retries, rss, hwm, committed
        self.running = True
        self.error = None

    def run(self):
        while self.running:
            began = time.time()
            try:
                sample = {"t": began, "accepted": self.stack.accepted()}
                if self.watch_metrics and self.stack.admin:
                    sums, series = self.stack.metrics()
                    sample["consumed"] = sums.get("fanout_events_consumed_total", 0)
                    sample["decided"] = sums.get("fanout_event_decisions_total", 0)
                    sample["registry"] = sums.get("fanout_token_registry_size", 0)
                if self.stack.worker is not None:
                    sample["rss"], sample["hwm"] = memory_kib(self.stack.worker.pid)
                if self.watch_commits:
                    sample["committed"] = self.stack.all_committed()
                sample["t"] = (began + time.time()) / 2
                self.samples.append(sample)
            except Exception as error:  # a worker that stopped answering is reported by the workload
                self.error = error
            time.sleep(max(0.0, self.interval - (time.time() - began)))

    def stop(self):
        self.running = False
        self.join(5)
        with open(os.path.join(self.stack.dir, "samples.json"), "w") as f:
            json.dump(self.samples, f)

    def last(self, key, default=0):
        for sample in reversed(self.samples):
            if key in sample:
                return sample[key]
        return default

    def crossing(self, key, value):
        """When `key` first reached `value`, interpolated linearly between the two samples around it."""
        previous = None
        for sample in self.samples:
            if key not in sample:
                continue
            if sample[key] >= value:
                if previous is None or sample[key] == previous[key]:
                    return sample["t"]
                share = (value - previous[key]) / (sample[key] - previous[key])
                return previous["t"] + share * (sample["t"] - previous["t"])
            previous = sample
        return None

    def first_true(self, key):
        for sample in self.samples:
            if sample.get(key):
                return sample["t"]
        return None


def wait_until(condition, timeout, stack, what):
    """Polls `condition` until true; False after `timeout`; CouldNotRun if the worker exited meanwhile."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        if stack.worker is not None and not stack.worker_alive():
            raise CouldNotRun(f"fanout run exited with {stack.worker.returncode} while {what}; see {stack.worker_log}")
        time.sleep(SAMPLE_SECONDS)
    return condition()


# ---------------------------------------------------------------------------------------------
# Data


def token_line(key, index, now):
    return f'{key}\t{{"token":"{index:064x}","app":"{APP}","environment":"production","at":{now - 100}}}\n'


def event_line(key, event_id, timestamp, state, major=True):
    importance = '"importance":"major",' if major else ""
    return (f'{key}\t{{"v":1,"id":"{event_id}","app":"{APP}","activity":"{key}","event":"update",'
            f'"timestamp":{timestamp},{importance}"content_state":{state}}}\n')


def write_lines(path, lines):
    with open(path, "w") as f:
        f.writelines(lines)
    return path


# ---------------------------------------------------------------------------------------------
# The benchmark


class Bench:
    def __init__(self, options):
        self.options = options
        self.fanout = options.fanout
        self.dir = options.dir
        self.sizes = SIZES["quick" if options.quick else "full"]
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        self.procs = Processes(self.dir)
        self.stacks = []    # the running workload's broker/simulator/worker, closed when it ends
        self.rows = []      # report rows
        self.details = []   # (workload, text)
        self.failures = []  # workloads that could not run
        self.results = {}
        self.started = time.time()
        self.deadline = self.started + self.sizes["budget"]

    def remaining(self):
        return self.deadline - time.time()

    def row(self, workload, figure, value, unit, ceiling=None, ceiling_name="", goal=None, goal_text="", higher=True):
        self.rows.append(dict(workload=workload, figure=figure, value=value, unit=unit, ceiling=ceiling,
                              ceiling_name=ceiling_name, goal=goal, goal_text=goal_text, higher=higher))

    def note(self, workload, text):
        self.details.append((workload, text))
        log(f"{workload}: {text}")

    def worker_summary(self, workload, stack, sampler):
        code, stop_seconds, cpu, hwm = stack.stop_worker()
        sums, series = self.final_metrics

        def total(family, label=""):
            return sum(v for k, v in series.items() if k.startswith(family + "{") and label in k)

        errors = {k[k.index("{"):]: int(v) for k, v in series.items() if k.startswith("fanout_apns_errors_total{") and v}
        elapsed = time.time() - stack.worker_started
        stats = stack.sim_stats()
        delivered = total("fanout_apns_sends_total", 'outcome="delivered"')
        retried = total("fanout_apns_sends_total", 'outcome="retry"')
        pauses = self.count_log(stack, "partition paused by backpressure")
        allocator = self.allocator(stack)
        self.note(workload, f"worker ({allocator}): consumed {sums.get('fanout_events_consumed_total', 0):.0f}, delivered {delivered:.0f}, "
                            f"sends retried {retried:.0f}, dead letters {sums.get('fanout_dead_letters_total', 0):.0f}, "
                            f"commits by the last ack {sums.get('fanout_offset_commits_total', 0):.0f}, partition pauses {pauses}; "
                            f"CPU {cpu or 0:.1f} s over {elapsed:.1f} s; peak RSS {(hwm or 0) / 1024:.0f} MiB; "
                            f"SIGTERM → exit {code} in {stop_seconds:.1f} s")
        if errors:
            self.note(workload, f"worker's fanout_apns_errors_total: {errors}")
        self.note(workload, f"simulator: {stats['requests']} requests, responses {stats['responses']}, "
                            f"connections accepted {stats['connectionsAccepted']}")

    @staticmethod
    def count_log(stack, message):
        with open(stack.worker_log, errors="replace") as f:
            return sum(1 for line in f if f'"msg":"{message}"' in line)

    @staticmethod
    def allocator(stack):
        """The heap allocator the worker said it runs on ("worker started" line): jemalloc in a release build."""
        with open(stack.worker_log, errors="replace") as f:
            for line in f:
                found = re.search(r'"msg":"worker started".*?"allocator":"(\w+)"', line)
                if found:
                    return found.group(1)
        return "allocator not logged"

    def snapshot_metrics(self, stack):
        try:
            self.final_metrics = stack.metrics()
            self.final_series = self.final_metrics[1]
        except Exception:
            self.final_metrics, self.final_series = ({}, {}), {}

    def run_workload(self, number, tag, name, function):
        if str(number) not in self.options.workloads:
            return
        log(f"workload {tag}: {name}")
        try:
            function()
        except CouldNotRun as error:
            self.failures.append(f"{tag} {name}: {error}")
            self.note(tag, f"COULD NOT RUN: {error}")
        except Exception as error:  # a bug here or a part that stopped answering: report it, run the rest
            traceback.print_exc()
            self.failures.append(f"{tag} {name}: {type(error).__name__}: {error}")
            self.note(tag, f"COULD NOT RUN: {type(error).__name__}: {error}")
        finally:
            while self.stacks:
                self.stacks.pop().close()

    # Ceilings and workload 1 share one broker and simulator --------------------------------------

    def send_heavy(self, fetch_wait_ms=None):
        """Pre-loaded before `fanout run` starts, as after a restart with a backlog. The default run also
        measures the ceilings on this broker and simulator; with `fetch_wait_ms` (diagnostic, not the default
        configuration) the worker sets librdkafka's fetch.wait.max.ms, which the mock broker waits out on
        each fetch that finds nothing, such as the first one after a partition is resumed."""
        label = "1 send-heavy" if fetch_wait_ms is None else f"1b send-heavy, fetch.wait.max.ms={fetch_wait_ms} (not default)"
        tag = "w1" if fetch_wait_ms is None else "w1b"
        n = self.sizes["w1"]
        stack = Stack(self, tag + "-send-heavy", self.sizes["partitions"])
        now = int(time.time())
        stack.preload("activity-tokens", write_lines(os.path.join(stack.dir, "tokens.txt"),
                                                     (token_line(f"a1-{i}", i, now) for i in range(n))), n)
        stack.preload("activity-updates", write_lines(os.path.join(stack.dir, "events.txt"),
                      (event_line(f"a1-{i}", f"e1-{i}", now, '{"status":"ready"}') for i in range(n))), n)
        if fetch_wait_ms is None:
            self.ceilings(stack, n)
        baseline = stack.accepted()
        stack.start_worker(kafka_properties={"fetch.wait.max.ms": str(fetch_wait_ms)} if fetch_wait_ms else None,
                           count_allocations=fetch_wait_ms is None)
        sampler = Sampler(stack)
        sampler.start()
        finished = wait_until(lambda: sampler.last("accepted") - baseline >= n, self.sizes["w1_timeout"],
                              stack, "sending workload 1")
        sampler.stop()
        self.snapshot_metrics(stack)
        sent = sampler.last("accepted") - baseline
        first = sampler.crossing("accepted", baseline + 1)
        last = sampler.crossing("accepted", baseline + sent)
        rate = (sent - 1) / (last - first) if first and last and last > first else 0.0
        ten, ninety = sampler.crossing("accepted", baseline + n * 0.1), sampler.crossing("accepted", baseline + n * 0.9)
        registry = sampler.crossing("registry", n)
        if finished:
            self.note(tag, f"first ack {first - stack.worker_started:.1f} s after `fanout run` started (group join and "
                            f"token catch-up included; every token read after "
                            f"{(registry - stack.worker_started) if registry else float('nan'):.1f} s), the {n}th "
                            f"{last - first:.2f} s after the first; 10 % → 90 % of the sends at {n * 0.8 / (ninety - ten):.0f}/s")
        else:
            self.note(tag, f"did not finish: {sent} of {n} acked after {time.time() - stack.worker_started:.0f} s")
        self.row(label, "`fanout run` start → first ack (backlog waiting)", first - stack.worker_started if first else None, "s")
        if fetch_wait_ms is None:
            self.w1_rate = rate
        self.results[tag] = dict(activities=n, acked=sent, sends_per_second=rate, finished=finished)
        self.worker_summary(tag, stack, sampler)
        if fetch_wait_ms is None:
            self.bracket_h2load(stack)
        h2 = self.results.get("h2load")
        self.row(label, f"acked sends/s ({n // 1000}k activities × 1 major)", rate, "/s",
                 h2, "h2load", 25_000, "≥ 25k/s")
        self.row(label, "sends/s ÷ h2load", rate / h2 if h2 else None, "×", None, "", 0.5, "≥ 0.5")
        allocations = stack.allocations()
        if allocations is not None and finished:
            # Everything the worker did for each activity: its token record read, its event read, decoded and
            # decided, the send built, on the wire and answered, the ack and the commit, plus startup.
            per_event = allocations / n
            self.results[tag]["allocations_per_event"] = per_event
            self.row(label, "heap allocations per event, end to end", per_event, "allocations")
            self.note(tag, f"worker heap allocations: {allocations} in its whole run ({per_event:.1f} per activity: "
                           f"token record, event, send and answer, commit, startup)")

    def bracket_h2load(self, stack):
        """h2load once more, on the same simulator, once workload 1's worker has stopped: the ceiling is the
        mean of the runs before and after it. This machine's speed drifts by tens of per cent within a
        minute (h2load alone has given 37–134k in one hour); a ceiling read on both sides of the
        measured window drifts with it instead of with one side."""
        before = self.results["h2load_before"]
        try:
            after = self.h2load_ceiling(stack, "after workload 1's worker stopped")
        except CouldNotRun as error:
            self.note("ceilings", f"h2load after workload 1 could not run, the ceiling is the run before it alone: {error}")
            return
        self.results["h2load_after"] = after
        self.results["h2load"] = (before + after) / 2
        self.h2load_row["value"] = self.results["h2load"]
        self.note("ceilings", f"h2load ceiling = mean of the runs before ({before / 1000:.1f}k/s) and after "
                              f"({after / 1000:.1f}k/s) workload 1: {self.results['h2load'] / 1000:.1f}k/s")

    def h2load_ceiling(self, stack, when):
        """h2load against the stack's simulator, as Benchmarks/apns-sim-bench.sh: 2xx answers per second."""
        body = os.path.join(stack.dir, "body.json")
        with open(body, "w") as f:
            f.write('{"aps":{"timestamp":%d,"event":"update","content-state":{"status":"ready"}}}' % int(time.time()))
        uris = os.path.join(stack.dir, "uris.txt")
        write_lines(uris, (f"{stack.device_url}/3/device/{i + (1 << 60):064x}\n" for i in range(1000)))
        requests = self.sizes["h2load"]
        done = subprocess.run(["h2load", "-n", str(requests), "-c", "4", "-m", "100", "-t", "1", "-i", uris, "-d", body,
                               "-H", f"authorization: bearer {stack.jwt}", "-H", "apns-push-type: liveactivity",
                               "-H", f"apns-topic: {APP}.push-type.liveactivity", "-H", "apns-priority: 5"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        text = done.stdout.decode(errors="replace")
        match = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", text)
        ok = re.search(r"status codes: (\d+) 2xx", text)
        if done.returncode != 0 or not match or not ok or int(ok.group(1)) < requests * 0.99:
            raise CouldNotRun(f"h2load against fanout apns-sim failed: {text[-800:]}")
        seconds = float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)
        succeeded = int(ok.group(1))
        self.note("ceilings", f"h2load {when}: {requests} requests, 4 connections × 100 streams, {succeeded} 2xx "
                              f"({requests - succeeded} errored), in {seconds:.2f} s = {succeeded / seconds / 1000:.1f}k/s")
        return succeeded / seconds  # 2xx only: h2load's own req/s counts errored requests too

    def ceilings(self, stack, records):
        """h2load, libcurl and kcat against this workload's simulator and topic, before its worker starts."""
        rate, seconds = stack.kcat_ceiling("activity-updates", records)
        prompt_rate, prompt_seconds = stack.kcat_ceiling("activity-updates", records, fetch_wait_ms=10)
        self.results["kcat_w1"] = rate
        self.results["kcat_w1_fetch_wait_10"] = prompt_rate
        self.note("ceilings", f"kcat read the {records} pre-loaded records of workload 1 in {seconds:.2f} s with librdkafka's "
                              f"defaults, {prompt_seconds:.2f} s with fetch.wait.max.ms=10 (first to last output)")
        rate_before = self.h2load_ceiling(stack, "before workload 1's worker starts")
        self.results["h2load_before"] = rate_before
        self.results["h2load"] = rate_before  # until the second run after workload 1 (send_heavy)
        curl_rate = None
        if self.options.curl_ceiling:
            done = subprocess.run([self.options.curl_ceiling, f"{stack.device_url}/3/device/{(1 << 61):064x}", stack.ca_file,
                                   str(self.sizes["curl"]), "100", f"authorization: bearer {stack.jwt}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            text = done.stdout.decode(errors="replace")
            match = re.search(r"(\d+) failed, ([\d.]+) s, (\d+) requests/s", text)
            if done.returncode != 0 or not match:
                raise CouldNotRun(f"curl-ceiling failed: {text[-500:]}")
            curl_rate = float(match.group(3))
            self.note("ceilings", f"libcurl (curl-ceiling.c, 1 connection × 100 streams): {self.sizes['curl']} requests, "
                                  f"{match.group(1)} failed, in {match.group(2)} s")
        self.results["curl"] = curl_rate
        self.row("ceilings", "h2load → fanout apns-sim (4 × 100 streams; mean)", self.results["h2load"], "req/s")
        self.h2load_row = self.rows[-1]  # its value becomes the mean of both runs once workload 1 is done
        if curl_rate is not None:
            self.row("ceilings", "libcurl → fanout apns-sim (1 conn × 100 streams)", curl_rate, "req/s")
        self.row("ceilings", f"kcat ← fanout broker ({stack.partitions} partitions, 1 consumer)", rate, "records/s")
        self.row("ceilings", "kcat, fetch.wait.max.ms=10 (as Fanout's default)", prompt_rate, "records/s")

    # Workload 2 --------------------------------------------------------------------------------------

    def coalescing(self):
        """Produced as fast as kcat can into a worker that is running (group joined, tokens read): the
        engine's steady intake. Pre-loaded before the start, the events would wait for the token
        partitions to catch up (workload 1 shows that start-up) and coalesce 20:1 instead of ≈10:1."""
        activities, per = self.sizes["w2"]
        n = activities * per
        stack = Stack(self, "w2-coalescing", self.sizes["partitions"])
        now = int(time.time())
        stack.preload("activity-tokens", write_lines(os.path.join(stack.dir, "tokens.txt"),
                                                     (token_line(f"a2-{i}", i, now) for i in range(activities))), activities)
        # Round by round: each activity's progress ticks are spread through its partition, timestamps rising.
        events = write_lines(os.path.join(stack.dir, "events.txt"),
                             (event_line(f"a2-{i}", f"e2-{i}-{k}", now - per + k, '{"percent":%d}' % (k * 100 // per), major=False)
                              for k in range(1, per + 1) for i in range(activities)))
        stack.start_worker()
        ready = stack.wait_ready(activities)
        sampler = Sampler(stack, interval=0.05)  # the burst lasts a few seconds: sample finer
        sampler.start()
        produce_started = time.time()
        stack.preload("activity-updates", events, n)
        produced = time.time()
        stack.mark_ends()
        sampler.watch_commits = True
        finished = wait_until(lambda: sampler.first_true("committed") is not None, self.sizes["w2_timeout"],
                              stack, "consuming workload 2")
        sampler.stop()
        self.snapshot_metrics(stack)
        first = sampler.crossing("consumed", 1)
        read_all = sampler.crossing("consumed", n)
        decided_all = sampler.crossing("decided", n)
        committed = sampler.first_true("committed")
        consumed_rate = (n - 1) / (read_all - first) if first and read_all and read_all > first else 0.0
        resolved_rate = (n - 1) / (decided_all - first) if first and decided_all and decided_all > first else 0.0
        settle = committed - produced if committed else None
        pushes = sampler.last("accepted")
        self.worker_summary("w2", stack, sampler)
        kcat_rate, seconds = stack.kcat_ceiling("activity-updates", n)
        self.row("2 coalescing", f"events/s consumed + fed to the engine ({activities // 1000}k × {per})", consumed_rate,
                 "/s", kcat_rate, "kcat", 100_000, "≥ 100k/s")
        self.row("2 coalescing", "events/s resolved (sent or coalesced)", resolved_rate, "/s", kcat_rate, "kcat")
        self.row("2 coalescing", "last event produced → all committed", settle, "s", None, "",
                 MIN_INTERVAL + COMMIT_INTERVAL, "≤ min_interval + 1 s", higher=False)
        self.row("2 coalescing", "events per accepted push", n / pushes if pushes else None, "×", None, "", None, "≈ 10")
        self.note("w2", f"worker ready (group joined, {activities} tokens read) {ready:.1f} s after it started; then kcat "
                        f"produced {n} events in {produced - produce_started:.2f} s ({n / (produced - produce_started):.0f}/s)")
        if finished:
            self.note("w2", f"the worker read them {read_all - first:.2f} s after its first, resolved all "
                            f"{decided_all - first:.2f} s after it; every offset committed (OffsetFetch of group 'fanout') "
                            f"{committed - produced:.2f} s after kcat finished; {pushes} pushes accepted")
        else:
            self.note("w2", f"did not finish: {sampler.last('consumed'):.0f} of {n} read, not all committed")
        self.note("w2", f"kcat read the same {n} records (after the worker stopped) in {seconds:.2f} s (first to last output)")
        self.results["w2"] = dict(events=n, consumed_per_second=consumed_rate, resolved_per_second=resolved_rate,
                                  produced_to_committed_seconds=settle, pushes=pushes, finished=finished, ready_seconds=ready)

    # Workload 3 --------------------------------------------------------------------------------------

    def latency(self):
        """Paced at half of workload 1's rate into a running worker, on `w3_partitions` partitions. The Kafka
        path's own latency is measured first, on a stack of its own with no worker: the same pacing, read by
        a kcat follower with fetch.wait.max.ms=10 as Fanout's default (the mock broker answers a fetch that
        finds nothing only after that wait). Apart, so that neither shares the two cores with the other."""
        label, tag = "3 latency", "w3"
        measured = getattr(self, "w1_rate", 0.0)
        rate = int(measured / 2) if measured > 0 else self.options.latency_rate
        # Every event is a new activity with its token pre-loaded: the tokens of the run must fit what the
        # mock keeps of a partition (≈31k token records under its ≈5 MiB), so a faster workload 1 pays
        # for its higher pace with a shorter run (at most w3_seconds, at least 2 s).
        fits = int(0.9 * MOCK_TOKENS_PER_PARTITION * self.sizes["w3_partitions"] / max(rate, 1))
        seconds = max(2, min(self.sizes["w3_seconds"], fits))
        n = rate * seconds
        kafka = self.kafka_path_latency(tag, rate, n, seconds)
        stack = Stack(self, tag + "-latency", self.sizes["w3_partitions"], delivery_log=True)
        now = int(time.time())
        stack.preload("activity-tokens", write_lines(os.path.join(stack.dir, "tokens.txt"),
                                                     (token_line(f"a3-{i}", i, now) for i in range(n))), n)
        stack.start_worker()
        stack.wait_ready(n)
        baseline = stack.accepted()
        source = f"half of workload 1's {measured:.0f}/s" if measured > 0 else "workload 1 did not run: --latency-rate"
        self.note(tag, f"paced producer: {rate} events/s ({source}) for {seconds} s on {self.sizes['w3_partitions']} "
                       f"partitions, each a new activity whose token the running worker has read")
        producer_log = os.path.join(stack.dir, "producer.log")
        producer = self.start_paced_producer(stack, rate, n, producer_log)
        if not wait_until(lambda: producer.poll() is not None, seconds + 30, stack, "producing workload 3"):
            raise CouldNotRun("the paced producer did not finish")
        if producer.returncode != 0:
            raise CouldNotRun(f"the paced producer failed; see {producer_log}")
        self.procs.stop(producer)
        with open(producer_log) as f:
            self.note(tag, f"producer: {f.read().strip()}")
        finished = wait_until(lambda: stack.accepted() - baseline >= n, 30, stack, "sending workload 3")
        self.snapshot_metrics(stack)
        round_trip = {q: Stack.bucket_bound(self.final_series, "fanout_apns_latency_seconds", q) for q in (0.5, 0.99)}
        http_post(stack.control_url + "/flush")
        latencies = []
        by_second = {}  # second of the paced run (by the event's stamp) → its latencies
        with open(stack.delivery_log) as f:
            for line in f:
                record = json.loads(line)
                state = json.loads(record["aps"]).get("content-state", {})
                if "sent_ms" in state:
                    latency = record["time"] * 1000 - state["sent_ms"]
                    latencies.append(latency)
                    by_second.setdefault(int(state["sent_ms"] // 1000), []).append(latency)
        latencies.sort()
        seconds_p99 = [percentile(sorted(values), 99) for _, values in sorted(by_second.items())]
        p = {r: percentile(latencies, r) for r in (50, 90, 99, 100)}
        self.row(label, f"event → ack p99 (paced {rate / 1000:.1f}k/s)", p[99], "ms",
                 kafka.get("p99"), "kcat", 50, "≤ 50 ms", higher=False)
        self.row(label, "event → ack p50", p[50], "ms", kafka.get("p50"), "kcat")
        self.row(label, "event → ack max", p[100], "ms", kafka.get("p100"), "kcat")
        self.note(tag, f"{len(latencies)} of {n} events measured (producer stamp → simulator arrival)"
                        + ("" if finished else "; NOT all delivered within 30 s of the last event"))
        self.note(tag, "p50 / p90 / p99 / max: " + " / ".join(f"{p[r]:.1f}" if latencies else "-" for r in (50, 90, 99, 100))
                  + " ms; the Kafka path alone (its own run, a kcat consumer following the topic, "
                  + f"{kafka.get('count', 0)} events): "
                  + " / ".join(f"{kafka[f'p{r}']:.1f}" if kafka.get(f"p{r}") is not None else "-" for r in (50, 90, 99, 100)) + " ms")
        if round_trip[0.99] is not None:
            self.note(tag, "of which the worker's APNs round trip (send → answer, fanout_apns_latency_seconds): "
                           f"p50 ≤ {round_trip[0.5] * 1000:g} ms, p99 ≤ {round_trip[0.99] * 1000:g} ms (bucket bounds)")
        if seconds_p99:
            self.note(tag, "p99 of the events stamped in each second of the run: "
                      + " ".join(f"{value:.0f}" for value in seconds_p99) + " ms")
        self.results[tag] = dict(rate=rate, events=n, measured=len(latencies), p50=p[50], p90=p[90], p99=p[99], max=p[100],
                                  p99_by_second=seconds_p99, kafka=kafka)
        self.worker_summary(tag, stack, None)

    def start_paced_producer(self, stack, rate, n, log_path):
        """`paced_producer` as a process of its own: `n` events at `rate`/s into the stack's activity-updates."""
        return self.procs.start("paced producer", [sys.executable, os.path.abspath(__file__), "--paced-producer",
                                                   stack.bootstrap, str(rate), str(n)], log_path)

    def kafka_path_latency(self, tag, rate, n, seconds):
        """The ceiling of workload 3: a fresh broker, the paced producer and a kcat follower, no worker."""
        stack = Stack(self, tag + "-kafka-path", self.sizes["w3_partitions"])
        try:
            follower_log = os.path.join(stack.dir, "kafka-latency.json")
            follower = self.procs.start("kcat latency follower", [sys.executable, os.path.abspath(__file__), "--follow-latency",
                                                                  stack.bootstrap, str(n), "10"], follower_log)
            time.sleep(1)  # the follower's first fetch
            producer = self.start_paced_producer(stack, rate, n, os.path.join(stack.dir, "producer.log"))
            produced = wait_until(lambda: producer.poll() is not None, seconds + 30, stack, "producing workload 3's Kafka path")
            wait_until(lambda: follower.poll() is not None, 10, stack, "following the topic")
            self.procs.stop(producer)
            self.procs.stop(follower)
            if not produced or producer.returncode != 0:
                raise CouldNotRun(f"the paced producer of the Kafka path did not finish; see {stack.dir}/producer.log")
            try:
                with open(follower_log) as f:
                    return json.loads(f.read())
            except ValueError:
                return {}
        finally:
            self.stacks.remove(stack)
            stack.close()

    # Workload 5 --------------------------------------------------------------------------------------

    def assignment(self):
        """A new assignment of 32 partitions, each with its token backlog (issue 12: flowing within 2 s, no
        partition waiting on another's token catch-up): tokens and one event per activity pre-loaded, then
        `fanout run` starts; from its "partitions assigned" line to each partition's first and last ack."""
        n, partitions = self.sizes["w5"], 32
        stack = Stack(self, "w5-assignment", partitions, delivery_log=True)
        now = int(time.time())
        stack.preload("activity-tokens", write_lines(os.path.join(stack.dir, "tokens.txt"),
                                                     (token_line(f"a5-{i}", i + 1, now) for i in range(n))), n)
        stack.preload("activity-updates", write_lines(os.path.join(stack.dir, "events.txt"),
                      (event_line(f"a5-{i}", f"e5-{i}", now, '{"s":1}') for i in range(n))), n)
        baseline = stack.accepted()
        stack.start_worker()
        finished = wait_until(lambda: stack.accepted() - baseline >= n, 60, stack, "sending workload 5")
        assigned = None
        with open(stack.worker_log, errors="replace") as f:
            for line in f:
                if '"msg":"partitions assigned"' in line and "activity-updates/" in line:
                    stamp = json.loads(line)["time"].replace("Z", "+00:00")
                    assigned = datetime.datetime.fromisoformat(stamp).timestamp()
                    break
        http_post(stack.control_url + "/flush")  # the simulator buffers its delivery log
        first, last = {}, {}
        with open(stack.delivery_log) as f:
            for line in f:
                delivery = json.loads(line)
                # kcat keys records with librdkafka's default partitioner: CRC32 of the key.
                partition = zlib.crc32(f"a5-{int(delivery['token'], 16) - 1}".encode()) % partitions
                t = delivery["time"]
                first[partition] = min(first.get(partition, t), t)
                last[partition] = max(last.get(partition, t), t)
        if assigned is None or not first:
            raise CouldNotRun(f"no assignment logged or nothing delivered; see {stack.worker_log}")
        firsts = sorted(t - assigned for t in first.values())
        label = "5 new assignment"
        self.row(label, f"partitions delivering (of {partitions})", len(first), "", None, "", partitions, f"= {partitions}")
        self.row(label, "assignment → every partition's first ack", firsts[-1], "s", None, "", 2.0, "≤ 2 s", higher=False)
        self.note("w5", f"{n} activities on {partitions} partitions ({n // partitions} tokens each); assignment → first ack per "
                        f"partition: min {firsts[0]:.2f} s, median {firsts[len(firsts) // 2]:.2f} s, max {firsts[-1]:.2f} s; "
                        f"→ last ack {max(last.values()) - assigned:.2f} s" + ("" if finished else " (did NOT finish)"))
        self.results["w5"] = dict(partitions=len(first), first_ack_max=firsts[-1], first_ack_min=firsts[0], finished=finished)
        self.snapshot_metrics(stack)
        self.worker_summary("w5", stack, None)

    # Workload 4 --------------------------------------------------------------------------------------

    def million(self):
        n = self.sizes["w4"]
        stack = Stack(self, "w4-many-activities", self.sizes["partitions"])
        now = int(time.time())
        stack.preload("activity-tokens", write_lines(os.path.join(stack.dir, "tokens.txt"),
                                                     (token_line(f"a{i}", i, now) for i in range(n))), n)
        stack.preload("activity-updates", write_lines(os.path.join(stack.dir, "events.txt"),
                      (event_line(f"a{i}", f"e{i}", now, '{"s":1}') for i in range(n))), n)
        for name in ("tokens.txt", "events.txt"):
            os.remove(os.path.join(stack.dir, name))
        baseline = stack.accepted()
        stack.start_worker()
        sampler = Sampler(stack)
        sampler.start()
        budget = max(30, self.remaining() - 30)
        finished = wait_until(lambda: sampler.last("accepted") - baseline >= n, budget, stack, "sending workload 4")
        sampler.stop()
        self.snapshot_metrics(stack)
        sent = sampler.last("accepted") - baseline
        marks = [sampler.crossing("accepted", baseline + max(1, int(sent * q / 4))) for q in range(5)]
        quarter = sent / 4
        q1 = quarter / (marks[1] - marks[0]) if None not in marks[:2] and marks[1] > marks[0] else 0.0
        q4 = quarter / (marks[4] - marks[3]) if None not in marks[3:] and marks[4] > marks[3] else 0.0
        hwm = max((s.get("hwm") or 0) for s in sampler.samples) if sampler.samples else 0
        h2 = self.results.get("h2load")
        self.row("4 1M activities", f"worker peak RSS (VmHWM, {n // 1000}k activities + tokens)", hwm / 1024, "MiB",
                 None, "", 512, "≤ 512 MiB", higher=False)
        self.row("4 1M activities", "acked sends/s, first quarter", q1, "/s", h2, "h2load")
        self.row("4 1M activities", "acked sends/s, last quarter", q4, "/s", h2, "h2load")
        self.row("4 1M activities", "last quarter ÷ first quarter", q4 / q1 if q1 else None, "×", None, "", 0.8, "≥ 0.8")
        rss_at = {q: next((s.get("rss") for s in sampler.samples if s["t"] >= marks[q]), None) for q in range(5) if marks[q]}
        self.note("w4", f"{sent} of {n} acked in {(marks[4] or 0) - (marks[0] or 0):.1f} s after the first"
                        + ("" if finished else f" (did NOT finish within {budget:.0f} s)")
                        + "; RSS at 0/25/50/75/100 %: " + " / ".join(f"{(v or 0) / 1024:.0f}" for v in rss_at.values()) + " MiB")
        self.results["w4"] = dict(activities=n, acked=sent, q1=q1, q4=q4, peak_rss_mib=hwm / 1024, finished=finished)
        self.worker_summary("w4", stack, sampler)

    # Report ------------------------------------------------------------------------------------------

    def report(self, load_before, load_after):
        def number(value, unit):
            if value is None:
                return "—"
            if unit in ("/s", "req/s", "records/s"):
                gap = "" if unit.startswith("/") else " "
                return f"{value / 1000:.1f}k{gap}{unit}" if value >= 1000 else f"{value:.0f}{gap}{unit}"
            if unit == "×":
                return f"{value:.2f}×"
            if unit == "ms":
                return f"{value:.1f} ms"
            if unit == "s":
                return f"{value:.2f} s"
            if unit == "MiB":
                return f"{value:.0f} MiB"
            if unit == "allocations":
                return f"{value:.1f}"
            return f"{value} {unit}"

        header = ("figure", "measured", "ceiling", "÷ ceiling", "goal", "vs goal")
        lines = []
        mode = "quick (--quick)" if self.options.quick else "full"
        started = time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(self.started))
        lines.append(f"fanout bench — {mode} run started {started}, {os.cpu_count()} cores, "
                     f"release build {self.fanout}")
        lines.append(f"load average before: {load_before}   after: {load_after}")
        lines.append("One run on a shared, noisy machine: read orders of magnitude and ratios, not single figures.")
        lines.append("Fanout runs with its default configuration (only broker, app key and simulator URL/CA set).")
        table = []
        current = None
        for r in self.rows:
            if r["workload"] != current:
                current = r["workload"]
                table.append((f"[{current}]", "", "", "", "", ""))
            ratio = r["value"] / r["ceiling"] if r["value"] is not None and r["ceiling"] else None
            verdict = ""
            if r["goal"] is not None:
                if r["value"] is None:
                    verdict = "MISS (no figure)"
                else:
                    met = r["value"] >= r["goal"] if r["higher"] else r["value"] <= r["goal"]
                    share = (r["value"] / r["goal"]) if r["higher"] else (r["goal"] / r["value"] if r["value"] else float("inf"))
                    verdict = f"{'pass' if met else 'MISS'} ({share:.2f}× goal)"
            table.append(("  " + r["figure"], number(r["value"], r["unit"]),
                          f"{number(r['ceiling'], r['unit'])} {r['ceiling_name']}" if r["ceiling"] else "",
                          f"{ratio:.2f}×" if ratio is not None else "", r["goal_text"], verdict))
        widths = [max(len(row[i]) for row in table + [header]) for i in range(6)]
        lines.append("")
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        for row in table:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        lines.append("")
        lines.append("details:")
        for workload, text in self.details:
            lines.append(f"  {workload}: {text}")
        for failure in self.failures:
            lines.append(f"COULD NOT RUN: {failure}")
        lines.append(f"wall time {time.time() - self.started:.0f} s (build excluded)")
        return "\n".join(lines)


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def paced_producer(bootstrap, rate, count):
    """Writes `count` events at `rate`/s into kcat -P, each stamped (content_state.sent_ms) as it is handed over,
    in batches of about a millisecond's events."""
    kcat = subprocess.Popen(["kcat", "-P", "-b", bootstrap, "-t", "activity-updates", "-K", "\t"], stdin=subprocess.PIPE)
    now = int(time.time())
    started = time.time()
    sent = 0
    late = 0.0
    while sent < count:
        due = min(count, int((time.time() - started) * rate) + 1)
        if due > sent:
            stamp = time.time() * 1000
            chunk = "".join(event_line(f"a3-{i}", f"e3-{i}", now, '{"status":"ready","sent_ms":%.3f}' % stamp)
                            for i in range(sent, due))
            kcat.stdin.write(chunk.encode())
            kcat.stdin.flush()
            sent = due
            # A write blocks while kcat is behind: lateness counts from the last event's due time.
            late = max(late, time.time() - (started + (sent - 1) / rate))
        # Handed over in batches of the events due each millisecond or more (≈25 at 25k/s): event by
        # event, the producer and kcat took ≈0.8 of a core in write calls, a share the worker under test lost.
        time.sleep(max(0.001, started + sent / rate - time.time()))
    kcat.stdin.close()
    code = kcat.wait()
    seconds = time.time() - started
    print(f"{sent} events in {seconds:.2f} s = {sent / seconds:.0f}/s through kcat -P (default linger), "
          f"at most {late * 1000:.0f} ms behind schedule; kcat exit {code}")
    return 0 if code == 0 else 1


def percentile(sorted_values, rank):
    """Nearest-rank percentile (rank 0...100) of an ascending list, or None when it is empty."""
    if not sorted_values:
        return None
    position = int(len(sorted_values) * rank / 100 + 0.999999) - 1
    return sorted_values[min(len(sorted_values) - 1, max(0, position))]


def follow_latency(bootstrap, count, fetch_wait_ms):
    """The Kafka path's own latency: a kcat consumer (no group; fetch.wait.max.ms as the worker's default) reads
    the paced events as they come; each line's arrival here minus its sent_ms. Prints JSON percentiles (ms)."""
    extra = ["-X", f"fetch.wait.max.ms={fetch_wait_ms}"] if fetch_wait_ms else []
    kcat = subprocess.Popen(["kcat", "-C", "-b", bootstrap, "-t", "activity-updates", "-o", "beginning", "-c", str(count),
                             "-q", "-u", "-f", "%s\\n"] + extra, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    pattern = re.compile(rb'"sent_ms":([0-9.]+)')
    latencies = []
    for line in kcat.stdout:
        arrived = time.time() * 1000
        match = pattern.search(line)
        if match:
            latencies.append(arrived - float(match.group(1)))
    kcat.wait()
    latencies.sort()
    print(json.dumps({"count": len(latencies), **{f"p{r}": percentile(latencies, r) for r in (50, 90, 99, 100)}}))
    return 0 if len(latencies) == count else 1


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--paced-producer":
        return paced_producer(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if len(sys.argv) == 5 and sys.argv[1] == "--follow-latency":
        return follow_latency(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    parser = argparse.ArgumentParser(description="Fanout's benchmark (use scripts/bench).")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fanout", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--curl-ceiling")
    parser.add_argument("--malloc-counter", help="Benchmarks/malloc-counter built as a shared library: workload 1 counts the worker's allocations")
    parser.add_argument("--workloads", default="12354")
    parser.add_argument("--latency-rate", type=int, default=2000, help="workload 3's rate when workload 1 did not run")
    options = parser.parse_args()

    def interrupted(number, _frame):
        # Once: Ctrl-C reaches this process and scripts/bench's trap sends SIGTERM too; the second must not
        # interrupt the orderly stop of the processes.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted(f"signal {number}")

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    bench = Bench(options)
    load_before = load_average()
    log(f"load average {load_before}; results in {options.dir}")
    code = 0
    try:
        bench.run_workload(1, "w1", "send-heavy, with the ceilings", bench.send_heavy)
        bench.run_workload(2, "w2", "coalescing", bench.coalescing)
        bench.run_workload(3, "w3", "latency", bench.latency)
        bench.run_workload(5, "w5", "a new assignment of 32 partitions", bench.assignment)
        bench.run_workload(4, "w4", "many activities", bench.million)
    except Interrupted as why:
        log(f"interrupted ({why}): stopping every process")
        code = 130
    finally:
        bench.procs.stop_all()
    text = bench.report(load_before, load_average())
    print(text)
    with open(os.path.join(options.dir, "report.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(options.dir, "results.json"), "w") as f:
        json.dump(dict(results=bench.results, rows=bench.rows, failures=bench.failures), f, indent=1)
    if code:
        return code
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
