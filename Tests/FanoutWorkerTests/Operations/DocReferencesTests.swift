import Foundation
import Testing

/// Every document a comment, script or document of the repository names (a path ending in `.md`) is a
/// file in the repository, and every section it cites (`<document>.md §4`, `§3–§5`, `§5 and §6`) is a
/// heading numbered so in that file (`## 4. Delivery guarantees`). The design, the runbook and the APNs
/// facts live in `docs/`; a comment citing a document outside the repository, or a section renumbered
/// away, fails here.
@Suite struct DocReferencesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    /// What is scanned, relative to the root: the code, its tests and tools, the deploy files and the documents.
    static let scanned = ["Sources", "Tests", "scripts", "Fuzz", "Benchmarks", "deploy", "config", "docker", "schema", "docs", "README.md"]
    /// Folders never scanned: build output and fuzzing corpora (inputs, not text anyone reads).
    static let skippedFolders: Set<String> = [".build", "corpus"]

    struct Reference: Equatable {
        var line: Int
        var document: String
        var sections: [Int]
    }

    /// The document names of one text with the sections cited right after each. A name inside a URL
    /// is not one of the repository's.
    static func references(in text: String) -> [Reference] {
        let name = try! Regex(#"([A-Za-z0-9_][A-Za-z0-9_./-]*\.md)(?![A-Za-z0-9_])((?: §[0-9]+(?:\s*(?:–|-|/|,|and)\s*§[0-9]+)*)?)"#)
        let section = try! Regex(#"§([0-9]+)"#)
        var found: [Reference] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            for match in line.matches(of: name) {
                guard let document = match.output[1].substring, let cited = match.output[2].substring else { continue }
                let word = line[..<document.startIndex].split(separator: " ", omittingEmptySubsequences: false).last ?? ""
                if word.contains("://") { continue }
                let sections = cited.matches(of: section).compactMap { $0.output[1].substring.flatMap { Int($0) } }
                found.append(Reference(line: index + 1, document: String(document), sections: sections))
            }
        }
        return found
    }

    /// The numbers of a Markdown file's numbered headings (`## 4. …`, `### 4.2 …`, `## §4 …` give 4).
    static func headingNumbers(of text: String) -> Set<Int> {
        let heading = try! Regex(#"^#{1,6}\s+§?([0-9]+)[.)\s]"#)
        var numbers: Set<Int> = []
        for line in text.split(separator: "\n") {
            if let match = line.firstMatch(of: heading), let digits = match.output[1].substring, let number = Int(digits) {
                numbers.insert(number)
            }
        }
        return numbers
    }

    /// What is wrong with the references of `text`, the file at `path` (relative to the root): a
    /// document that is no file of the repository (looked up from the root, then from the file's
    /// folder), a section its document has no heading for, or a section cited after the bare name of
    /// a document that was never the repository's (the old shared design, APNs and environment notes).
    static func problems(in text: String, at path: String, readDocument: (String) -> String?) -> [String] {
        var problems: [String] = []
        let folder = (path as NSString).deletingLastPathComponent
        for reference in references(in: text) {
            let candidates = [reference.document, (folder as NSString).appendingPathComponent(reference.document)]
            var found: (path: String, text: String)?
            for candidate in candidates where found == nil {
                if let text = readDocument(candidate) { found = (candidate, text) }
            }
            guard let found else {
                problems.append("\(path):\(reference.line): \(reference.document) is not a file of the repository")
                continue
            }
            let (resolved, headings) = (found.path, headingNumbers(of: found.text))
            for section in reference.sections where !headings.contains(section) {
                problems.append("\(path):\(reference.line): \(resolved) has no section §\(section)")
            }
        }
        let bare = try! Regex(#"\b(DESIGN|APNS|ENVIRONMENT) §[0-9]+"#)
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            for match in line.matches(of: bare) where isCommentOrProse(line[..<match.range.lowerBound], path: path) {
                problems.append("\(path):\(index + 1): '\(match.output[0].substring ?? "")' cites a document outside the repository")
            }
        }
        return problems
    }

    /// Whether text after `prefix` on its line is a comment (Swift, C, shell, YAML) or a document's
    /// prose. Messages the code prints are not judged here: changing them is a change of behaviour.
    static func isCommentOrProse(_ prefix: Substring, path: String) -> Bool {
        path.hasSuffix(".md") || prefix.contains("//") || prefix.drop { $0 == " " }.hasPrefix("#")
    }

    /// Text files under `scanned`, as (path relative to the root, contents).
    static func scannedFiles() -> [(path: String, text: String)] {
        let manager = FileManager.default
        var files: [(String, String)] = []
        func add(_ relative: String) {
            let url = root.appendingPathComponent(relative)
            guard let data = manager.contents(atPath: url.path), data.count < 4_000_000, let text = String(data: data, encoding: .utf8) else { return }
            files.append((relative, text))
        }
        for entry in scanned {
            var isFolder: ObjCBool = false
            guard manager.fileExists(atPath: root.appendingPathComponent(entry).path, isDirectory: &isFolder) else { continue }
            guard isFolder.boolValue else { add(entry); continue }
            var pending = [entry]
            while let folder = pending.popLast() {
                guard let names = try? manager.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path) else { continue }
                for name in names.sorted() where !name.hasPrefix(".") && !skippedFolders.contains(name) {
                    let relative = folder + "/" + name
                    var isSub: ObjCBool = false
                    guard manager.fileExists(atPath: root.appendingPathComponent(relative).path, isDirectory: &isSub) else { continue }
                    if isSub.boolValue { pending.append(relative) } else { add(relative) }
                }
            }
        }
        return files
    }

    static func readDocument(_ relative: String) -> String? {
        let path = root.appendingPathComponent(relative).standardizedFileURL.path
        guard path.hasPrefix(root.standardizedFileURL.path + "/") else { return nil }
        return FileManager.default.contents(atPath: path).flatMap { String(data: $0, encoding: .utf8) }
    }

    @Test func everyCitedDocumentAndSectionIsInTheRepository() {
        let files = Self.scannedFiles()
        var problems: [String] = []
        var cited = 0
        for (path, text) in files {
            cited += Self.references(in: text).reduce(0) { $0 + $1.sections.count }
            problems += Self.problems(in: text, at: path, readDocument: Self.readDocument)
        }
        #expect(problems.isEmpty, "\(problems.count) reference(s) point nowhere:\n\(problems.joined(separator: "\n"))")
        // The scan saw the repository: the code cites the design and APNs documents by section dozens of times.
        #expect(files.count > 200)
        #expect(cited >= 40, "only \(cited) section reference(s) found: is the scan looking in the right place?")
    }

    /// The checker itself: a missing document, a missing section and a bare outside name are each
    /// reported; a good reference is not. The texts are assembled so this file holds no reference of its own.
    @Test func aMissingDocumentOrSectionIsReported() {
        let md = ".md", s = "§"
        let documents = ["docs/design" + md: "# Design\n## 1. Data flow\n## 4. Delivery guarantees\n### 4.1 Commits\n"]
        let read: (String) -> String? = { documents[($0 as NSString).standardizingPath] }
        let good = "/// See docs/design\(md) \(s)4 and \(s)1, or design\(md) \(s)1–\(s)4.\n"
        #expect(Self.problems(in: good, at: "docs/x.swift", readDocument: read).isEmpty)
        #expect(Self.references(in: good).map(\.sections) == [[4, 1], [1, 4]])

        let badSection = "// docs/design\(md) \(s)3\n"
        #expect(Self.problems(in: badSection, at: "Sources/A.swift", readDocument: read) == ["Sources/A.swift:1: docs/design\(md) has no section \(s)3"])
        let outside = "\n/// Rules of APNS\(md) \(s)4.\n"
        #expect(Self.problems(in: outside, at: "Sources/B.swift", readDocument: read) == ["Sources/B.swift:2: APNS\(md) is not a file of the repository"])
        let bare = "// DESIGN \(s)4: commit after the ack\n"
        #expect(Self.problems(in: bare, at: "Sources/C.swift", readDocument: read).count == 1)
        let message = "let why = \"commits after the ack (DESIGN \(s)4)\"\n"
        #expect(Self.problems(in: message, at: "Sources/C.swift", readDocument: read).isEmpty)
        let url = "// https://example.com/notes/README\(md)\n"
        #expect(Self.problems(in: url, at: "Sources/D.swift", readDocument: read).isEmpty)
    }
}
