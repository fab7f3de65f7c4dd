import APNsModel
import CCurl
import CCurlShim
import FanoutCrypto
import Foundation
import Synchronization

/// How one dispatch on the libcurl transport ended, with the ticket it was dispatched with.
struct CurlEnd {
    enum Outcome {
        case finished(CURLcode)
        /// The engine's own request deadline passed (`CurlTransportEngine.expireDeadlines`).
        case timedOut
    }

    let transfer: CurlTransfer
    let ticket: DispatchTicket?
    let outcome: Outcome
}

/// The transport thread's state and loop: takes submissions, spreads them over the connection pool
/// within every bound, drives libcurl, and completes each request exactly once.
///
/// Everything here runs on the one dedicated thread the client starts (never on Swift's cooperative
/// pool: `curl_multi_poll` blocks). Other threads only touch `queue` (Mutex), `counters` (atomics)
/// and `connections[0].multi.wakeup()` (thread-safe in libcurl).
final class CurlTransportEngine: TransportEngine, @unchecked Sendable {
    // @unchecked: the mutable state below is confined to the transport thread; the cross-thread
    // parts (queue, counters, the wakeup multi) are Sendable themselves.
    let configuration: APNsClientConfiguration
    let queue: SubmissionQueue
    let counters: APNsClientCounters
    let finished: ShutdownSignal
    let connections: [CurlConnection]
    private var dispatcher: Dispatcher<CurlConnection>
    private var idleTransfers: [CurlTransfer] = []
    private var inFlight = 0
    private var tickets = DispatchTicketIssuer()
    /// Every dispatched transfer's deadline, in dispatch order (see `DeadlineQueue`).
    private var deadlines = DeadlineQueue<CurlTransfer>()
    private var expired: [DeadlineQueue<CurlTransfer>.Entry] = []
    private let clock = ContinuousClock()
    private let baseURL: String
    private var batch: [Submission] = []
    private var done: [CurlEnd] = []
    private var waitFDs: UnsafeMutablePointer<curl_waitfd>
    private let waitFDCapacity = 256

    init(configuration: APNsClientConfiguration, queue: SubmissionQueue, counters: APNsClientCounters,
         finished: ShutdownSignal) throws(APNsClientError) {
        self.configuration = configuration
        self.queue = queue
        self.counters = counters
        self.finished = finished
        baseURL = configuration.baseURL
        let now = ContinuousClock.now
        var pool: [CurlConnection] = []
        for index in 0..<configuration.connections {
            pool.append(try CurlConnection(index: index, configuration: configuration, now: now))
        }
        connections = pool
        dispatcher = Dispatcher(connections: pool, maxInFlight: configuration.maxInFlight, tokenCache: configuration.tokenCache,
                                gate: configuration.writeGate)
        waitFDs = .allocate(capacity: waitFDCapacity)
        batch.reserveCapacity(min(configuration.maxInFlight, 1024))
        done.reserveCapacity(256)
    }

    deinit { waitFDs.deallocate() }

    /// Wakes the loop through the first multi handle (curl_multi_wakeup is thread-safe).
    func wakeup() { connections[0].multi.wakeup() }

