// A consume-transform-produce pipeline with Kafka's Java client, a zombie and a restart, against any bootstrap
// address (txnspec serve, or a real Kafka broker): the same outcome is expected from both.
//
//   java -cp <kafka-clients jars>:. TxnHarness <bootstrap> <run-id>
//
// 1. 10 input records; 2. instance A (transactional.id ctp-<run>, a read_committed consumer in group g-<run>)
// transforms the first 4 in committed transactions with sendOffsetsToTransaction; 3. A opens a transaction and
// writes "zombie" (flushed, not committed); 4. instance B initialises the same transactional.id: A is now a
// zombie and its commit must fail; 5. B, with a new consumer of the group, transforms the rest from the committed
// offset; 6. KIP-447: a member's group metadata from before a rebalance is stale: a transaction sending offsets
// with it must fail (CommitFailedException), with the current metadata it commits; 7. a read_committed reader
// reads the output. The last line is RESULT {json}; exit 0 when the output is each input transformed exactly
// once, no zombie record, the group offset at 10, the zombie fenced and the stale generation refused. What the
// harnesses share is Harness.java's.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class TxnHarness {
    static final int INPUTS = 10;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], run = args[1];
        String in = "in-" + run, out = "out-" + run, group = "g-" + run, tid = "ctp-" + run;
        Harness.createTopics(bootstrap, in, out);
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(Harness.producerProps(bootstrap, null))) {
            for (int i = 0; i < INPUTS; i++) plain.send(new ProducerRecord<>(in, 0, null, "v" + i)).get();
        }
        KafkaProducer<String, String> a = new KafkaProducer<>(Harness.producerProps(bootstrap, tid));
        a.initTransactions();
        KafkaConsumer<String, String> consumerA = consumer(bootstrap, group, in);
        int processed = transform(a, consumerA, out, 4);
        a.beginTransaction();
        a.send(new ProducerRecord<>(out, 0, null, "zombie")).get();
        consumerA.close();

        KafkaProducer<String, String> b = new KafkaProducer<>(Harness.producerProps(bootstrap, tid));
        b.initTransactions();
        String zombie = "committed";
        try {
            a.commitTransaction();
        } catch (Exception e) {
            zombie = e.getClass().getSimpleName();
        }
        a.close(Duration.ofSeconds(5));

        KafkaConsumer<String, String> consumerB = consumer(bootstrap, group, in);
        processed += transform(b, consumerB, out, INPUTS - processed);
        consumerB.close();
        b.close();

        String[] generation = staleGeneration(bootstrap, group, in, "gen-" + run);

        List<String> output = Harness.readCommitted(bootstrap, out, 15_000);
        long committed;
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            OffsetAndMetadata om = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .get(new TopicPartition(in, 0));
            committed = om == null ? -1 : om.offset();
        }
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < INPUTS; i++) expected.add("V" + i);
        List<String> sorted = new ArrayList<>(output);
        Collections.sort(sorted, (x, y) -> Integer.compare(Integer.parseInt(x.substring(1)), Integer.parseInt(y.substring(1))));
        boolean ok = sorted.equals(expected) && committed == INPUTS && !zombie.equals("committed")
                && !generation[0].equals("committed") && generation[1].equals("committed");
        System.out.println("RESULT {\"output\": " + Harness.json(output) + ", \"committed_offset\": " + committed
                + ", \"zombie_commit\": \"" + zombie + "\", \"stale_generation_commit\": \"" + generation[0]
                + "\", \"current_generation_commit\": \"" + generation[1] + "\", \"processed\": " + processed
                + ", \"ok\": " + ok + "}");
        System.exit(ok ? 0 : 1);
    }

    static int transform(KafkaProducer<String, String> producer, KafkaConsumer<String, String> consumer, String out,
                         int wanted) {
        int done = 0;
        long deadline = System.currentTimeMillis() + 30_000;
        while (done < wanted && System.currentTimeMillis() < deadline) {
            var records = consumer.poll(Duration.ofMillis(200));
            if (records.isEmpty()) continue;
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : records) {
                if (done == wanted) break;
                producer.send(new ProducerRecord<>(out, 0, null, r.value().toUpperCase()));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                done++;
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
            for (var e : offsets.entrySet()) consumer.seek(e.getKey(), e.getValue().offset());
        }
        return done;
    }

    /** A rebalance makes the first member's group metadata stale: its offsets are refused, the current ones taken. */
    static String[] staleGeneration(String bootstrap, String group, String topic, String tid) {
        KafkaConsumer<String, String> first = consumer(bootstrap, group, topic);
        long deadline = System.currentTimeMillis() + 30_000;
        while (first.assignment().isEmpty() && System.currentTimeMillis() < deadline) first.poll(Duration.ofMillis(100));
        ConsumerGroupMetadata stale = first.groupMetadata();
        KafkaConsumer<String, String> second = consumer(bootstrap, group, topic);
        while (System.currentTimeMillis() < deadline && !(second.groupMetadata().generationId() > stale.generationId()
                && first.groupMetadata().generationId() == second.groupMetadata().generationId())) {
            first.poll(Duration.ofMillis(50));
            second.poll(Duration.ofMillis(50));
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(INPUTS));
        String[] outcome = new String[2];
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(Harness.producerProps(bootstrap, tid))) {
            producer.initTransactions();
            ConsumerGroupMetadata[] tried = {stale, first.groupMetadata()};
            for (int i = 0; i < 2; i++) {
                outcome[i] = "committed";
                producer.beginTransaction();
                try {
                    producer.sendOffsetsToTransaction(offsets, tried[i]);
                    producer.commitTransaction();
                } catch (Exception e) {
                    outcome[i] = e.getClass().getSimpleName();
                    producer.abortTransaction();
                }
            }
        }
        first.close();
        second.close();
        return outcome;
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String topic) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("heartbeat.interval.ms", "300");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }
}
