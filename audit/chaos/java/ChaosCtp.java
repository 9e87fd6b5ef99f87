// The chaos workload's consume-transform-produce member with Kafka's Java client (kafka-clients of the Kafka under
// test): a read_committed KafkaConsumer in a consumer group (several instances share the group, so partitions
// move between them on every start, kill and eviction) and a transactional KafkaProducer. Each non-empty poll
// becomes one transaction: every input record is written as "{input value}>{transaction}" to a random output
// partition, the consumed positions go in with sendOffsetsToTransaction(offsets, consumer.groupMetadata())
// (KIP-447: the group's generation fences a zombie member), then commit (85 in 100) or abort; after an abort or a
// failed commit the consumer seeks back to the group's committed offsets. The same JSON Lines events as
// audit/chaos/client.py's ctp role: poll, seek (assigned, abort), init, begin, send, offsets, commit, abort
// (each output's send names its input record's value, "input"). The events, the producer's configuration and its
// calls are ChaosClient's (shared with ChaosProducer).
//
//   java -cp <kafka classpath>:<classes> ChaosCtp BOOTSTRAP TID INSTANCE INPUT OUTPUT PARTITIONS GROUP SEED
//        DEADLINE TXN_TIMEOUT_MS PROCESS LOG
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ChaosCtp {
    static String tp(TopicPartition p) {
        return ChaosClient.q(p.topic() + "/" + p.partition());
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], tid = args[1], input = args[3], output = args[4], group = args[6];
        int instance = Integer.parseInt(args[2]), partitions = Integer.parseInt(args[5]);
        long seed = Long.parseLong(args[7]), txnTimeoutMs = Long.parseLong(args[9]);
        double deadline = Double.parseDouble(args[8]);
        ChaosClient.open(args[10], args[11]);
        Random rng = new Random(seed);

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("session.timeout.ms", "10000");
        c.put("heartbeat.interval.ms", "1000");
        c.put("request.timeout.ms", "5000");
        c.put("default.api.timeout.ms", "10000");
        c.put("max.poll.records", "5");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
        // called inside poll(): the seek is logged inside the poll that returns the new assignment's records, as
        // librdkafka's assign callback (the checker reads polls and seeks in completion order)
        consumer.subscribe(List.of(input), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
            }

            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                List<String> positions = new ArrayList<>();
                for (TopicPartition p : assigned) positions.add(tp(p) + ": null");
                int call = ChaosClient.invoke("seek", "\"why\": \"assigned\"");
                ChaosClient.write(call, "ok", "seek", "\"positions\": {" + String.join(", ", positions) + "}", null);
            }
        });

        KafkaProducer<String, String> producer = ChaosClient.producer(bootstrap, tid, txnTimeoutMs);
        String who = ChaosClient.who(tid, instance);
        boolean ready = ChaosClient.init(producer, who, deadline);
        int n = 0;
        while (ready && ChaosClient.now() < deadline) {
            int pollCall = ChaosClient.invoke("poll", "\"group\": " + ChaosClient.q(group));
            ConsumerRecords<String, String> msgs;
            try {
                msgs = consumer.poll(Duration.ofMillis(500));
            } catch (KafkaException e) {
                ChaosClient.write(pollCall, "fail", "poll", "", ChaosClient.name(e));
                Thread.sleep(200);
                continue;
            }
            List<String> recs = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> m : msgs) {
                recs.add("[" + ChaosClient.q(m.topic()) + ", " + m.partition() + ", " + m.offset() + ", "
                    + ChaosClient.q(m.value()) + "]");
                offsets.put(new TopicPartition(m.topic(), m.partition()), new OffsetAndMetadata(m.offset() + 1));
            }
            ChaosClient.write(pollCall, "ok", "poll", "\"records\": [" + String.join(", ", recs) + "]", null);
            if (msgs.isEmpty()) continue;
            String txn = tid + "#" + instance + "." + n++;
            if (!ChaosClient.begin(producer, who, txn)) break;
            boolean acked = true;
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            List<Integer> sendCalls = new ArrayList<>();
            for (ConsumerRecord<String, String> m : msgs) {
                int part = rng.nextInt(partitions);
                if (!ChaosClient.send(producer, output, part, m.value() + ">" + txn, txn,
                                      ", \"input\": " + ChaosClient.q(m.value()), sent, sendCalls)) {
                    acked = false;
                    break;
                }
            }
            boolean reported = ChaosClient.delivered(sent, sendCalls, txnTimeoutMs);
            acked = acked && reported;
            boolean sentOffsets = false;
            if (acked) {
                List<String> o = new ArrayList<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet())
                    o.add(tp(e.getKey()) + ": " + e.getValue().offset());
                int oc = ChaosClient.invoke("offsets", "\"txn\": " + ChaosClient.q(txn) + ", \"group\": "
                    + ChaosClient.q(group) + ", \"offsets\": {" + String.join(", ", o) + "}");
                try {
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    ChaosClient.write(oc, "ok", "offsets", "", null);
                    sentOffsets = true;
                } catch (org.apache.kafka.common.errors.TimeoutException e) {
                    ChaosClient.write(oc, "info", "offsets", "", ChaosClient.name(e));
                } catch (KafkaException e) {
                    ChaosClient.write(oc, "fail", "offsets", "", ChaosClient.name(e));
                    if (ChaosClient.fatal(e)) break;
                }
            }
            String how = sentOffsets && rng.nextDouble() < 0.85 ? "commit" : "abort";
            String outcome = ChaosClient.end(producer, how, txn);
            if (outcome.equals("fatal")) break;
            if (!outcome.equals("ok") || how.equals("abort")) {
                if (how.equals("commit") && ChaosClient.end(producer, "abort", txn).equals("fatal")) break;
                if (!rewind(consumer)) break;
            }
        }
        Runtime.getRuntime().halt(0); // every event is written; close() could block on an unreachable broker
    }

    // back to the group's committed offsets (the aborted transaction's input is consumed again)
    static boolean rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assignment = consumer.assignment();
        if (assignment.isEmpty()) return true;
        int call = ChaosClient.invoke("seek", "\"why\": \"abort\"");
        try {
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assignment, Duration.ofSeconds(10));
            List<String> positions = new ArrayList<>();
            for (TopicPartition p : assignment) {
                OffsetAndMetadata m = committed.get(p);
                long offset = m == null ? 0 : m.offset();
                consumer.seek(p, offset);
                positions.add(tp(p) + ": " + offset);
            }
            ChaosClient.write(call, "ok", "seek", "\"positions\": {" + String.join(", ", positions) + "}", null);
            return true;
        } catch (KafkaException e) {
            // the positions are unknown now: this instance ends and a new one starts from the committed offsets
            ChaosClient.write(call, "fail", "seek", "", ChaosClient.name(e));
            return false;
        }
    }
}
