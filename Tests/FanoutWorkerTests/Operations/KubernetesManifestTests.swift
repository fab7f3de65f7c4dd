import FanoutCrypto
import Foundation
import Testing
@testable import FanoutKafka
@testable import FanoutWorker

/// deploy/kubernetes/ against the worker's own code: the ConfigMap's `fanout.json` and the pod's
/// `FANOUT_*` variables go through `FanoutConfiguration.load`, and the manifests must agree with what
/// it loaded (port, host, shutdown timeout, key paths, group, topic). `scripts/check-deploy` runs this
/// beside its Python structural check; nothing here needs a cluster.
@Suite struct KubernetesManifestTests {
    static let folder = DeployFilesTests.root.appendingPathComponent("deploy/kubernetes")

    static func object(_ file: String) throws -> YAMLNode {
        let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
        return try #require(try YAMLSubset.documents(text).first, "\(file) holds no object")
    }

    static func named(_ name: String, in list: YAMLNode?) throws -> YAMLNode {
        try #require(list?.items.first { $0["name"]?.string == name }, "no item named \(name)")
    }

    struct Pod {
        var statefulSet: YAMLNode
        var spec: YAMLNode { statefulSet.at("spec", "template", "spec")! }
        var worker: YAMLNode { spec["containers"]!.items.first { $0["name"]?.string == "fanout" }! }
        var name: String { statefulSet.at("metadata", "name")!.string! + "-0" }

        /// The worker's environment as the kubelet would set it for the first pod.
        func environment() throws -> [String: String] {
            var environment: [String: String] = [:]
            for variable in worker["env"]?.items ?? [] {
                let key = try #require(variable["name"]?.string)
                if let value = variable["value"]?.string {
                    environment[key] = value
                } else if variable.at("valueFrom", "fieldRef", "fieldPath")?.string == "metadata.name" {
                    environment[key] = name
                } else {
                    environment[key] = "from-a-secret"   // a secretKeyRef: any non-empty value
                }
            }
            return environment
        }

        func mountPath(of volume: String, in container: YAMLNode) -> String? {
            container["volumeMounts"]?.items.first { $0["name"]?.string == volume }?["mountPath"]?.string
        }
    }

    static func pod() throws -> Pod {
        let statefulSet = try object("statefulset.yaml")
        try #require(statefulSet["kind"]?.string == "StatefulSet")
        try #require(statefulSet.at("spec", "template", "spec", "containers")?.items.contains { $0["name"]?.string == "fanout" } == true)
        return Pod(statefulSet: statefulSet)
    }

    /// A temporary directory standing for the worker's key mount; removed with the last reference.
    final class Scratch {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-k8s-\(UUID().uuidString)").path
        init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    struct Loaded {
        var configuration: FanoutConfiguration
        var keyDirectory: Scratch
    }

    /// Loads the ConfigMap's `fanout.json` with the pod's variables (plus `extra`) through the worker's
    /// loader. The key directory the worker mounts is replaced by a temporary one holding a real P-256
    /// key, mode 0400, for each item of the Secret: a key_path outside that mount stays unreplaced
    /// and the loader refuses it as missing.
    static func load(extra: [String: String] = [:]) throws -> Loaded {
        let pod = try pod()
        let keysMount = try #require(pod.mountPath(of: "keys", in: pod.worker))
        let secret = try #require(pod.spec["volumes"]?.items.first { $0["secret"] != nil }?["secret"])
        let scratch = try Scratch()
        let directory = scratch.path
        for item in secret["items"]?.items ?? [] {
            let path = directory + "/" + (try #require(item["path"]?.string))
            try P256PrivateKey.generate().pemPKCS8().write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o400], ofItemAtPath: path)
        }
        let json = try #require(try object("configmap.yaml").at("data", "fanout.json")?.string)
        let file = directory + "/fanout.json"
        try json.replacingOccurrences(of: "\"\(keysMount)/", with: "\"\(directory)/").write(toFile: file, atomically: true, encoding: .utf8)
        let environment = try pod.environment().merging(extra) { $1 }
        return Loaded(configuration: try FanoutConfiguration.load(path: file, environment: environment), keyDirectory: scratch)
    }