    func run() {
        while true {
            let now = clock.now
            let (closed, deadline) = queue.closing
            if let deadline, now >= deadline {
                abortEverything(reason: "shutdown deadline passed before APNs answered; the push may or may not have been delivered")
                break
            }
            let spare = dispatcher.dispatch(from: queue, into: &batch, inFlight: inFlight, now: now) { submission, connection, token in
                start(submission, on: connection, token: token, now: now)
            }
            for connection in connections where connection.inFlight > 0 {
                connection.perform(into: &done)
            }
            var completedSome = !done.isEmpty
            if completedSome { completeFinished() }
            // A thread that did not run for a while (stopped, swapped out, starved, a slow completion)
            // finds deadlines passed with the answers already in its sockets: libcurl reads on before
            // anything is timed out, so that only requests APNs left unanswered time out, not accepted
            // pushes that would then be sent again.
            if let earliest = deadlines.earliestDeadline, now >= earliest {
                for connection in connections where connection.inFlight > 0 { connection.perform(into: &done) }
                if !done.isEmpty {
                    completedSome = true
                    completeFinished()
                }
            }
            // After libcurl's own ends are completed, so a transfer that finished in this pass is not
            // also reported as timed out (the second report would match nothing).
            let moreDue = expireDeadlines(now: now)
            if !done.isEmpty {
                completedSome = true
                completeFinished()
            }
            if closed && inFlight == 0 && queue.count == 0 { break }
            publishCounters()
            // Completions freed capacity: dispatch again before sleeping, or queued work would wait
            // for the poll timeout.
            if completedSome || moreDue || (spare && queue.count > 0) { continue }
            sleep(now: now, deadline: deadline, canTakeMore: spare)
        }
        publishCounters()
        finished.signal()
    }

    private func start(_ submission: Submission, on connection: CurlConnection, token: ProviderTokenCache.Token,
                       now: ContinuousClock.Instant) {
        do {
            let transfer = try idleTransfers.popLast() ?? CurlTransfer(configuration: configuration)
            try transfer.prepare(submission.request, url: baseURL + submission.request.path,
                                 authorization: token.authorizationHeader)
            do {
                try connection.add(transfer)
            } catch {
                idleTransfers.append(transfer)
                throw error
            }
            let ticket = tickets.issue()
            transfer.carried.begin(ticket, completion: submission.completion)
            transfer.credentials = submission.credentials
            transfer.providerToken = token
            transfer.deadline = now + configuration.requestTimeout
            deadlines.append(transfer, ticket: ticket, deadline: transfer.deadline)
            transfer.gateEpoch = connection.gate.dispatched(now: now)
            inFlight += 1
        } catch {
            submission.completion(.success(APNsHTTPResponse(status: nil, transportFailure: "cannot start the request: \(error)")))
        }
    }

    /// Completes every end in `done` whose ticket matches the request its transfer carries; counts the
    /// others in `unmatchedEnds` and leaves their transfer alone.
    private func completeFinished() {
        let now = clock.now
        for end in done {
            let transfer = end.transfer
            guard let ticket = end.ticket, let completion = transfer.carried.take(ticket) else {
                counters.unmatchedEnds.add(1, ordering: .relaxed)
                continue
            }
            let connection = connections[transfer.connectionIndex]
            connection.remove(transfer)
            inFlight -= 1
            var response: APNsHTTPResponse
            let event: ConnectionGate.Completion
            switch end.outcome {
            case .finished(let code):
                response = transfer.finish(code)
                event = Self.gateEvent(code: code, response: &response, credentials: transfer.credentials,
                                       providerToken: transfer.providerToken, tokenCache: configuration.tokenCache)
            case .timedOut:
                _ = transfer.finish(CURLE_OPERATION_TIMEDOUT)   // drops what arrived of the response
                response = APNsHTTPResponse(status: nil, transportFailure: "transport: no response within \(configuration.requestTimeout) (request timeout) [curl]")
                event = .requestTimedOut(dispatchedAt: transfer.deadline - configuration.requestTimeout)
            }
            transfer.credentials = nil
            transfer.providerToken = nil
            idleTransfers.append(transfer)
            if connection.gate.completed(event, epoch: transfer.gateEpoch, now: now, jitter: Double.random(in: 0...1)) {
                counters.connectionBackoffs.add(1, ordering: .relaxed)
            }
            counters.completed.add(1, ordering: .relaxed)
            counters.inFlight.store(inFlight, ordering: .relaxed)   // exact when the completion runs
            completion(.success(response))
        }
        done.removeAll(keepingCapacity: true)
    }

