import Foundation

/// Timers: the connect timeout, PING upkeep and its timeout, and request timeouts.
extension HTTP2ClientConnection {
    /// Connect timeout, PING upkeep and its timeout, and request timeouts (the due ones, every 100 ms).
    func tick(now: ContinuousClock.Instant) {
        switch state {
        case .idle:
            return
        case .resolving, .connecting, .handshaking:
            if let connectDeadline, now >= connectDeadline {
                return fail("connecting to \(settings.endpoint.authority) timed out after \(settings.connectTimeout) (DNS + TCP + TLS)", now: now)
            }
        case .ready, .draining:
            if let pingSentAt {
                if now - pingSentAt >= settings.pingTimeout {
                    return fail("no answer to an HTTP/2 PING within \(settings.pingTimeout): connection to \(settings.endpoint.authority) presumed dead",
                                now: now)
                }
            } else if state == .ready, now - lastRead >= settings.upkeepInterval, let session {
                try? session.submitPing()
                pingSentAt = now
                isDirty = true
            }
        }
        guard inFlight > 0 else {
            deadlines.removeAll()  // nothing in flight: every entry is of a request already answered
            return
        }
        guard now >= nextStreamScan else { return }
        nextStreamScan = now + Self.streamScanInterval
        // A process that did not run for a while (stopped, swapped out, starved) finds deadlines
        // passed with the answers already in its socket: those are read first, so that only requests
        // APNs left unanswered time out, not accepted pushes that would then be sent again.
        if let earliest = deadlines.earliestDeadline, now >= earliest, state == .ready || state == .draining {
            _ = readAll(now: now)
            // It failed or closed while reading: its streams are ended already.
            guard state == .ready || state == .draining else { return }
        }
        // Only the due entries are visited (at most `deadlineScanLimit` a scan; more due: scan again
        // at once). An entry whose request was answered is dropped; one still carried is timed out
        // where it is: on the wire, or still waiting for the connection.
        expired.removeAll(keepingCapacity: true)
        if deadlines.popExpired(now: now, limit: Self.deadlineScanLimit, isCarried: { $0.carried.ticket == $1 }, into: &expired) {
            nextStreamScan = now
        }
        for entry in expired {
            let stream = entry.element
            if stream.slot >= 0, stream.slot < streams.count, streams[stream.slot] === stream {
                timeOut(at: stream.slot)
            }
        }
        // Pending streams wait for the connect, which times out before them unless connectTimeout is the longer one.
        while let first = pending.first, now >= first.deadline {
            pending.removeFirst()
            sink.report(first, .transportFailed("no response within \(settings.requestTimeout) (request timeout)"))
        }
    }

    static let deadlineScanLimit = 1024

    /// The next instant `tick` has work, for the engine's wait: exactly the conditions `tick` checks,
    /// so a timer in the past is always handled by the next `tick` (the loop never spins on it).
    func nextTimer(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        var next: ContinuousClock.Instant?
        func consider(_ instant: ContinuousClock.Instant) { next = min(next ?? instant, instant) }
        switch state {
        case .idle: return nil
        case .resolving, .connecting, .handshaking: if let connectDeadline { consider(connectDeadline) }
        case .ready, .draining:
            if let pingSentAt {
                consider(pingSentAt + settings.pingTimeout)
            } else if state == .ready {
                consider(lastRead + settings.upkeepInterval)
            }
        }
        if inFlight > 0 { consider(nextStreamScan) }
        return next
    }

    private func timeOut(at index: Int) {
        let stream = streams[index]
        if let session {
            session.clearStreamContext(stream.streamID)
            try? session.submitReset(streamID: stream.streamID, errorCode: .cancel)
            isDirty = true
        }
        removeFromWire(at: index)
        sink.report(stream, .timedOut("no response within \(settings.requestTimeout) (request timeout)"))
    }

    /// Takes `stream` off the wire list if it is there at its slot (callbacks find it so).
    func removeFromWire(_ stream: HTTP2Stream) {
        let slot = stream.slot
        guard slot >= 0, slot < streams.count, streams[slot] === stream else { return }
        removeFromWire(at: slot)
    }

    /// Takes the stream at `index` off the wire list (swapping the last one into its place).
    func removeFromWire(at index: Int) {
        let stream = streams[index]
        // A stream that leaves before its whole body was packed (timed out, reset, refused) takes the rest along.
        unsentBodyBytes -= stream.request.body.count - stream.bodyOffset
        let last = streams.removeLast()
        if index < streams.count {
            streams[index] = last
            last.slot = index
        }
        stream.slot = -1
    }
}