    @Test func theWorkerLoadsTheConfigMapWithThePodsEnvironment() throws {
        let pod = try Self.pod()
        let loaded = try Self.load()
        let configuration = loaded.configuration
        #expect(configuration.kafka.groupInstanceID == pod.name, "static membership from metadata.name")
        #expect(configuration.admin.host == "0.0.0.0", "the probes and Prometheus come from outside the pod")
        let admin = try Self.named("admin", in: pod.worker["ports"])
        #expect(admin["containerPort"]?.string == String(configuration.admin.port))
        #expect(pod.statefulSet.at("spec", "template", "metadata", "annotations", "prometheus.io/port")?.string == String(configuration.admin.port))
        let probes = [("startupProbe", ["/healthz", "/readyz", "/livez"]), ("readinessProbe", ["/readyz"]), ("livenessProbe", ["/livez"])]
        for (probe, paths) in probes {
            let get = try #require(pod.worker.at(probe, "httpGet"), "\(probe) is an httpGet")
            #expect(get["port"]?.string == "admin", "\(probe) uses the named port")
            #expect(paths.contains(get["path"]?.string ?? ""), "\(probe) path \(get["path"]?.string ?? "none")")
        }
        let grace = try #require(pod.spec["terminationGracePeriodSeconds"]?.string.flatMap { Int($0) })
        #expect(Duration.seconds(grace) > configuration.shutdownTimeout, "SIGKILL must come after the drain")
        // The kafka properties are ones the linked librdkafka accepts with these values.
        _ = try RDKafkaConf(KafkaConfiguration(bootstrapServers: configuration.kafka.bootstrapServers, configuration.kafka.properties))
    }