    /// The transport's own request deadline: libcurl's CURLOPT_TIMEOUT_MS does not cover a transfer
    /// parked waiting for its connection (libcurl 7.88 with MAX_HOST_CONNECTIONS=1 and PIPEWAIT), which
    /// would otherwise wait forever. Adds the expired transfers to `done`; at most `deadlineScanLimit`
    /// entries per call. Returns whether more may be due now.
    private func expireDeadlines(now: ContinuousClock.Instant) -> Bool {
        expired.removeAll(keepingCapacity: true)
        let more = deadlines.popExpired(now: now, limit: Self.deadlineScanLimit, isCarried: { $0.carried.ticket == $1 }, into: &expired)
        for entry in expired { done.append(CurlEnd(transfer: entry.element, ticket: entry.ticket, outcome: .timedOut)) }
        return more
    }

    static let deadlineScanLimit = 1024

    /// What a finished transfer means for its connection's gate. Only CURLE_HTTP2_STREAM (one stream
    /// reset, RST_STREAM) leaves the connection usable; it neither opens a probing connection (no
    /// answer arrived) nor backs off. CURLE_HTTP2 is libcurl's connection-level HTTP/2 error (a broken
    /// connection): like any other failure below HTTP it backs off.
    static func gateEvent(code: CURLcode, response: inout APNsHTTPResponse, credentials: APNsCredentials?,
                          providerToken: ProviderTokenCache.Token?, tokenCache: ProviderTokenCache) -> ConnectionGate.Completion {
        if response.status != nil {
            return .response(&response, credentials: credentials, providerToken: providerToken, tokenCache: tokenCache)
        }
        return code == CURLE_HTTP2_STREAM ? .streamReset : .transportFailure
    }

    private func sleep(now: ContinuousClock.Instant, deadline: ContinuousClock.Instant?, canTakeMore: Bool) {
        var timeout = 1000
        for connection in connections {
            if let curl = connection.curlTimeout { timeout = min(timeout, curl) }
            if let until = connection.gate.backoffDeadline { timeout = min(timeout, Self.milliseconds(until - now)) }
        }
        if let earliest = deadlines.earliestDeadline { timeout = min(timeout, Self.milliseconds(earliest - now)) }
        if let deadline { timeout = min(timeout, Self.milliseconds(deadline - now)) }
        if timeout <= 0 { return }
        var count = 0
        for connection in connections.dropFirst() where connection.inFlight > 0 {
            count += connection.multi.watchedSockets(into: waitFDs + count, capacity: waitFDCapacity - count)
        }
        let extra = UInt32(count)
        // Only announce sleep when new submissions could be taken; otherwise sockets and timers wake us.
        if canTakeMore {
            guard queue.prepareToSleep() else { return }
            _ = curl_multi_poll(connections[0].multi.handle, waitFDs, extra, Int32(timeout), nil)
            queue.awake()
        } else {
            _ = curl_multi_poll(connections[0].multi.handle, waitFDs, extra, Int32(timeout), nil)
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        max(0, Int(duration.milliseconds) + 1)
    }

    /// Shutdown deadline: fail everything still queued or on the wire, each exactly once.
    private func abortEverything(reason: String) {
        for connection in connections {
            for transfer in connection.transfers {
                connection.remove(transfer)
                inFlight -= 1
                transfer.credentials = nil
                transfer.providerToken = nil
                idleTransfers.append(transfer)
                guard let ticket = transfer.carried.ticket, let completion = transfer.carried.take(ticket) else {
                    counters.unmatchedEnds.add(1, ordering: .relaxed)
                    continue
                }
                completion(.success(APNsHTTPResponse(status: nil, transportFailure: reason)))
            }
        }
        queue.failRemaining(reason: "client shut down before the request was sent", scratch: &batch)
    }

    private func publishCounters() {
        counters.inFlight.store(inFlight, ordering: .relaxed)
        counters.connections.store(connections.reduce(0) { $0 + ($1.gate.isConnectedOrConnecting ? 1 : 0) }, ordering: .relaxed)
    }
}
