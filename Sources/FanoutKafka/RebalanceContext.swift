import CRdKafka
import Synchronization

/// The consumer's rebalance callback target, reached through the client's `ClientContext`.
final class RebalanceContext: Sendable {
    let handler: KafkaRebalanceHandler
    /// Whether the configured assignors are cooperative (incremental assign/unassign) or eager.
    /// Known from the configuration, because asking librdkafka (`rd_kafka_rebalance_protocol`) is a
    /// round trip to the group thread that returns NULL once the member has been kicked out of the
    /// group — exactly when a lost assignment is being handled.
    let cooperative: Bool
    /// Errors raised inside the callback (which must not throw across C), handed to the next poll.
    private let pendingErrors = Mutex<[KafkaError]>([])
    /// Callbacks served so far: lets `close` see that the group has gone quiet.
    let callbacks = Atomic<Int>(0)
    /// Whether an assignment (possibly empty) ever arrived, i.e. a SyncGroup succeeded: from then on
    /// librdkafka's sticky assignor has its state (see `KafkaConsumer.close`).
    let synced = Atomic(false)
    /// A cooperative member just revoked in an orderly way: the assignment that follows (usually
    /// empty) is not the end of the rebalance, librdkafka rejoins right after it (KIP-429).
    private let rejoinFollows = Atomic(false)

    init(handler: KafkaRebalanceHandler, cooperative: Bool) {
        self.handler = handler
        self.cooperative = cooperative
    }

    func record(_ error: KafkaError) {
        pendingErrors.withLock { errors in
            errors.append(error)
            if errors.count > 100 { errors.removeFirst(errors.count - 100) }   // bounded
        }
    }

    func drainErrors() -> [KafkaError] {
        pendingErrors.withLock { errors in
            defer { errors.removeAll() }
            return errors
        }
    }

    func rebalance(_ rk: OpaquePointer, _ err: rd_kafka_resp_err_t,
                   _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        callbacks.add(1, ordering: .relaxed)
        let partitions = RDKafkaTopicPartitionList.entries(of: list).map(\.partition)
        switch err {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            synced.store(true, ordering: .relaxed)
            if cooperative {
                if let error = rd_kafka_incremental_assign(rk, list) {
                    record(KafkaError(.assignment, consuming: error, context: "incremental assign of \(partitions.count) partition(s)"))
                    return
                }
            } else {
                let code = rd_kafka_assign(rk, list)
                if code != RD_KAFKA_RESP_ERR_NO_ERROR {
                    record(KafkaError(.assignment, code, "assign of \(partitions.count) partition(s) failed"))
                    return
                }
            }
            if !partitions.isEmpty { handler.assigned(partitions) }
            if !cooperative || !rejoinFollows.exchange(false, ordering: .relaxed) { handler.settled() }

        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            if rd_kafka_assignment_lost(rk) != 0 {
                if !partitions.isEmpty { handler.lost(partitions) }
            } else if !partitions.isEmpty {
                rejoinFollows.store(true, ordering: .relaxed)
                let offsets = handler.revoking(partitions)
                if !offsets.isEmpty {
                    let commitList = RDKafkaTopicPartitionList(offsets: offsets)
                    let code = commitList.withPointer { rd_kafka_commit(rk, $0, 0) }
                    let failures = commitList.failures
                    if code != RD_KAFKA_RESP_ERR_NO_ERROR || !failures.isEmpty {
                        record(KafkaError(.commit, code,
                                          "commit of revoked partitions failed; their next owner replays from the previous commit",
                                          partitionFailures: failures))
                    }
                }
            }
            unassign(rk, list, count: partitions.count)

        default:
            record(KafkaError(.assignment, err, "rebalance error: \(KafkaResponseCode(err).message)"))
            unassign(rk, list, count: partitions.count)
        }
    }

    private func unassign(_ rk: OpaquePointer, _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>,
                          count: Int) {
        if cooperative {
            if let error = rd_kafka_incremental_unassign(rk, list) {
                record(KafkaError(.assignment, consuming: error, context: "incremental unassign of \(count) partition(s)"))
            }
        } else {
            let code = rd_kafka_assign(rk, nil)
            if code != RD_KAFKA_RESP_ERR_NO_ERROR {
                record(KafkaError(.assignment, code, "unassign failed"))
            }
        }
    }
}

/// The C rebalance callback: back to the context object, no throwing across C.
func fanoutRebalanceCallback(_ rk: OpaquePointer?, _ err: rd_kafka_resp_err_t,
                             _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
                             _ opaque: UnsafeMutableRawPointer?) {
    guard let rk, let list, let opaque, let context = ClientContext.from(opaque).rebalance else { return }
    context.rebalance(rk, err, list)
}