    /// The loader refuses a `FANOUT_*` variable that names no knob, except `FANOUT_KAFKA__<NAME>`,
    /// which passes to librdkafka as a property: so the pod may set only Fanout's own kafka keys that way.
    @Test func everyFanoutVariableOfThePodNamesAKnob() throws {
        let environment = try Self.pod().environment()
        #expect(!environment.isEmpty)
        for name in environment.keys {
            #expect(name.hasPrefix("FANOUT_"), "\(name)")
            let segments = name.dropFirst(7).components(separatedBy: "__").map { $0.lowercased() }
            if segments.first == "kafka" {
                #expect(EnvironmentOverlay.fanoutKafkaKeys.contains(segments.dropFirst().first ?? ""),
                        "\(name) would reach librdkafka as a property, unchecked by the loader")
            }
        }
        // What the load above relies on: a misspelt variable, or one a Service link would add, stops it.
        for (variable, key) in [("FANOUT_ADMIN__HOTS", "admin.hots"), ("FANOUT_SERVICE_HOST", "service_host")] {
            do {
                _ = try Self.load(extra: [variable: "10.0.0.1"])
                Issue.record("\(variable) was accepted")
            } catch let error as ConfigurationError {
                #expect(error.issues.contains { $0.key == key && $0.message.hasPrefix("unknown key") }, "\(error)")
            }
        }
        #expect(try Self.pod().spec["enableServiceLinks"]?.string == "false", "Service links would add FANOUT_SERVICE_HOST and more")
    }

    @Test func theSigningKeyReachesTheWorkerAsAFileOfItsOwn() throws {
        let pod = try Self.pod()
        let volumes = pod.spec["volumes"]
        let secretVolume = try #require(volumes?.items.first { $0["secret"] != nil })
        let secretName = try #require(secretVolume["name"]?.string)
        #expect(secretVolume.at("secret", "defaultMode")?.string == "256", "0400")
        #expect(secretVolume.at("secret", "secretName")?.string?.isEmpty == false)
        let itemPaths = Set((secretVolume.at("secret", "items")?.items ?? []).compactMap { $0["path"]?.string })
        #expect(!itemPaths.isEmpty)
        #expect(try Self.named("keys", in: volumes).at("emptyDir", "medium")?.string == "Memory")

        let keysMount = try #require(pod.mountPath(of: "keys", in: pod.worker))
        #expect(pod.mountPath(of: secretName, in: pod.worker) == nil, "the worker reads the copy, not the group-readable Secret file")
        let copier = try Self.named("install-keys", in: pod.spec["initContainers"])
        let secretMount = try #require(pod.mountPath(of: secretName, in: copier))
        #expect(pod.mountPath(of: "keys", in: copier) == keysMount)
        let command = (copier["command"]?.items ?? []).compactMap(\.string).joined(separator: " ")
        #expect(command.contains("install -m 0400 \(secretMount)/"), "\(command)")
        #expect(command.hasSuffix(" \(keysMount)/"), "\(command)")

        let loaded = try Self.load()
        for app in loaded.configuration.apps {
            let url = URL(fileURLWithPath: app.keyPath)
            #expect(url.deletingLastPathComponent().path == loaded.keyDirectory.path, "\(app.bundleID): key_path outside \(keysMount)")
            #expect(itemPaths.contains(url.lastPathComponent), "\(app.bundleID): \(url.lastPathComponent) is no item of the Secret")
            #expect(SigningKeyCheck.exposedMode(of: app.keyPath) == nil)
        }

        // The init container and the worker run as the image's user, and the volumes belong to its group.
        let dockerfile = try String(contentsOf: DeployFilesTests.root.appendingPathComponent("docker/Dockerfile"), encoding: .utf8)
        func number(after flag: String) -> String? {
            dockerfile.range(of: flag + #" [0-9]+"#, options: .regularExpression).map { String(dockerfile[$0].dropFirst(flag.count + 1)) }
        }
        let uid = try #require(number(after: "--uid"))
        let gid = try #require(number(after: "--gid"))
        let context = pod.spec["securityContext"]
        #expect(context?["runAsUser"]?.string == uid)
        #expect(context?["runAsGroup"]?.string == gid)
        #expect(context?["fsGroup"]?.string == gid)
        #expect(context?["runAsNonRoot"]?.string == "true")
    }

    @Test func theScaledObjectScalesTheStatefulSetWithinThePartitions() throws {
        let pod = try Self.pod()
        let scaled = try Self.object("scaledobject.yaml")
        let spec = try #require(scaled["spec"])
        #expect(spec.at("scaleTargetRef", "kind")?.string == "StatefulSet")
        #expect(spec.at("scaleTargetRef", "name")?.string == pod.statefulSet.at("metadata", "name")?.string)
        #expect(pod.statefulSet.at("spec", "replicas") == nil, "KEDA's HPA owns the replica count")
        let partitions = try #require(scaled.at("metadata", "annotations", "fanout.example.com/activity-updates-partitions")?.string.flatMap { Int($0) })
        let minimum = try #require(spec["minReplicaCount"]?.string.flatMap { Int($0) })
        let maximum = try #require(spec["maxReplicaCount"]?.string.flatMap { Int($0) })
        #expect(1 <= minimum && minimum <= maximum && maximum <= partitions, "min \(minimum), max \(maximum), partitions \(partitions)")

        let configuration = try Self.load().configuration
        let triggers = try #require(spec["triggers"])
        let lag = try Self.named("lag", in: triggers)
        #expect(lag["type"]?.string == "kafka")
        #expect(lag.at("metadata", "consumerGroup")?.string == configuration.kafka.groupID)
        #expect(lag.at("metadata", "topic")?.string == configuration.kafka.topics.activityUpdates)
        #expect(lag.at("metadata", "bootstrapServers")?.string == configuration.kafka.bootstrapServers)
        #expect(lag.at("metadata", "allowIdleConsumers")?.string != "true", "never more replicas than partitions")
        #expect(configuration.kafka.properties["auto.offset.reset"] == nil && lag.at("metadata", "offsetResetPolicy")?.string == "earliest",
                "the worker's consumer starts from the earliest offset")
        let modifiers = try #require(spec.at("advanced", "scalingModifiers"))
        #expect(modifiers["target"]?.string == lag.at("metadata", "lagThreshold")?.string)
        let formula = try #require(modifiers["formula"]?.string)
        for trigger in triggers.items {
            let name = try #require(trigger["name"]?.string, "scalingModifiers needs every trigger named")
            #expect(formula.contains(name), "\(name) is not in the formula \(formula)")
        }
        let query = try #require(try Self.named("held", in: triggers).at("metadata", "query")?.string)
        let names = PromQLNames.metricNames(in: query)
        #expect(!names.isEmpty && names.isSubset(of: DeployFilesTests.exportedSeries()), "\(names.sorted()) in \(query)")
        let selector = try #require(try Self.named("pods", in: triggers).at("metadata", "podSelector")?.string).split(separator: "=").map(String.init)
        #expect(selector.count == 2 && pod.statefulSet.at("spec", "template", "metadata", "labels", selector[0])?.string == selector.last)
    }

    @Test func theServiceAndTheBudgetSelectTheWorkers() throws {
        let pod = try Self.pod()
        let labels = try #require(pod.statefulSet.at("spec", "template", "metadata", "labels"))
        let service = try Self.object("service.yaml")
        #expect(service.at("spec", "clusterIP")?.string == "None", "headless")
        #expect(pod.statefulSet.at("spec", "serviceName")?.string == service.at("metadata", "name")?.string)
        #expect(try Self.named("admin", in: service.at("spec", "ports"))["targetPort"]?.string == "admin")
        let budget = try Self.object("poddisruptionbudget.yaml")
        #expect(budget.at("spec", "maxUnavailable")?.string == "1")
        for (file, selector) in [("service.yaml", service.at("spec", "selector")), ("poddisruptionbudget.yaml", budget.at("spec", "selector", "matchLabels")),
                                 ("statefulset.yaml", pod.statefulSet.at("spec", "selector", "matchLabels"))] {
            guard case .map(let wanted)? = selector, !wanted.isEmpty else { Issue.record("\(file): no selector"); continue }
            for (key, value) in wanted { #expect(labels[key] == value, "\(file) selects \(key)=\(value.string ?? "?")") }
        }
    }

    @Test func theKustomizationListsEveryManifest() throws {
        let listed = Set(try Self.object("kustomization.yaml")["resources"]?.items.compactMap(\.string) ?? [])
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: Self.folder.path).filter { $0.hasSuffix(".yaml") && $0 != "kustomization.yaml" })
        #expect(files.count >= 6)
        #expect(listed == files, "listed but missing: \(listed.subtracting(files).sorted()); not listed: \(files.subtracting(listed).sorted())")
    }

    @Test func theYAMLReaderReadsWhatTheManifestsUse() throws {
        let text = """
        # a comment
        a: 1   # trailing
        b:
          c: "x: y"
          d: [ "p", 'q' ]
        e:
        - f: 2
          g:
            - h
        - i
        j: |
          {"k": 1}

            indented
        l: {}
        ---
        m: n
        """
        let documents = try YAMLSubset.documents(text)
        #expect(documents.count == 2)
        let expected: YAMLNode = .map([
            "a": .scalar("1"),
            "b": .map(["c": .scalar("x: y"), "d": .list([.scalar("p"), .scalar("q")])]),
            "e": .list([.map(["f": .scalar("2"), "g": .list([.scalar("h")])]), .scalar("i")]),
            "j": .scalar("{\"k\": 1}\n\n  indented\n"),
            "l": .map([:]),
        ])
        #expect(documents.first == expected)
        #expect(documents.last == .map(["m": .scalar("n")]))
        for unknown in ["a: &anchor 1", "a:\n\tb: 1", "a: 1\n  b: 2", "a: >\n  folded"] {
            #expect(throws: YAMLSubset.Failure.self, "\(unknown)") { try YAMLSubset.documents(unknown) }
        }
    }
}

