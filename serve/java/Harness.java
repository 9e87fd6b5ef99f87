// What the Java harnesses share (TxnHarness.java and TxnAdmin.java here, java2pc/TwoPhaseHarness.java, which is
// compiled against Kafka 4.4's client with this file): the topics created through the Admin client, a producer's
// configuration, a read_committed read of a partition to its end (bounded), and the JSON of the RESULT line.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Harness {
    // each topic with one partition, replication factor 1
    static void createTopics(String bootstrap, String... names) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (String name : names) topics.add(new NewTopic(name, 1, (short) 1));
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(topics).all().get();
        }
    }

    // an idempotent producer, transactional when transactionalId is not null
    static Properties producerProps(String bootstrap, String transactionalId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("max.block.ms", "30000");
        if (transactionalId != null) p.put("transactional.id", transactionalId);
        return p;
    }

    // the values of partition 0 of topic at read_committed, from its start to the end it had when the read began
    static List<String> readCommitted(String bootstrap, String topic, long timeoutMs) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) values.add(r.value());
            }
        }
        return values;
    }

    static String json(List<String> values) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) sb.append(i == 0 ? "" : ", ").append('"').append(values.get(i)).append('"');
        return sb.append(']').toString();
    }
}
