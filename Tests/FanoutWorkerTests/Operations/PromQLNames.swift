/// The metric names a PromQL expression reads, for checking deploy files against what the worker
/// exports: every identifier that is not a function or aggregation (followed by `(`), a keyword, a
/// label name (inside `{…}` or a `by`/`on`/… list), an aggregation written `sum by (…) (…)`, a string,
/// a number or duration, or a Grafana variable (`$job`). Not a PromQL parser: `promtool check rules`
/// judges the syntax.
enum PromQLNames {
    static let keywords: Set<String> = ["and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"]
    static let labelLists: Set<String> = ["by", "without", "on", "ignoring", "group_left", "group_right"]

    static func metricNames(in expression: String) -> Set<String> {
        let text = Array(withoutStringsAndSelectors(expression).unicodeScalars)
        var names: Set<String> = []
        var index = 0
        func isWordStart(_ c: Unicode.Scalar) -> Bool { c == "_" || c == ":" || ("a"..."z").contains(c) || ("A"..."Z").contains(c) }
        func isWord(_ c: Unicode.Scalar) -> Bool { isWordStart(c) || ("0"..."9").contains(c) }
        func nextNonSpace(after position: Int) -> Unicode.Scalar? {
            var position = position
            while position < text.count, text[position].properties.isWhitespace { position += 1 }
            return position < text.count ? text[position] : nil
        }
        func nextWord(after position: Int) -> String {
            var position = position
            while position < text.count, text[position].properties.isWhitespace { position += 1 }
            let start = position
            while position < text.count, isWord(text[position]) { position += 1 }
            return String(String.UnicodeScalarView(text[start..<position]))
        }
        while index < text.count {
            let c = text[index]
            if ("0"..."9").contains(c) || (c == "." && index + 1 < text.count && ("0"..."9").contains(text[index + 1])) {
                while index < text.count, isWord(text[index]) || text[index] == "." { index += 1 }  // 1.5, 1e3, 15m, 1h30m
            } else if c == "$" {
                index += 1
                while index < text.count, isWord(text[index]) { index += 1 }
            } else if isWordStart(c) {
                let start = index
                while index < text.count, isWord(text[index]) { index += 1 }
                let word = String(String.UnicodeScalarView(text[start..<index]))
                if labelLists.contains(word) {
                    if nextNonSpace(after: index) == "(" {
                        while index < text.count, text[index] != ")" { index += 1 }
                    }
                } else if !keywords.contains(word.lowercased()), nextNonSpace(after: index) != "(",
                          nextWord(after: index) != "by", nextWord(after: index) != "without" {
                    names.insert(word)
                }
            } else {
                index += 1
            }
        }
        return names
    }

    /// The expression with string literals, label matchers (`{…}`) and ranges (`[…]`) blanked out.
    static func withoutStringsAndSelectors(_ expression: String) -> String {
        var out = String.UnicodeScalarView()
        var quote: Unicode.Scalar?
        var escaped = false
        var closing: Unicode.Scalar?
        for c in expression.unicodeScalars {
            if let open = quote {
                if escaped { escaped = false } else if c == "\\" && open != "`" { escaped = true } else if c == open { quote = nil }
                continue
            }
            if c == "\"" || c == "'" || c == "`" { quote = c; continue }
            if let end = closing {
                if c == end { closing = nil }
                continue
            }
            if c == "{" { closing = "}"; out.append(" "); continue }
            if c == "[" { closing = "]"; out.append(" "); continue }
            out.append(c)
        }
        return String(out)
    }
}