/// A YAML value as the manifests use them; every scalar stays text (`256`, `true`, `"0.0.0.0"`).
indirect enum YAMLNode: Equatable {
    case map([String: YAMLNode])
    case list([YAMLNode])
    case scalar(String)

    subscript(key: String) -> YAMLNode? {
        if case .map(let fields) = self { return fields[key] }
        return nil
    }
    var string: String? {
        if case .scalar(let text) = self { return text }
        return nil
    }
    var items: [YAMLNode] {
        if case .list(let items) = self { return items }
        return []
    }
    func at(_ path: String...) -> YAMLNode? { path.reduce(Optional(self)) { $0?[$1] } }
}

/// The YAML that deploy/kubernetes/ is written in, and no more: block mappings and sequences by
/// indentation (a sequence may sit at its key's indentation), `- key: value` items, `|` block
/// scalars, flow lists of scalars, `{}`, quoted scalars, comments, `---` between documents. Anchors,
/// tags, folded scalars, tabs and stray indentation throw, so nothing is silently misread
/// (`scripts/check-deploy` parses the same files with PyYAML).
struct YAMLSubset {
    struct Failure: Error, CustomStringConvertible { var description: String }
    private var lines: [String]
    private var position = 0

    static func documents(_ text: String) throws -> [YAMLNode] {
        var documents: [[String]] = [[]]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "---" { documents.append([]) } else { documents[documents.count - 1].append(String(line)) }
        }
        return try documents.compactMap { lines in
            var reader = YAMLSubset(lines: lines)
            guard let first = reader.next() else { return nil }
            let node = try reader.node(indent: reader.indent(first))
            if let extra = reader.next() { throw Failure(description: "line \(extra + 1): unexpected indentation: \(lines[extra])") }
            return node
        }
    }

    /// The next line with content, from `position`.
    private func next() -> Int? {
        var index = position
        while index < lines.count {
            let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
            if !trimmed.isEmpty && !trimmed.hasPrefix("#") { return index }
            index += 1
        }
        return nil
    }
    private func indent(_ index: Int) -> Int { lines[index].prefix { $0 == " " }.count }
    private func content(_ index: Int) throws -> String {
        let line = lines[index]
        if line.contains("\t") { throw Failure(description: "line \(index + 1): a tab") }
        var quote: Character?
        var previous: Character = " "
        var kept = ""
        for character in line.dropFirst(indent(index)) {
            if let open = quote { if character == open { quote = nil } } else if character == "\"" || character == "'" { quote = character } else if character == "#" && previous == " " { break }
            kept.append(character)
            previous = character
        }
        return kept.trimmingCharacters(in: .whitespaces)
    }
    private static func isItem(_ text: String) -> Bool { text == "-" || text.hasPrefix("- ") }

    /// `key` and the rest of a `key: value` line, or nil when the text is no mapping entry.
    private static func entry(_ text: String) -> (key: String, rest: String)? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let key = String(text[..<colon])
        let after = text[text.index(after: colon)...]
        guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || "_.-/".contains($0) }), after.isEmpty || after.first == " " else { return nil }
        return (key, after.trimmingCharacters(in: .whitespaces))
    }

    private mutating func node(indent: Int) throws -> YAMLNode {
        guard let index = next() else { return .scalar("") }
        return try Self.isItem(content(index)) ? list(indent: indent) : map(indent: indent)
    }

    private mutating func map(indent: Int) throws -> YAMLNode {
        var fields: [String: YAMLNode] = [:]
        while let index = next(), self.indent(index) == indent, try !Self.isItem(content(index)) {
            guard let (key, rest) = Self.entry(try content(index)) else { throw Failure(description: "line \(index + 1): not `key: value`: \(lines[index])") }
            position = index + 1
            fields[key] = try value(rest, indent: indent)
        }
        return .map(fields)
    }

    private mutating func list(indent: Int) throws -> YAMLNode {
        var items: [YAMLNode] = []
        while let index = next(), self.indent(index) == indent, try Self.isItem(content(index)) {
            let text = try content(index)
            let rest = text.dropFirst(1).drop { $0 == " " }
            if rest.isEmpty {
                position = index + 1
                guard let child = next(), self.indent(child) > indent else { items.append(.scalar("")); continue }
                items.append(try node(indent: self.indent(child)))
            } else if Self.entry(String(rest)) != nil {
                let inner = indent + (text.count - rest.count)
                lines[index] = String(repeating: " ", count: inner) + rest   // the item's first key, where its others sit
                position = index
                items.append(try map(indent: inner))
            } else {
                position = index + 1
                items.append(try Self.inline(String(rest), line: index))
            }
        }
        return .list(items)
    }

    private mutating func value(_ rest: String, indent: Int) throws -> YAMLNode {
        if rest == "|" || rest == "|-" {
            var block: [String] = []
            while position < lines.count, lines[position].trimmingCharacters(in: .whitespaces).isEmpty || self.indent(position) > indent {
                block.append(lines[position])
                position += 1
            }
            while block.last?.trimmingCharacters(in: .whitespaces).isEmpty == true { block.removeLast() }
            let margin = block.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
            let text = block.map { String($0.dropFirst(min(margin, $0.count))) }.joined(separator: "\n")
            return .scalar(rest == "|" ? text + "\n" : text)
        }
        guard rest.isEmpty else { return try Self.inline(rest, line: position - 1) }
        guard let index = next() else { return .scalar("") }
        if self.indent(index) > indent { return try node(indent: self.indent(index)) }
        if self.indent(index) == indent, try Self.isItem(content(index)) { return try list(indent: indent) }
        return .scalar("")
    }

    private static func inline(_ text: String, line: Int) throws -> YAMLNode {
        if text == "{}" { return .map([:]) }
        if text.hasPrefix("["), text.hasSuffix("]") {
            var items: [YAMLNode] = []
            var current = "", quote: Character?
            for character in text.dropFirst().dropLast() {
                if let open = quote { if character == open { quote = nil } } else if character == "\"" || character == "'" { quote = character } else if character == "," {
                    items.append(try scalar(current.trimmingCharacters(in: .whitespaces), line: line)); current = ""; continue
                }
                current.append(character)
            }
            if !current.trimmingCharacters(in: .whitespaces).isEmpty { items.append(try scalar(current.trimmingCharacters(in: .whitespaces), line: line)) }
            return .list(items)
        }
        return try scalar(text, line: line)
    }

    private static func scalar(_ text: String, line: Int) throws -> YAMLNode {
        if let first = text.first, "&*!>{[@`|".contains(first) { throw Failure(description: "line \(line + 1): not in this YAML subset: \(text)") }
        if text.count >= 2, let first = text.first, first == "\"" || first == "'", text.last == first {
            let inner = String(text.dropFirst().dropLast())
            if first == "'" { return .scalar(inner.replacingOccurrences(of: "''", with: "'")) }
            if inner.range(of: #"\\[^"\\]"#, options: .regularExpression) != nil {
                throw Failure(description: "line \(line + 1): an escape other than \\\" or \\\\: \(text)")
            }
            return .scalar(inner.replacingOccurrences(of: "\\\"", with: "\"").replacingOccurrences(of: "\\\\", with: "\\"))
        }
        return .scalar(text)
    }
}
