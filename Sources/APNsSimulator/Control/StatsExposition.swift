/// The simulator's counters (`APNsSimulatorStats`) as Prometheus text exposition format 0.0.4, for
/// `GET /metrics` on the control endpoint, so a Prometheus can scrape Apple's side of a test run beside
/// the workers. Names carry the `apns_sim_` prefix, apart from the worker's `fanout_`. Labels are
/// closed sets: an HTTP status and an APNs reason string (or an injected fault's reason), never a
/// token or a channel id.
public enum StatsExposition {
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public static func render(_ stats: APNsSimulatorStats) -> String {
        var out = ""
        family("apns_sim_requests_total", "counter",
               "Requests answered on the device-push, broadcast and channel-management listeners.", &out)
        out += "apns_sim_requests_total \(stats.requests)\n"
        family("apns_sim_responses_total", "counter",
               "Answers by HTTP status and APNs reason (empty on success; an injected fault's reason as configured).", &out)
        for (status, reason, count) in responses(stats) {
            out += "apns_sim_responses_total{status=\"\(escape(status))\",reason=\"\(escape(reason))\"} \(count)\n"
        }
        family("apns_sim_pushes_accepted_total", "counter", "Pushes accepted with 200 and recorded as delivered.", &out)
        out += "apns_sim_pushes_accepted_total \(stats.accepted)\n"
        counter("apns_sim_connections_accepted_total", "Connections accepted.", stats.connectionsAccepted, &out)
        family("apns_sim_connections_open", "gauge", "Connections open now.", &out)
        out += "apns_sim_connections_open \(stats.connectionsOpen)\n"
        counter("apns_sim_connections_refused_total", "Connections refused because max-connections were open.", stats.connectionsRefused, &out)
        counter("apns_sim_goaways_sent_total", "GOAWAY frames sent (idle timeout, goaway-after fault).", stats.goAwaysSent, &out)
        counter("apns_sim_connections_reset_total", "Connections reset by the reset fault.", stats.connectionsReset, &out)
        counter("apns_sim_connections_timed_out_total",
                "Connections closed by the handshake timeout, the idle timeout or the end of a GOAWAY grace period.", stats.connectionsTimedOut, &out)
        counter("apns_sim_accept_failures_total", "accept() failures other than nothing waiting (such as EMFILE).", stats.acceptFailures, &out)
        counter("apns_sim_untracked_targets_total",
                "Accepted pushes whose target the device view could not track (its capacity reached).", stats.untrackedTargets, &out)
        counter("apns_sim_delivery_log_write_errors_total", "Delivery-log records dropped or failed to write.", stats.deliveryLogWriteErrors, &out)
        return out
    }

    /// `responses` keys ("200", "410 Unregistered") split into status and reason, sorted for stable output.
    static func responses(_ stats: APNsSimulatorStats) -> [(status: String, reason: String, count: Int)] {
        stats.responses.map { key, count in
            let parts = key.split(separator: " ", maxSplits: 1)
            return (String(parts.first ?? ""), parts.count > 1 ? String(parts[1]) : "", count)
        }
        .sorted { ($0.status, $0.reason) < ($1.status, $1.reason) }
    }

    private static func family(_ name: String, _ type: String, _ help: String, _ out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    private static func counter(_ name: String, _ help: String, _ value: Int, _ out: inout String) {
        family(name, "counter", help, &out)
        out += "\(name) \(value)\n"
    }

    /// Label values: backslash, double quote and line feed escaped (format 0.0.4), by Unicode scalar:
    /// "\r\n" is one Character, and its line feed must be escaped too.
    static func escape(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out.append(contentsOf: "\\\\".unicodeScalars)
            case "\"": out.append(contentsOf: "\\\"".unicodeScalars)
            case "\n": out.append(contentsOf: "\\n".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
